"""A run directory's files: where it keeps its checkpoints, which of them is the newest, and how a run
writes a file there (never through a symbolic link).

Layout inside a run directory::

    config.yaml                   # marks the directory as a run (RUN_MARKER)
    .lock                         # held by the process training in it (LOCK_NAME)
    checkpoints/ckpt_000010.pt
    checkpoints/ckpt_000020.pt
    checkpoints/latest            # text: "ckpt_000020.pt"

The names live here, below the checkpoint files (:mod:`~warp_drive.training.runs.checkpoint`), the
run directory's lock and lookup (:mod:`~warp_drive.training.runs.dirs`) and every writer of a run file
(metrics, provenance, ``config.yaml``), so they all agree on them.
"""

from __future__ import annotations

import errno
import os
import re
from pathlib import Path

from warp_drive.training.config import RunError

CHECKPOINT_DIR = "checkpoints"
LATEST_NAME = "latest"
RUN_MARKER = "config.yaml"
LOCK_NAME = ".lock"
_CKPT_RE = re.compile(r"^ckpt_(\d+)\.pt$")


def checkpoint_name(iteration: int) -> str:
    return f"ckpt_{iteration:06d}.pt"


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


def open_run_file(path: str | os.PathLike, flags: int, mode: int = 0o644) -> int:
    """``os.open`` of a file a run writes, never through a symbolic link (``O_NOFOLLOW``).

    A run directory may come from someone else (``--resume`` of a received run): a
    ``.lock`` or ``provenance.yaml`` planted as a link to ``~/something`` would
    otherwise have that file truncated and overwritten. Such a link is refused,
    naming it; everything the run writes stays inside its directory."""
    try:
        return os.open(path, flags | os.O_NOFOLLOW | os.O_CLOEXEC, mode)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise RunError(f"{path} is a symbolic link (to {os.readlink(path)!r}); a run writes only regular files "
                           f"inside its directory: remove the link (a run directory from elsewhere may hold "
                           f"planted ones) and resume again") from None
        raise


def write_run_file(path: str | os.PathLike, text: str) -> None:
    """Write ``text`` to ``path`` (created or truncated) through :func:`open_run_file`."""
    with os.fdopen(open_run_file(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC), "w", encoding="utf-8") as f:
        f.write(text)
