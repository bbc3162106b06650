"""Reading and checking run-config values: ``ConfigError``, the bounded YAML
reader, and one check per kind of value.

A check is ``check(value, path) -> normalised value``; it raises
:class:`ConfigError` with a message that names the path, what was expected and
what was given. The schema (``training/config.py``) attaches a check to each
field; this module knows no field.
"""

from __future__ import annotations

import copy
import difflib
import functools
import math
import re
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping

import yaml

BUILTIN_MODELS = ("fully_connected", "gru")


class ConfigError(ValueError):
    """An invalid run config. ``errors`` holds one message per problem found."""

    def __init__(self, errors: str | Iterable[str], source: str | None = None):
        self.errors = [errors] if isinstance(errors, str) else list(errors)
        self.source = source
        if len(self.errors) == 1 and source is None:
            message = self.errors[0]
        else:
            header = f"invalid config {source}" if source else "invalid config"
            message = header + ":\n" + "\n".join(f"  {e}" for e in self.errors)
        super().__init__(message)


# --------------------------------------------------------------------------- YAML
MAX_YAML_BYTES = 1 << 20  # a run config is a few KiB; a megabyte is a mistake or an attack
MAX_YAML_NODES = 100_000  # nodes after alias expansion; shipped configs have a few hundred


class _Loader(yaml.SafeLoader):
    """SafeLoader that also reads ``3e-4``, ``1e6`` and ``1.0e4`` as floats (see the module docstring),
    and refuses documents whose aliases expand past ``MAX_YAML_NODES`` nodes before constructing them."""

    def construct_document(self, node: yaml.Node) -> Any:
        _check_expanded_size(node)
        return super().construct_document(node)


def _check_expanded_size(root: yaml.Node) -> None:
    """Count the nodes ``root`` expands to (an alias counts its whole target again), memoised per node.

    Linear in the document's distinct nodes, so an alias bomb is measured in
    microseconds rather than expanded.
    """
    sizes: dict[int, int] = {}

    def size(node: yaml.Node) -> int:
        key = id(node)
        if key in sizes:
            return sizes[key]
        sizes[key] = 1  # a recursive alias (a node containing itself) counts once instead of looping
        if isinstance(node, yaml.MappingNode):
            total = 1 + sum(size(k) + size(v) for k, v in node.value)
        elif isinstance(node, yaml.SequenceNode):
            total = 1 + sum(size(v) for v in node.value)
        else:
            total = 1
        sizes[key] = total
        return total

    expanded = size(root)
    if expanded > MAX_YAML_NODES:
        raise ConfigError(f"YAML document expands to {expanded:,} nodes through its aliases (&anchor/*alias), more "
                          f"than the {MAX_YAML_NODES:,} a run config may have; write the values out instead of "
                          f"nesting aliases")


_Loader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(r"^[-+]?(?:[0-9][0-9_]*(?:\.[0-9_]*)?|\.[0-9_]+)[eE][-+]?[0-9]+$"),
    list("-+0123456789."),
)


def parse_yaml(text: str) -> Any:
    """Parse YAML text as configs are parsed (scientific notation included), within the size limits."""
    if len(text) > MAX_YAML_BYTES:
        raise ConfigError(f"YAML text of {len(text):,} characters is larger than the {MAX_YAML_BYTES:,} a run config "
                          f"may have; is this the right file?")
    return yaml.load(text, Loader=_Loader)


RUN_CONFIG_FIX = "repair it (it is the config the run was started with) or start a new run"


def read_yaml_file(path: Path, fix: str = "fix the file") -> Any:
    """``path`` read as UTF-8 and parsed as :func:`parse_yaml` does; a file that is not UTF-8 or not YAML is a
    one-line :class:`ConfigError` naming the file, the line and ``fix`` (it was a UnicodeDecodeError's or a YAML
    parser's traceback: a run directory's ``config.yaml`` damaged or received from elsewhere)."""
    data = Path(path).read_bytes()
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[:exc.start].count(b"\n") + 1
        raise ConfigError(f"{path}: line {line}: not UTF-8 text (byte 0x{data[exc.start]:02x}); {fix}") from None
    try:
        return parse_yaml(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" line {mark.line + 1}, column {mark.column + 1}:" if mark is not None else ""
        problem = " ".join(str(getattr(exc, "problem", None) or exc).split())
        raise ConfigError(f"{path}:{where} not valid YAML ({problem}); {fix}") from None


# --------------------------------------------------------------------------- value checks
# A check is ``check(value, path) -> normalised value``; it raises ConfigError
# with a message that names the path, what was expected and what was given.

def _got(value: Any) -> str:
    return f"got {value!r} ({type(value).__name__})"


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _int(minimum: int | None = None) -> Callable[[Any, str], int]:
    expected = "an integer" if minimum is None else f"an integer >= {minimum}"

    def check(value: Any, path: str) -> int:
        # bool is a subclass of int: `num_envs: true` must not read as 1.
        if isinstance(value, float) and value.is_integer():
            value = int(value)  # 1e6 arrives as a float
        if isinstance(value, bool) or not isinstance(value, int):
            raise ConfigError(f"{path}: expected {expected}, {_got(value)}")
        if minimum is not None and value < minimum:
            raise ConfigError(f"{path}: expected {expected}, {_got(value)}")
        return value

    return check


def _float(minimum: float | None = None, maximum: float | None = None, positive: bool = False):
    if positive:
        expected = "a number > 0"
    elif minimum is not None and maximum is not None:
        expected = f"a number in [{minimum}, {maximum}]"
    elif minimum is not None:
        expected = f"a number >= {minimum}"
    else:
        expected = "a number"

    def check(value: Any, path: str) -> float:
        if not _is_number(value) or not math.isfinite(value):
            raise ConfigError(f"{path}: expected {expected}, {_got(value)}")
        out = float(value)
        if (positive and out <= 0) or (minimum is not None and out < minimum) or (
            maximum is not None and out > maximum
        ):
            raise ConfigError(f"{path}: expected {expected}, {_got(value)}")
        return out

    return check


def _bool(value: Any, path: str) -> bool:
    if not isinstance(value, bool):
        raise ConfigError(f"{path}: expected a boolean (true/false), {_got(value)}")
    return value


def _str(choices: tuple[str, ...] | None = None, normalise: Callable[[str], str] = str):
    expected = "a non-empty string" if choices is None else "one of " + ", ".join(choices)

    def check(value: Any, path: str) -> str:
        if not isinstance(value, str) or not value:
            raise ConfigError(f"{path}: expected {expected}, {_got(value)}")
        out = normalise(value)
        if choices is not None and out not in choices:
            raise ConfigError(f"{path}: expected {expected} (case-insensitive), {_got(value)}")
        return out

    return check


def _any_str(value: Any, path: str) -> str:
    """A string that may be empty (``saving.name``: empty means "use the top-level name")."""
    if not isinstance(value, str):
        raise ConfigError(f"{path}: expected a string, {_got(value)}")
    return value


def _optional(check: Callable[[Any, str], Any], what: str):
    def optional(value: Any, path: str) -> Any:
        if value is None:
            return None
        try:
            return check(value, path)
        except ConfigError as exc:
            raise ConfigError(f"{exc.errors[0]} (or null for {what})") from None

    return optional


def _mapping(value: Any, path: str) -> dict:
    """A free-form mapping (env ctor kwargs, user model keys): copied, not inspected."""
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise ConfigError(f"{path}: expected a mapping, {_got(value)}")
    bad = [k for k in value if not isinstance(k, str)]
    if bad:
        raise ConfigError(f"{path}: keys must be strings, got {bad[0]!r}")
    return copy.deepcopy(dict(value))


def _layer_sizes(value: Any, path: str) -> list[int]:
    if not isinstance(value, (list, tuple)):
        raise ConfigError(f"{path}: expected a list of positive integers (hidden layer sizes), {_got(value)}")
    positive = _int(minimum=1)
    return [positive(v, f"{path}[{i}]") for i, v in enumerate(value)]


_SCHEDULE_SHAPES = (
    "a number, {type: linear, start: a, end: b}, {type: constant, value: v} "
    "or a list of [step, value] pairs sorted by step"
)


def _schedule(value: Any, path: str) -> float | dict | list:
    """Check the *shape* of a schedule spec; schedules.Schedule.parse gives it meaning."""
    if _is_number(value):
        return _float()(value, path)
    if isinstance(value, Mapping):
        kind = value.get("type")
        kind = kind.lower() if isinstance(kind, str) else kind
        keys = {"linear": ("type", "start", "end"), "constant": ("type", "value")}
        if kind not in keys:
            raise ConfigError(f"{path}.type: expected 'linear' or 'constant' (a schedule is {_SCHEDULE_SHAPES}), "
                              f"{_got(value.get('type'))}")
        errors = [_unknown_key_message(path, k, keys[kind]) for k in value if k not in keys[kind]]
        out: dict[str, Any] = {"type": kind}
        for key in keys[kind][1:]:
            if key not in value:
                errors.append(f"{path}.{key}: required for a {kind} schedule")
                continue
            try:
                out[key] = _float()(value[key], f"{path}.{key}")
            except ConfigError as exc:
                errors.extend(exc.errors)
        if errors:
            raise ConfigError(errors)
        return out
    if isinstance(value, (list, tuple)):
        if not value:
            raise ConfigError(f"{path}: a piecewise schedule needs at least one [step, value] pair, got []")
        points: list[list[float]] = []
        for i, point in enumerate(value):
            where = f"{path}[{i}]"
            if not (isinstance(point, (list, tuple)) and len(point) == 2):
                raise ConfigError(f"{where}: expected a [step, value] pair, {_got(point)}")
            step = _float(minimum=0)(point[0], f"{where}[0] (step)")
            level = _float()(point[1], f"{where}[1] (value)")
            if points and step <= points[-1][0]:
                raise ConfigError(f"{where}: steps must be strictly increasing, got step {point[0]!r} "
                                  f"after {points[-1][0]!r}")
            points.append([int(step) if step.is_integer() else step, level])
        return points
    raise ConfigError(f"{path}: expected {_SCHEDULE_SHAPES}, {_got(value)}")


def _learning_rate(value: Any, path: str) -> float | dict | list:
    """A schedule whose values are >= 0 and that starts > 0: a negative rate climbs the loss, a zero one learns nothing."""
    spec = _schedule(value, path)
    if isinstance(spec, float):
        values, first = [spec], spec
    elif isinstance(spec, dict):
        values = [spec[k] for k in ("start", "end", "value") if k in spec]
        first = values[0]
    else:
        values, first = [v for _, v in spec], max(v for _, v in spec)
    if min(values) < 0 or first <= 0:
        raise ConfigError(f"{path}: a learning rate must be > 0 (a schedule may only decay to 0), {_got(value)}")
    return spec


def _model_type(value: Any, path: str) -> str:
    """A model registry key: ``fully_connected``, or one registered with ``models.register_model``.

    The registry lives in ``models.py`` (torch); a user model is registered by
    importing that module, so when it is not imported only the built-in name exists.
    """
    import sys

    name = _str()(value, path)
    models = sys.modules.get("warp_drive.training.models")
    known = set(BUILTIN_MODELS) | set(models.registered_models() if models is not None else ())
    if name not in known:
        close = difflib.get_close_matches(name, sorted(known), n=1)
        hint = f"did you mean {close[0]!r}? " if close else ""
        raise ConfigError(f"{path}: unknown model type {name!r}; {hint}known: {', '.join(sorted(known))} "
                          f"(register your own with warp_drive.training.models.register_model before loading "
                          f"the config)")
    return name


# --------------------------------------------------------------------------- unknown keys, other formats
CONFIG_DIALECT_GROUP = "warp_drive.config_dialects"


@functools.lru_cache(maxsize=None)
def config_dialects() -> tuple:
    """Readers of run configs written in another format, plugged in through
    the entry-point group ``warp_drive.config_dialects`` (as envs plug into
    ``warp_drive.envs``), so that this module knows no format but its own.
    This package registers WarpDrive 2.7's (``warp_drive.compat.run_config:DIALECT``).

    A dialect has ``claims(data) -> bool`` (parsed YAML is in its format),
    ``read(data, overrides, default_name=, label=) -> RunConfig`` and
    ``key_hint(path, key) -> str | None`` (a sentence for a key of its format
    found in one of ours).
    """
    return tuple(ep.load() for ep in entry_points(group=CONFIG_DIALECT_GROUP))


def _join(path: str, key: Any) -> str:
    return f"{path}.{key}" if path else str(key)


def _unknown_key_message(path: str, key: Any, valid: Iterable[str]) -> str:
    valid = list(valid)
    # A key of another config format (WarpDrive 2.7's num_episodes, vf_loss_coeff, ...) is named as such by
    # its dialect, with what it is here: its nearest spelling among ours (num_episodes -> num_envs) would point
    # at the wrong key.
    for dialect in config_dialects():
        hint = dialect.key_hint(path, key)
        if hint is not None:
            return f"{_join(path, key)}: unknown key; {hint}"
    close = difflib.get_close_matches(str(key), valid, n=3, cutoff=0.6)
    hint = f"did you mean {' or '.join(repr(c) for c in close)}? " if close else ""
    return f"{_join(path, key)}: unknown key; {hint}valid keys here: {', '.join(valid)}"
