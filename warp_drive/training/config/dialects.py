"""Readers of run configs written in another format, plugged in through an entry-point group.

``load_config`` knows no format but this project's: a dialect, registered in the entry-point group
``warp_drive.config_dialects`` (as envs plug into ``warp_drive.envs``), claims and translates the others.
This package registers WarpDrive 2.7's (``warp_drive.compat.run_config:DIALECT``, in pyproject.toml).
"""

from __future__ import annotations

import functools
from importlib.metadata import entry_points

CONFIG_DIALECT_GROUP = "warp_drive.config_dialects"


@functools.lru_cache(maxsize=None)
def config_dialects() -> tuple:
    """The installed dialects. A dialect has ``claims(data) -> bool`` (parsed YAML is in its format),
    ``read(data, overrides, default_name=, label=) -> RunConfig`` and ``key_hint(path, key) -> str | None``
    (a sentence for a key of its format found in one of ours)."""
    return tuple(ep.load() for ep in entry_points(group=CONFIG_DIALECT_GROUP))
