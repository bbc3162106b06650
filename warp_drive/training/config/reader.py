"""The bounded YAML reader of run configs: size and alias limits, and scientific notation as floats.

YAML limits: a config file over ``MAX_YAML_BYTES``, or a document whose aliases expand to more than
``MAX_YAML_NODES`` nodes (a "billion laughs" alias bomb, which used to hang the first deep copy), is
refused at parse time with a :class:`ConfigError`.

YAML note: PyYAML follows YAML 1.1, where ``3e-4`` and ``1e6`` are *strings*. Configs and ``--set``
values are read with a loader that also resolves those to floats, so ``lr: 3e-4`` means what it says.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml

from warp_drive.training.config.errors import ConfigError

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
