"""Checkpoints that survive crashes: atomic writes, a ``latest`` pointer, run-dir lookup.

Layout inside a run directory::

    checkpoints/ckpt_000010.pt
    checkpoints/ckpt_000020.pt
    checkpoints/latest            # text: "ckpt_000020.pt"

Every file appears under its final name only when complete: it is written to
a temp file in the same directory (same filesystem, so ``os.replace`` is an
atomic rename), fsync'ed, then renamed. ``latest`` is updated the same way and
only after the checkpoint itself is in place, so it never names a missing or
partial file -- a run killed at any moment resumes from a whole checkpoint.
"""

from __future__ import annotations

import os
import re
import tempfile
from pathlib import Path
from typing import Any, Callable

import torch

__all__ = [
    "CHECKPOINT_DIR",
    "LATEST_NAME",
    "checkpoint_name",
    "latest_checkpoint",
    "list_checkpoints",
    "load_checkpoint",
    "resolve_run_dir",
    "save_checkpoint",
]

CHECKPOINT_DIR = "checkpoints"
LATEST_NAME = "latest"
RUN_MARKER = "config.yaml"
_CKPT_RE = re.compile(r"^ckpt_(\d+)\.pt$")


def checkpoint_name(iteration: int) -> str:
    return f"ckpt_{iteration:06d}.pt"


def _atomic_write(path: Path, write: Callable[[Any], None]) -> None:
    """Call ``write(fileobj)`` on a temp file next to ``path``, then rename it into place."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise
    _fsync_dir(path.parent)


def _fsync_dir(directory: Path) -> None:
    """Persist the rename itself (POSIX); best effort where directories cannot be opened."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def save_checkpoint(run_dir: str | os.PathLike, iteration: int, state: dict) -> Path:
    """Write ``state`` as ``<run_dir>/checkpoints/ckpt_<iteration:06d>.pt`` and point ``latest`` at it."""
    if isinstance(iteration, bool) or not isinstance(iteration, int) or iteration < 0:
        raise ValueError(f"iteration must be a non-negative int, got {iteration!r}")
    ckpt_dir = Path(run_dir) / CHECKPOINT_DIR
    ckpt_dir.mkdir(parents=True, exist_ok=True)
    path = ckpt_dir / checkpoint_name(iteration)
    _atomic_write(path, lambda f: torch.save(state, f))
    _atomic_write(ckpt_dir / LATEST_NAME, lambda f: f.write((path.name + "\n").encode()))
    return path


def list_checkpoints(run_dir: str | os.PathLike) -> list[Path]:
    """All complete checkpoints of a run, oldest iteration first."""
    ckpt_dir = Path(run_dir) / CHECKPOINT_DIR
    if not ckpt_dir.is_dir():
        return []
    found = [(int(m.group(1)), p) for p in ckpt_dir.iterdir() if (m := _CKPT_RE.match(p.name)) and p.is_file()]
    return [p for _, p in sorted(found)]


def latest_checkpoint(run_dir: str | os.PathLike) -> Path | None:
    """The checkpoint named by ``checkpoints/latest``; None when the run has none.

    If the pointer is missing or stale (a checkpoint deleted by hand), fall back
    to the highest-numbered checkpoint rather than failing a resume.
    """
    ckpt_dir = Path(run_dir) / CHECKPOINT_DIR
    pointer = ckpt_dir / LATEST_NAME
    if pointer.is_file():
        name = pointer.read_text().strip()
        if name and "/" not in name and os.sep not in name and (ckpt_dir / name).is_file():
            return ckpt_dir / name
    existing = list_checkpoints(run_dir)
    return existing[-1] if existing else None


def load_checkpoint(
    path_or_run_dir: str | os.PathLike, map_location: Any = "cpu", weights_only: bool = False
) -> dict:
    """Load a checkpoint file, or a run directory's latest checkpoint.

    ``weights_only=False`` by default because our checkpoints carry optimizer
    state, configs and RNG states, not just tensors. That means unpickling:
    only load checkpoints you trust.
    """
    path = Path(path_or_run_dir)
    if not path.exists():
        raise FileNotFoundError(f"no checkpoint or run directory at {path}")
    if path.is_dir():
        run_dir = path.parent if path.name == CHECKPOINT_DIR and not (path / CHECKPOINT_DIR).is_dir() else path
        found = latest_checkpoint(run_dir)
        if found is None:
            raise FileNotFoundError(
                f"run directory {run_dir} has no checkpoint (expected {run_dir / CHECKPOINT_DIR}/ckpt_*.pt)"
            )
        path = found
    return torch.load(path, map_location=map_location, weights_only=weights_only)


def _activity_time(run_dir: Path) -> float:
    """When a run last wrote something that matters: the newest of the dir, its config, metrics and pointer."""
    times = []
    for p in (run_dir, run_dir / RUN_MARKER, run_dir / "metrics.csv", run_dir / CHECKPOINT_DIR / LATEST_NAME):
        try:
            times.append(p.stat().st_mtime)
        except OSError:
            pass
    return max(times)


def find_run_dirs(basedir: str | os.PathLike) -> list[Path]:
    """Every directory under ``basedir`` (inclusive) holding a ``config.yaml``, not descending into runs."""
    runs = []
    for root, dirs, files in os.walk(basedir):
        if RUN_MARKER in files:
            runs.append(Path(root))
            dirs[:] = []  # a run's subfolders (checkpoints, ...) are not runs
        else:
            dirs.sort()
    return runs


def resolve_run_dir(spec: str | os.PathLike, basedir: str | os.PathLike = "runs") -> Path:
    """``"latest"`` -> the most recently written run under ``basedir``; otherwise the path itself.

    A relative path that does not exist from the current directory is also
    tried relative to ``basedir`` (so ``tag_continuous/experiment/2024...`` works).
    """
    basedir = Path(basedir)
    if str(spec) == "latest":
        if not basedir.is_dir():
            raise FileNotFoundError(f"cannot resolve 'latest': run base directory {basedir} does not exist")
        runs = find_run_dirs(basedir)
        if not runs:
            raise FileNotFoundError(f"cannot resolve 'latest': no run directory (with {RUN_MARKER}) under {basedir}")
        # Ties (same mtime granularity) break on the path: run names end in a sortable timestamp.
        return max(runs, key=lambda p: (_activity_time(p), str(p)))
    path = Path(spec)
    if path.is_dir():
        return path
    if not path.is_absolute() and (basedir / path).is_dir():
        return basedir / path
    if path.exists():
        raise NotADirectoryError(f"run directory {path} is not a directory")
    raise FileNotFoundError(f"run directory {path} does not exist (also looked under {basedir})")
