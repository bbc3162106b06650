"""The shape of a schedule key (``lr``, ``entropy_coef``): a number, a linear or a constant schedule, or
piecewise-linear ``[step, value]`` pairs.

Only the shape is checked here; ``warp_drive.training.schedules`` turns a spec into a function of the env
step. A spec stays plain data (a float, a dict, a list of pairs) so that a saved ``config.yaml`` reads as
it was written. The two mapping shapes are sections of their own, so an unknown or a missing key of a
schedule is worded like any other.
"""

from typing import Annotated, Any, ClassVar, Literal

from pydantic import PlainValidator, TypeAdapter, ValidationError, WrapValidator

from warp_drive.training.config.errors import found_in, got, problem, problems
from warp_drive.training.config.section import Section
from warp_drive.training.config.values import Expected, is_mapping, is_number, number

SCHEDULE_SHAPES = ("a number, {type: linear, start: a, end: b}, {type: constant, value: v} "
                   "or a list of [step, value] pairs sorted by step")


class ScheduleShape(Section):
    """A schedule written as a mapping; ``type`` names its kind."""

    KIND: ClassVar[str] = ""

    @classmethod
    def missing_message(cls, key: str) -> str:
        return f"required for a {cls.KIND} schedule"


class LinearSchedule(ScheduleShape):
    """From ``start`` at step 0 to ``end`` at the run's last step."""

    KIND: ClassVar[str] = "linear"
    type: Literal["linear"]
    start: number()
    end: number()


class ConstantSchedule(ScheduleShape):
    """``value`` throughout."""

    KIND: ClassVar[str] = "constant"
    type: Literal["constant"]
    value: number()


SCHEDULE_KINDS: dict[str, type[ScheduleShape]] = {"linear": LinearSchedule, "constant": ConstantSchedule}
_number = TypeAdapter(number())
_step = TypeAdapter(number(minimum=0))


def _checked(adapter: TypeAdapter, value: Any, where: tuple) -> float:
    try:
        return adapter.validate_python(value)
    except ValidationError as exc:
        raise problems(found_in(exc, prefix=where)) from None


def _piecewise(pairs: Any) -> list[list[float]]:
    if not pairs:
        raise problem("a piecewise schedule needs at least one [step, value] pair, got []")
    points: list[list[float]] = []
    for i, point in enumerate(pairs):
        if not (isinstance(point, (list, tuple)) and len(point) == 2):
            raise problems([((i,), f"expected a [step, value] pair, {got(point)}", point)])
        step = _checked(_step, point[0], (i, "[0] (step)"))
        level = _checked(_number, point[1], (i, "[1] (value)"))
        if points and step <= points[-1][0]:
            raise problems([((i,), f"steps must be strictly increasing, got step {point[0]!r} after "
                                   f"{points[-1][0]!r}", point)])
        points.append([int(step) if step.is_integer() else step, level])
    return points


def _schedule_spec(value: Any) -> float | dict | list:
    if is_number(value):
        return _checked(_number, value, ())
    if is_mapping(value):
        kind = value.get("type")
        kind = kind.lower() if isinstance(kind, str) else kind
        if kind not in SCHEDULE_KINDS:
            raise problems([(("type",), f"expected 'linear' or 'constant' (a schedule is {SCHEDULE_SHAPES}), "
                                        f"{got(value.get('type'))}", value.get("type"))])
        return SCHEDULE_KINDS[kind].model_validate({**value, "type": kind}).model_dump()
    if isinstance(value, (list, tuple)):
        return _piecewise(value)
    raise ValueError("not a schedule")  # pydantic's; Expected words it with the shapes


def _positive_rate(value: Any, validate: Any) -> float | dict | list:
    """A learning rate: its values >= 0 and its start > 0 (a negative rate climbs the loss, a zero one
    learns nothing; a schedule may decay to 0)."""
    spec = validate(value)
    if isinstance(spec, float):
        values, first = [spec], spec
    elif isinstance(spec, dict):
        values = [spec[k] for k in ("start", "end", "value") if k in spec]
        first = values[0]
    else:
        values, first = [v for _, v in spec], max(v for _, v in spec)
    if min(values) < 0 or first <= 0:
        raise problem(f"a learning rate must be > 0 (a schedule may only decay to 0), {got(value)}")
    return spec


Schedule = Annotated[Any, PlainValidator(_schedule_spec), Expected(SCHEDULE_SHAPES)]
LearningRate = Annotated[Schedule, WrapValidator(_positive_rate)]
