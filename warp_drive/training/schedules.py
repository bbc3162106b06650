"""Hyper-parameter schedules over the run's environment steps.

A config value such as ``lr`` or ``entropy_coef`` may be

* a number: constant for the whole run;
* ``{type: linear, start: a, end: b}``: linear from ``a`` at step 0 to ``b`` at
  ``total_steps`` (clamped outside that range, so a resumed or over-long run
  keeps the final value rather than extrapolating past it);
* ``[[step0, v0], [step1, v1], ...]``: piecewise linear in env steps, clamped
  at both ends -- the original WarpDrive's format, kept so old configs work.

Schedules are evaluated on the *env step* counter (one step of one replica),
not on iterations, so changing ``num_envs`` or ``rollout_length`` does not
silently stretch or squash the schedule.
"""

from __future__ import annotations

import bisect
import math
import numbers
from dataclasses import dataclass
from typing import Any, Sequence


def _as_float(value: Any, what: str) -> float:
    """A finite float, or a ValueError naming ``what`` (bools are rejected: ``lr: true`` is a typo)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise ValueError(f"{what} must be a number, got {value!r} ({type(value).__name__})")
    out = float(value)
    if not math.isfinite(out):
        raise ValueError(f"{what} must be finite, got {value!r}")
    return out


@dataclass(frozen=True)
class Schedule:
    """A piecewise-linear function of the env step, clamped at both ends.

    Every schedule kind reduces to breakpoints ``steps`` (strictly increasing)
    and ``values``: a constant is one breakpoint, a linear schedule two. One
    representation means one ``value`` implementation to get right.
    """

    steps: tuple[float, ...]
    values: tuple[float, ...]

    # ------------------------------------------------------------------ construction
    @classmethod
    def constant(cls, value: float) -> "Schedule":
        return cls((0.0,), (_as_float(value, "constant schedule value"),))

    @classmethod
    def parse(cls, spec: Any, total_steps: int, name: str = "schedule") -> "Schedule":
        """Build a schedule from its config form; ``name`` (e.g. ``policy.tagger.lr``) labels errors."""
        if isinstance(spec, Schedule):
            return spec
        if isinstance(spec, bool):
            raise ValueError(f"{name}: a schedule must be a number, a {{type: linear, ...}} mapping or a "
                             f"[[step, value], ...] list, got a bool ({spec!r})")
        if isinstance(spec, numbers.Real):
            return cls.constant(_as_float(spec, name))
        if isinstance(spec, dict):
            return cls._parse_mapping(spec, total_steps, name)
        if isinstance(spec, (list, tuple)):
            return cls._parse_piecewise(spec, name)
        raise ValueError(f"{name}: a schedule must be a number, a {{type: linear, start, end}} mapping or a "
                         f"[[step, value], ...] list, got {type(spec).__name__} {spec!r}")

    @classmethod
    def _parse_mapping(cls, spec: dict, total_steps: int, name: str) -> "Schedule":
        kind = spec.get("type")
        if kind is None:
            raise ValueError(f"{name}: schedule mapping needs a 'type' key (supported: 'linear', 'constant'); "
                             f"got keys {sorted(spec)}")
        if kind == "constant":
            extra = set(spec) - {"type", "value"}
            if extra or "value" not in spec:
                raise ValueError(f"{name}: constant schedule takes exactly 'value'; got keys {sorted(spec)}")
            return cls.constant(_as_float(spec["value"], f"{name}.value"))
        if kind != "linear":
            raise ValueError(f"{name}: unknown schedule type {kind!r} (supported: 'linear', 'constant')")
        missing = {"start", "end"} - set(spec)
        extra = set(spec) - {"type", "start", "end"}
        if missing:
            raise ValueError(f"{name}: linear schedule is missing {sorted(missing)}")
        if extra:
            raise ValueError(f"{name}: linear schedule has unknown keys {sorted(extra)} (allowed: type, start, end)")
        start = _as_float(spec["start"], f"{name}.start")
        end = _as_float(spec["end"], f"{name}.end")
        total = _as_float(total_steps, f"{name}: total_steps")
        if total <= 0:
            raise ValueError(f"{name}: a linear schedule needs total_steps > 0, got {total_steps!r}")
        return cls((0.0, total), (start, end))

    @classmethod
    def _parse_piecewise(cls, spec: Sequence, name: str) -> "Schedule":
        if len(spec) == 0:
            raise ValueError(f"{name}: piecewise schedule [[step, value], ...] must have at least one point")
        steps: list[float] = []
        values: list[float] = []
        for i, point in enumerate(spec):
            if isinstance(point, (str, bytes)) or not isinstance(point, (list, tuple)) or len(point) != 2:
                raise ValueError(f"{name}[{i}]: each piecewise point must be a [step, value] pair, got {point!r}")
            step = _as_float(point[0], f"{name}[{i}] step")
            value = _as_float(point[1], f"{name}[{i}] value")
            if step < 0:
                raise ValueError(f"{name}[{i}]: step must be >= 0, got {point[0]!r}")
            if steps and step <= steps[-1]:
                raise ValueError(f"{name}[{i}]: steps must be strictly increasing, got {point[0]!r} "
                                 f"after {spec[i - 1][0]!r}")
            steps.append(step)
            values.append(value)
        return cls(tuple(steps), tuple(values))

    # ------------------------------------------------------------------ evaluation
    def value(self, env_step: int) -> float:
        """The value at ``env_step``: linear between breakpoints, the end values outside them."""
        steps, values = self.steps, self.values
        if env_step <= steps[0]:
            return values[0]
        if env_step >= steps[-1]:
            return values[-1]
        i = bisect.bisect_right(steps, env_step)  # steps[i-1] <= env_step < steps[i]
        s0, s1 = steps[i - 1], steps[i]
        v0, v1 = values[i - 1], values[i]
        return v0 + (v1 - v0) * (env_step - s0) / (s1 - s0)

    __call__ = value

    @property
    def is_constant(self) -> bool:
        """True when the value never changes (lets the trainer skip per-iteration optimizer updates)."""
        return all(v == self.values[0] for v in self.values)
