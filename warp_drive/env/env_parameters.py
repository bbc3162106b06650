"""An env's parameters, declared once: the table that validates, pushes and describes them.

Before, each scalar of an env was named in four or five places (constructor, checks, ``add_data``, the C
signature, the reference) and every env checked its own values, some not at all (CartPole's ``length=0``
trained into NaN). An env now declares a tuple of :class:`Parameter` and that one declaration drives

* validation at construction (:func:`resolve`): type (a bool is not an int, 2.5 is not an int, a string is
  not a number), finiteness, the float32/int32 range a kernel reads, bounds (pydantic's ``gt``/``ge``/``lt``/
  ``le``) and ``choices``; a key the table does not know is refused listing the known ones. Every error is one
  line naming the env, the parameter, the value, the bound and the fix (:class:`ParameterError`);
* the kernel's scalars (:meth:`Parameter.device_value`): numeric and bool parameters are pushed under their
  own names, float as float32, int as int32, bool as int32 0/1, so the kernel takes them by C name;
* the run config's ``env.config`` keys and ``warp-drive envs --describe`` (:func:`describe`).

``num_agents`` and ``episode_length`` may be parameters too: they set the attributes the framework reads (it
pushes ``n_agents`` and ``episode_length`` itself, so the table never does).
"""

from __future__ import annotations

import difflib
import math
from dataclasses import dataclass
from typing import Any, Iterable, Mapping, Sequence

import numpy as np

TYPES = (bool, int, float, str)
# Scalars the framework pushes itself (or reads as attributes): a parameter of such a name is never pushed.
FRAMEWORK_NAMES = frozenset({"num_agents", "n_agents", "episode_length", "num_envs", "n_envs"})
_FLOAT32_MAX = float(np.finfo(np.float32).max)
_INT32 = np.iinfo(np.int32)
_BOUNDS = (("gt", ">", lambda v, b: v > b), ("ge", ">=", lambda v, b: v >= b),
           ("lt", "<", lambda v, b: v < b), ("le", "<=", lambda v, b: v <= b))


class ParameterError(TypeError, ValueError):
    """A value the table refuses, or a key it does not know. Both a TypeError and a ValueError (what a
    constructor's wrong keyword and wrong value raise), with ``env``, ``parameter`` and ``value``."""

    def __init__(self, message: str, env: str = "", parameter: str = "", value: Any = None):
        super().__init__(message)
        self.env, self.parameter, self.value = env, parameter, value


@dataclass(frozen=True)
class Parameter:
    """One parameter of an env: ``name``, ``default``, ``type`` (int, float, bool or str; None: the default's),
    bounds ``gt``/``ge``/``lt``/``le``, ``choices``, ``doc``, and ``kernel`` (whether it is pushed as a kernel
    scalar; None: numeric and bool ones are). A default of None means "unset" (give ``type``); it is then
    accepted as a value and never pushed."""

    name: str
    default: Any
    type: type | None = None
    gt: float | None = None
    ge: float | None = None
    lt: float | None = None
    le: float | None = None
    choices: Sequence[Any] | None = None
    doc: str = ""
    kernel: bool | None = None

    def __post_init__(self):
        kind = self.type if self.type is not None else type(self.default)
        if kind not in TYPES:
            raise TypeError(f"Parameter {self.name!r}: type must be one of int, float, bool, str (or inferred from "
                            f"a default of one of them), got {kind.__name__}")
        object.__setattr__(self, "type", kind)
        if self.default is not None:
            self.validate(self.default, owner="Parameter declaration")

    @property
    def pushed(self) -> bool:
        """Whether the value reaches the device as a kernel scalar of this name."""
        if self.name in FRAMEWORK_NAMES:
            return False
        return self.type is not str if self.kernel is None else bool(self.kernel)

    def bounds(self) -> str:
        """The bounds and choices in words, e.g. ``> 0, <= 1``; empty when there are none."""
        parts = [f"{symbol} {getattr(self, key):g}" for key, symbol, _ in _BOUNDS if getattr(self, key) is not None]
        if self.choices is not None:
            parts.append("one of " + ", ".join(map(repr, self.choices)))
        return ", ".join(parts)

    def _error(self, owner: str, value: Any, problem: str, fix: str) -> ParameterError:
        return ParameterError(f"{owner}: {self.name}={value!r}: {problem}. Fix: {fix} (default {self.default!r})",
                              owner, self.name, value)

    def validate(self, value: Any, owner: str) -> Any:
        """``value`` as this parameter holds it (a Python bool, int, float or str, or None where the default
        is None), or :class:`ParameterError`."""
        if value is None and self.default is None:
            return None
        given, kind = value, self.type  # errors name the value as given (0, not 0.0)
        if kind is bool:  # 0 and 1 are let through (C-minded configs write them); 2, 0.5 and "yes" are not
            if not (isinstance(value, (bool, np.bool_)) or (isinstance(value, (int, np.integer)) and value in (0, 1))):
                raise self._error(owner, value, f"must be true or false, got {type(value).__name__}",
                                  f"set {self.name} to true or false")
            value = bool(value)
        elif kind is str:
            if not isinstance(value, str):
                raise self._error(owner, value, f"must be a string, got {type(value).__name__}",
                                  f"set {self.name} to a string")
        else:
            value = self._number(value, owner)
        if self.choices is not None and value not in self.choices:
            raise self._error(owner, given, f"must be {self.bounds()}", f"set {self.name} to one of those")
        for key, symbol, holds in _BOUNDS:
            bound = getattr(self, key)
            if bound is not None and not holds(value, bound):
                raise self._error(owner, given, f"must be {symbol} {bound:g} ({key}={bound:g})",
                                  f"set {self.name} {self.bounds()}")
        return value

    def _number(self, value: Any, owner: str) -> int | float:
        is_int = self.type is int
        what = "an integer" if is_int else "a number"
        if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float, np.integer, np.floating)):
            raise self._error(owner, value, f"must be {what}, got {type(value).__name__}",
                              f"set {self.name} to {what}")
        if isinstance(value, (float, np.floating)) and not math.isfinite(value):
            raise self._error(owner, value, "must be finite numbers (NaN and inf are refused)",
                              f"set {self.name} to a finite number")
        if is_int:
            if isinstance(value, (float, np.floating)) and not float(value).is_integer():
                raise self._error(owner, value, "must be an integer", f"set {self.name} to a whole number")
            value = int(value)
            if (self.pushed or self.name in FRAMEWORK_NAMES) and not _INT32.min <= value <= _INT32.max:
                raise self._error(owner, value, "beyond int32's range, which the kernel reads",
                                  f"set {self.name} within [{_INT32.min}, {_INT32.max}]")
            return value
        value = float(value)
        if self.pushed and abs(value) > _FLOAT32_MAX:
            raise self._error(owner, value, "beyond float32's range (magnitude at most 3.4e38), which the kernel "
                              "computes in", f"set {self.name} to a smaller magnitude")
        return value

    def device_value(self, value: Any) -> np.generic:
        """``value`` as the kernel scalar: float32 for a float, int32 for an int or a bool (0/1)."""
        return np.float32(value) if self.type is float else np.int32(int(value))


def resolve(owner: str, parameters: Iterable[Parameter], config: Mapping[str, Any],
            known: Sequence[str] = ()) -> dict[str, Any]:
    """Every parameter's validated value, ``config``'s or its default. A key of ``config`` that is no
    parameter is refused, listing ``known`` (the parameters and any keywords the env's constructor takes
    beside them)."""
    table = {p.name: p for p in parameters}
    unknown = [key for key in config if key not in table]
    if unknown:
        names = list(dict.fromkeys([*table, *known]))
        close = difflib.get_close_matches(unknown[0], names, n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        raise ParameterError(f"{owner}: unknown parameter {unknown[0]!r}{hint}; known: {', '.join(names) or 'none'}. "
                             f"Fix: use one of those names", owner, unknown[0], config[unknown[0]])
    return {name: p.validate(config.get(name, p.default), owner) for name, p in table.items()}


def describe(parameters: Iterable[Parameter]) -> str:
    """The table as text, one parameter a row (``warp-drive envs --describe``): name, type, default, bounds,
    kernel (``scalar``: pushed under its name; ``framework``: a name the framework pushes itself, such as
    ``episode_length``; ``-``: host only) and doc."""
    header = ("name", "type", "default", "bounds", "kernel", "doc")
    rows = [header] + [(p.name, p.type.__name__, repr(p.default), p.bounds(),
                        "scalar" if p.pushed else "framework" if p.name in FRAMEWORK_NAMES else "-", p.doc)
                       for p in parameters]
    widths = [max(len(row[i]) for row in rows) for i in range(len(header) - 1)]
    return "\n".join("  ".join(cell.ljust(w) for cell, w in zip(row, widths)) + "  " + row[-1] for row in rows)
