"""``--set KEY=VALUE`` overrides: dotted key paths checked against the schema, values parsed as YAML.

An override is applied to the parsed YAML, before validation, so a value is checked exactly as if the
file held it; the key path is checked here, as it is set, so a typo is named with the closest key.
"""

from __future__ import annotations

import copy
import difflib
import typing
from typing import Any, Iterable, Mapping

import yaml

from warp_drive.training.config.errors import ConfigError, unknown_key_message
from warp_drive.training.config.policies import POLICY_TYPES, foreign_override
from warp_drive.training.config.reader import parse_yaml
from warp_drive.training.config.schema import RunConfig
from warp_drive.training.config.section import Section

# Where a key leads: a tuple of sections (its fields are checked), POLICIES (policy tag -> section) or
# FREE (nothing below is checked: env.config, model.extra, a leaf's own mapping such as a schedule's).
POLICIES, FREE = "policies", None


def parse_override(item: str) -> tuple[list[str], Any]:
    """``"trainer.num_envs=200"`` -> ``(["trainer", "num_envs"], 200)``; a bad item is a :class:`ConfigError`."""
    key, sep, text = item.partition("=")
    key = key.strip()
    if not sep or not key:
        raise ConfigError(f"--set {item!r}: expected KEY=VALUE, e.g. trainer.num_envs=200")
    parts = key.split(".")
    if any(not p for p in parts):
        raise ConfigError(f"--set {item!r}: {key!r} is not a dotted key path")
    try:
        value = parse_yaml(text) if text.strip() else None
    except yaml.YAMLError as exc:
        raise ConfigError(f"--set {item!r}: the value is not valid YAML ({exc})") from None
    return parts, value


def _is_section(annotation: Any) -> bool:
    return isinstance(annotation, type) and issubclass(annotation, Section)


def _below(sections: tuple[type[Section], ...], key: str) -> tuple[Any, bool]:
    """What key ``key`` of ``sections`` leads to (see POLICIES, FREE), and whether it holds a single value."""
    if RunConfig in sections and key == "policy":
        return POLICIES, False
    annotations = [s.model_fields[key].annotation for s in sections if key in s.model_fields]
    inner = tuple(dict.fromkeys(a for a in annotations if _is_section(a)))
    if inner:
        return inner, False
    free_mapping = any(typing.get_origin(a) is dict or a is dict for a in annotations)
    return FREE, not free_mapping


def _set_path(node: dict, parts: list[str], value: Any, schema: Any, done: list[str], item: str) -> None:
    """Set ``parts`` below ``node``, checking each segment against ``schema`` (see POLICIES, FREE; a policy's
    keys are checked against every algorithm's section, and against its own once every override is set)."""
    head, rest = parts[0], parts[1:]
    here = ".".join([*done, head])
    child_schema: Any = FREE
    if schema == POLICIES:
        if head == "*":  # policy.*.lr=... sets every policy
            if not node:
                raise ConfigError(f"--set {item}: there are no policies for '*' to match")
            for tag in list(node):
                _set_path(node, [tag, *rest], value, schema, done, item)
            return
        if head not in node:
            close = difflib.get_close_matches(head, list(node), n=1)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            raise ConfigError(f"--set {item}: no policy {head!r} in this config (policies: "
                              f"{', '.join(node) or 'none'}){hint}")
        child_schema = POLICY_TYPES
    elif schema is not FREE:
        keys = list(dict.fromkeys(k for section in schema for k in section.model_fields))
        if head not in keys:
            raise ConfigError(f"--set {item}: {unknown_key_message('.'.join(done), head, keys)}")
        child_schema, is_value = _below(schema, head)
        if is_value and rest and not isinstance(node.get(head), Mapping):
            raise ConfigError(f"--set {item}: {here} is a value, not a section, so {'.'.join(rest)!r} cannot be "
                              f"set inside it")
    if not rest:
        node[head] = value
        return
    child = node.setdefault(head, {})
    if child is None:
        child = node[head] = {}
    if not isinstance(child, dict):
        raise ConfigError(f"--set {item}: {here} holds {child!r}, not a mapping, so {'.'.join(rest)!r} cannot "
                          f"be set inside it")
    _set_path(child, rest, value, child_schema, [*done, head], item)


def apply_overrides(data: Mapping, overrides: Iterable[str]) -> dict:
    """A copy of ``data`` with each ``"dotted.key=value"`` applied in order.

    Values are parsed as YAML (``200``, ``3e-4``, ``true``, ``null``, ``[64, 64]``,
    ``{type: linear, start: 1e-3, end: 0}``). A key must exist in the schema, except below ``env.config``
    and ``model.extra``; policy tags must exist in ``data`` (``policy.*.key`` sets every policy). Values are
    validated afterwards, by :meth:`RunConfig.from_dict`.
    """
    out = copy.deepcopy(dict(data))
    policy_keys = []
    for item in overrides:
        parts, value = parse_override(item)
        _set_path(out, parts, value, (RunConfig,), [], item)
        if parts[0] == "policy" and len(parts) > 2:
            policy_keys += [(item, tag, parts[2:]) for tag in (out["policy"] if parts[1] == "*" else [parts[1]])]
    for item, tag, keys in policy_keys:  # once every override is in: against the policy's final algorithm
        problem = foreign_override((out.get("policy") or {}).get(tag), tag, keys)
        if problem:
            raise ConfigError(f"--set {item}: {problem}")
    return out
