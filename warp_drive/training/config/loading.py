"""Finding and reading a run config: a shipped one by name, or a YAML file by path, with ``--set`` overrides."""

from __future__ import annotations

import difflib
from pathlib import Path
from typing import Iterable, Mapping

from warp_drive.training.config.dialects import config_dialects
from warp_drive.training.config.errors import ConfigError, got
from warp_drive.training.config.overrides import apply_overrides
from warp_drive.training.config.reader import read_yaml_file
from warp_drive.training.config.schema import RunConfig

# The shipped configs stay beside the training package (the CLI lists and names them).
CONFIG_DIR = Path(__file__).resolve().parent.parent / "configs"


def available_configs() -> list[str]:
    """Names of the configs shipped in warp_drive/training/configs/."""
    return sorted(p.stem for p in CONFIG_DIR.glob("*.yaml"))


def config_path(name_or_path: str | Path) -> Path:
    """A shipped config's file for a bare name, else the path itself (which must exist)."""
    text = str(name_or_path)
    path = Path(text).expanduser()
    if path.is_file():
        return path
    looks_like_path = path.suffix in (".yaml", ".yml") or "/" in text or "\\" in text
    if not looks_like_path:
        shipped = CONFIG_DIR / f"{text}.yaml"
        if shipped.is_file():
            return shipped
        close = difflib.get_close_matches(text, available_configs(), n=3)
        hint = f"; did you mean {' or '.join(repr(c) for c in close)}?" if close else ""
        raise ConfigError(f"no config named {text!r}{hint} (shipped: {', '.join(available_configs())}; "
                          f"or pass a path to a YAML file)")
    raise ConfigError(f"config file {text} does not exist")


def load_config(name_or_path: str | Path, overrides: Iterable[str] = ()) -> RunConfig:
    """Read a shipped config by name (``"cartpole"``) or a YAML file by path, apply ``--set`` overrides, validate.

    A file without a top-level ``name`` takes its file name's stem. A file in another format (WarpDrive
    2.7's) is translated by the dialect that claims it (``dialects.py``).
    """
    path = config_path(name_or_path)
    data = read_yaml_file(path, "fix the file")  # not UTF-8 or not YAML: one line naming the file and line
    if data is None:
        data = {}
    if not isinstance(data, Mapping):
        raise ConfigError(f"{path}: the top level must be a mapping (name, env, trainer, policy, saving), "
                          f"{got(data)}")
    data = dict(data)
    for dialect in config_dialects():
        if dialect.claims(data):
            return dialect.read(data, overrides, default_name=path.stem, label=str(path))
    data.setdefault("name", path.stem)
    data = apply_overrides(data, overrides)
    return RunConfig.from_dict(data, source=str(path))
