"""A run's ``config.yaml``: written when the run starts, read back to resume or evaluate it.

A resumed run continues with the config it was started with; :func:`resumed_config` lets
only ``RESUMABLE_KEYS`` change and refuses anything else that differs, naming it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from warp_drive.training.config import RESUMABLE_KEYS, RUN_CONFIG_FIX, ConfigError, RunConfig, read_yaml_file
from warp_drive.training.runs.layout import RUN_MARKER, write_run_file


def saved_config(run_dir: Path) -> dict:
    """A run's ``config.yaml`` as parsed YAML (with the config loader's size and alias limits)."""
    raw = read_yaml_file(run_dir / RUN_MARKER, RUN_CONFIG_FIX)  # not UTF-8 or not YAML: one line, not a traceback
    if not isinstance(raw, dict):
        raise ConfigError(f"{run_dir / RUN_MARKER}: not a run config (the top level must be a mapping)")
    return raw


def resumed_config(run_dir: Path, config: RunConfig) -> RunConfig:
    """The config a resumed run continues with: the run's own, with ``config``'s values of ``RESUMABLE_KEYS``.

    Anything else that differs is refused rather than ignored: a resume that
    silently dropped a changed ``num_envs`` or ``lr`` trained something else
    than the user asked for.
    """
    saved = RunConfig.from_dict(saved_config(run_dir), source=str(run_dir / RUN_MARKER))
    mine, theirs = _flatten(config.to_dict()), _flatten(saved.to_dict())
    differ = sorted(k for k in mine.keys() | theirs.keys()
                    if mine.get(k) != theirs.get(k) and not k.startswith(RESUMABLE_KEYS))
    if differ:
        shown = "; ".join(f"{k}: run has {theirs.get(k)!r}, given {mine.get(k)!r}" for k in differ[:5])
        raise ConfigError(f"cannot resume {run_dir} with a different config ({shown}); only "
                          f"{', '.join(RESUMABLE_KEYS)} may change on resume")
    data, given = saved.to_dict(), config.to_dict()
    for key in RESUMABLE_KEYS:
        section, leaf = key.split(".")
        if leaf in given[section]:  # an opt-in key left unset is absent (RunConfig.to_dict)
            data[section][leaf] = given[section][leaf]
        else:
            data[section].pop(leaf, None)
    return RunConfig.from_dict(data)


def _flatten(data: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(data, dict) and data:
        out: dict[str, Any] = {}
        for k, v in data.items():
            out.update(_flatten(v, f"{prefix}.{k}" if prefix else str(k)))
        return out
    return {prefix: data}


def write_run_config(run_dir: Path, config: RunConfig) -> None:
    """``config.yaml``, and beside it :meth:`~RunConfig.run_files` (a translated WarpDrive config's translation)."""
    write_run_file(run_dir / RUN_MARKER, yaml.safe_dump(config.to_dict(), sort_keys=False))
    for name, text in config.run_files().items():
        write_run_file(run_dir / name, text)
