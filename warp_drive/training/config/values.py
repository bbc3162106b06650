"""The kinds of value a run-config key holds, as pydantic types that say what they expect.

Each kind is an ``Annotated`` type: pydantic's checks do the work (strict types, so ``true`` is not ``1``
and ``"8"`` is not ``8``; ``Ge``/``Le`` bounds; ``Literal`` choices; finite floats), and
:class:`Expected`, the outermost annotation, words whatever pydantic found wrong as this project's
one-line message (``expected an integer >= 1, got 0 (int)``). :class:`OrNull` allows ``null`` and says
what it means. The key reference (``reference.py``) reads the same two annotations, so the page and
the error messages cannot disagree.

Conversions kept on purpose: an integral float is an int (``total_steps: 1e6``), an int is a float
(``lr: 1``), a string choice is case-insensitive (``algorithm: ppo``).
"""

from __future__ import annotations

import copy
import difflib
import sys
from dataclasses import dataclass
from typing import Annotated, Any, Literal, Mapping, Optional

from annotated_types import Ge, Gt, Le, MinLen
from pydantic import AfterValidator, BeforeValidator, Field, Strict, ValidationError
from pydantic_core import core_schema

from warp_drive.training.config.errors import OWN_ERROR, UNKNOWN_KEY, found_in, got, problem, problems

BUILTIN_MODELS = ("fully_connected", "gru")


def reworded(reword: Any, schema: core_schema.CoreSchema) -> core_schema.CoreSchema:
    """``schema``, with its ``ValidationError`` replaced by ``reword(value, error)`` (the error itself: kept)."""

    def validate(value: Any, inner: Any) -> Any:
        try:
            return inner(value)
        except ValidationError as exc:
            replacement = reword(value, exc)
            if replacement is exc:
                raise
            raise replacement from None

    return core_schema.no_info_wrap_validator_function(validate, schema)


@dataclass(frozen=True)
class Expected:
    """What a key's value must be (``an integer >= 1``): said by its error messages and by the key reference.

    pydantic's own complaints about the value are replaced by ``expected <what>, got <value> (<type>)``;
    messages of this project's validators (already worded, or about a list's element) pass unchanged.
    ``case_insensitive``: a choice among strings, matched ignoring case (said when a string is refused).
    """

    what: str
    case_insensitive: bool = False

    def __get_pydantic_core_schema__(self, source: Any, handler: Any) -> core_schema.CoreSchema:
        return reworded(self._reword, handler(source))

    def _reword(self, value: Any, exc: ValidationError) -> Exception:
        if any(e["type"] in (OWN_ERROR, UNKNOWN_KEY) or e["loc"] for e in exc.errors()):
            return exc  # worded already (a list element's, a schedule's)
        what = self.what + (" (case-insensitive)" if self.case_insensitive and isinstance(value, str)
                            and value else "")
        return problem(f"expected {what}, {got(value)}")


@dataclass(frozen=True)
class OrNull:
    """The key may be ``null``, which means ``means`` (``no clipping``); its messages say so."""

    means: str

    def __get_pydantic_core_schema__(self, source: Any, handler: Any) -> core_schema.CoreSchema:
        return reworded(lambda value, exc: problems(found_in(exc, note=f" (or null for {self.means})")),
                        handler(source))


def or_null(kind: Any, means: str) -> Any:
    """``kind``, or null meaning ``means``."""
    return Annotated[Optional[kind], OrNull(means)]


def _integral_float_as_int(value: Any) -> Any:
    return int(value) if isinstance(value, float) and value.is_integer() else value


def integer(minimum: int) -> Any:
    """An int >= ``minimum`` (``1e6``, an integral float, counts; ``true`` does not)."""
    return Annotated[int, Strict(), Ge(minimum), BeforeValidator(_integral_float_as_int),
                     Expected(f"an integer >= {minimum}")]


def number(minimum: float | None = None, maximum: float | None = None, positive: bool = False) -> Any:
    """A finite float (an int counts; ``true`` does not), within the bounds given."""
    bounds: list[Any] = []
    if positive:
        bounds, what = [Gt(0)], "a number > 0"
    elif minimum is not None and maximum is not None:
        bounds, what = [Ge(minimum), Le(maximum)], f"a number in [{minimum}, {maximum}]"
    elif minimum is not None:
        bounds, what = [Ge(minimum)], f"a number >= {minimum}"
    else:
        what = "a number"
    return Annotated[float, Strict(), Field(allow_inf_nan=False), *bounds, Expected(what)]


def choice(choices: tuple[str, ...], case: str = "lower") -> Any:
    """One of ``choices``, matched ignoring case (the value is stored as ``str.lower`` or ``str.upper`` of it)."""
    normalise = getattr(str, case)
    return Annotated[Literal[choices], BeforeValidator(lambda v: normalise(v) if isinstance(v, str) else v),
                     Expected("one of " + ", ".join(choices), case_insensitive=True)]


def _string_keys(value: dict) -> dict:
    bad = [k for k in value if not isinstance(k, str)]
    if bad:
        raise problem(f"keys must be strings, got {bad[0]!r}")
    return copy.deepcopy(value)  # the config owns its copy: editing the input (or to_dict()) does not reach it


def _empty_if_null(value: Any) -> Any:
    return {} if value is None else value


Text = Annotated[str, Strict(), MinLen(1), Expected("a non-empty string")]
AnyText = Annotated[str, Strict(), Expected("a string")]  # saving.name: empty means "the run's name"
Flag = Annotated[bool, Strict(), Expected("a boolean (true/false)")]
# A mapping this schema does not look inside (env constructor arguments, a user model's keys).
FreeMapping = Annotated[Annotated[dict, BeforeValidator(_empty_if_null), Expected("a mapping")],
                        AfterValidator(_string_keys)]
LayerSizes = Annotated[list[integer(1)], Expected("a list of positive integers (hidden layer sizes)")]


def _registered_model(name: str) -> str:
    """A key of the model registry: built in, or registered with ``models.register_model``.

    The registry lives in ``models`` (torch); a user model is registered by importing that package, so
    when it is not imported only the built-in names exist (and reading a config imports no torch).
    """
    models = sys.modules.get("warp_drive.training.models")
    known = set(BUILTIN_MODELS) | set(models.registered_models() if models is not None else ())
    if name not in known:
        close = difflib.get_close_matches(name, sorted(known), n=1)
        hint = f"did you mean {close[0]!r}? " if close else ""
        raise problem(f"unknown model type {name!r}; {hint}known: {', '.join(sorted(known))} (register your own "
                      f"with warp_drive.training.models.register_model before loading the config)")
    return name


ModelType = Annotated[Text, AfterValidator(_registered_model)]


def is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def is_mapping(value: Any) -> bool:
    return isinstance(value, Mapping)
