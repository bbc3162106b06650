"""Where a run's metrics go: ``metrics.csv`` (always), TensorBoard, Weights & Biases.

Every logger has the same three methods -- ``log_config(config, provenance)``
once at the start, ``log_metrics(step, metrics)`` at every log step (``step``
counts env steps over all ranks), ``close()`` -- so the training loop's
:class:`~warp_drive.training.runs.callbacks.MetricsLogger` treats them alike, and a
user can pass their own (any object with those methods).

Metrics are plain ``{name: float}``; a metric without a value yet (the
episodic return before any episode ended) is left out of the dict rather than
written as NaN, so the CSV holds an empty cell and TensorBoard/W&B no point.

W&B is optional (``pip install wandb``). Without network access or an API key
it runs offline (``mode="offline"``) instead of waiting for a login, and writes
its files into the run directory (``<run_dir>/wandb``); ``wandb sync`` uploads
them later.
"""

from __future__ import annotations

import importlib.util
import logging
import os
import uuid
import warnings
from pathlib import Path
from typing import Any, Mapping

import warp_drive
from warp_drive.training.config import ConfigError
from warp_drive.training.runs.layout import write_run_file
from warp_drive.training.runs.metrics import CSV_NAME, MetricsWriter

__all__ = ["Logger", "CsvLogger", "TensorBoardLogger", "WandbLogger", "WANDB_KEYS", "default_loggers"]

log = logging.getLogger("warp_drive")

WANDB_KEYS = ("enabled", "project", "entity", "mode", "group", "tags", "name")
WANDB_MODES = ("online", "offline", "disabled")


class Logger:
    """The logger interface (all methods optional to override)."""

    def log_config(self, config: Mapping[str, Any], provenance: Mapping[str, Any]) -> None:
        """The resolved run config and where it ran (``provenance.yaml``'s contents)."""

    def log_metrics(self, step: int, metrics: Mapping[str, float]) -> None:
        """One row of metrics at env step ``step``."""

    def close(self) -> None:
        """Flush and release files; called once, also when training failed."""


class CsvLogger(Logger):
    """``<run_dir>/metrics.csv``: one row per log step, one column per metric (``global_step`` first).

    A resumed run passes ``purge_step``: the rows its interrupted predecessor
    wrote after the checkpoint are dropped, so the file reads as one run.
    """

    def __init__(self, run_dir: str | os.PathLike, purge_step: int | None = None):
        self.writer = MetricsWriter(run_dir, purge_step=purge_step)

    def log_metrics(self, step: int, metrics: Mapping[str, float]) -> None:
        self.writer.write(step, metrics)

    def close(self) -> None:
        self.writer.close()


_TB_WARNED = False


def _warn_no_tensorboard(exc: Exception) -> None:
    """Once per process: a run without the tensorboard package still has its CSV."""
    global _TB_WARNED
    if not _TB_WARNED:
        _TB_WARNED = True
        warnings.warn(f"TensorBoard logging is off: {exc}. Metrics still go to {CSV_NAME}; "
                      "`pip install tensorboard` to enable it.", RuntimeWarning, stacklevel=3)


class TensorBoardLogger(Logger):
    """TensorBoard event files in the run directory: scalars, and the config and provenance as text.

    Without the ``tensorboard`` package it warns once and logs nothing (the CSV still has everything).
    """

    def __init__(self, run_dir: str | os.PathLike, purge_step: int | None = None):
        self.tb = None
        try:
            from torch.utils.tensorboard import SummaryWriter
        except Exception as exc:  # ImportError without the tensorboard package
            _warn_no_tensorboard(exc)
        else:
            self.tb = SummaryWriter(log_dir=str(run_dir), purge_step=purge_step)

    def log_config(self, config: Mapping[str, Any], provenance: Mapping[str, Any]) -> None:
        if self.tb is None:
            return
        import yaml

        # Markdown code blocks keep the YAML's indentation in TensorBoard's text tab.
        self.tb.add_text("config", "```\n" + yaml.safe_dump(dict(config), sort_keys=False) + "```", 0)
        self.tb.add_text("provenance", "```\n" + yaml.safe_dump(dict(provenance), sort_keys=False) + "```", 0)

    def log_metrics(self, step: int, metrics: Mapping[str, float]) -> None:
        if self.tb is None:
            return
        for key, value in metrics.items():
            self.tb.add_scalar(key, float(value), step)

    def close(self) -> None:
        if self.tb is not None:
            self.tb.close()


class WandbLogger(Logger):
    """Weights & Biases: the metrics, with the config and provenance as the run's config.

    ``settings`` is the config's ``saving.wandb`` (keys: ``project`` -- default
    the config's name --, ``entity``, ``mode``, ``group``, ``tags``, ``name``).
    ``mode`` defaults to ``$WANDB_MODE``, else ``online`` when an API key is
    configured and ``offline`` otherwise, so a machine without a login never
    blocks on a prompt. Files go to ``<run_dir>/wandb``.
    """

    def __init__(self, run_dir: str | os.PathLike, settings: Mapping[str, Any], default_project: str,
                 resume: bool = False):
        check_wandb(settings)
        import wandb

        mode = settings.get("mode") or os.environ.get("WANDB_MODE") or ("online" if _has_wandb_key() else "offline")
        self.run_dir = Path(run_dir)
        self.wandb = wandb
        # The run's id is kept in the run directory, so a resumed run continues the same W&B run.
        id_file = self.run_dir / "wandb_run_id"
        run_id = id_file.read_text().strip() if resume and id_file.is_file() else uuid.uuid4().hex[:12]
        write_run_file(id_file, run_id + "\n")
        self.run = wandb.init(project=settings.get("project") or default_project, entity=settings.get("entity"),
                              group=settings.get("group"), tags=settings.get("tags"),
                              name=settings.get("name") or self.run_dir.name, dir=str(self.run_dir), mode=mode,
                              id=run_id, resume="allow", reinit="create_new")
        self.mode = mode

    def log_config(self, config: Mapping[str, Any], provenance: Mapping[str, Any]) -> None:
        self.run.config.update({**dict(config), "provenance": dict(provenance)}, allow_val_change=True)

    def log_metrics(self, step: int, metrics: Mapping[str, float]) -> None:
        self.run.log({**metrics, "global_step": step}, step=int(step))

    def close(self) -> None:
        self.run.finish()


def wandb_enabled(config, track: bool = False) -> bool:
    """Whether a run logs to W&B: ``--track`` or ``saving.wandb.enabled``."""
    return bool(track or config.saving.wandb.get("enabled"))


def check_wandb(settings: Mapping[str, Any]) -> None:
    """Refuse, before a run directory is made, a missing ``wandb`` package and unknown ``saving.wandb`` keys."""
    if importlib.util.find_spec("wandb") is None:
        raise ConfigError("--track (or saving.wandb.enabled) logs to Weights & Biases, which is not installed; "
                          "`pip install wandb`, or train without --track")
    unknown = sorted(set(settings) - set(WANDB_KEYS))
    if unknown:
        raise ConfigError(f"saving.wandb: unknown key(s) {unknown}; known: {', '.join(WANDB_KEYS)}")
    mode = settings.get("mode")
    if mode is not None and mode not in WANDB_MODES:
        raise ConfigError(f"saving.wandb.mode: one of {', '.join(WANDB_MODES)}, got {mode!r}")


def _has_wandb_key() -> bool:
    """Whether W&B could log in without a prompt (``$WANDB_API_KEY`` or a ``~/.netrc`` entry)."""
    if os.environ.get("WANDB_API_KEY"):
        return True
    netrc = Path(os.environ.get("NETRC", Path.home() / ".netrc"))
    try:
        return "api.wandb.ai" in netrc.read_text()
    except OSError:
        return False


def default_loggers(run_dir: Path, config, purge_step: int | None = None, track: bool = False,
                    resume: bool = False) -> list[Logger]:
    """CSV and TensorBoard, plus W&B when ``track`` (``--track``) or ``saving.wandb.enabled``."""
    loggers: list[Logger] = [CsvLogger(run_dir, purge_step), TensorBoardLogger(run_dir, purge_step)]
    if wandb_enabled(config, track):
        loggers.append(WandbLogger(run_dir, config.saving.wandb,
                                   default_project=config.saving.name or config.name, resume=resume))
    return loggers


def provenance(backend_name: str, device: Any) -> dict[str, Any]:
    """Where and with what a run trained: versions, git commit, executor and device (``provenance.yaml``)."""
    import platform
    import subprocess

    import torch

    device = torch.device(device)
    if device.type == "cuda":
        described = f"{torch.cuda.get_device_name(device)} ({device})"
    else:
        described = f"{platform.processor() or platform.machine()} CPU, {os.cpu_count()} cores"
    commit = None
    package_dir = Path(warp_drive.__file__).resolve().parent
    try:  # only when the package is imported from a git checkout (not an installed wheel)
        found = subprocess.run(["git", "-C", str(package_dir), "rev-parse", "--show-toplevel", "HEAD"],
                               capture_output=True, text=True, timeout=10)
        top, _, sha = found.stdout.strip().partition("\n")
        if found.returncode == 0 and package_dir.is_relative_to(Path(top).resolve()):
            dirty = subprocess.run(["git", "-C", top, "status", "--porcelain", "--untracked-files=no"],
                                   capture_output=True, text=True, timeout=10).stdout.strip()
            commit = sha.strip() + ("-dirty" if dirty else "")
    except (OSError, subprocess.SubprocessError):
        pass
    return {"warp_drive": warp_drive.__version__, "git_commit": commit, "backend": backend_name,
            "device": described, "torch": str(torch.__version__), "python": platform.python_version()}
