"""Where a run directory keeps its checkpoints, and which of them is the newest.

Layout inside a run directory::

    config.yaml                   # marks the directory as a run (RUN_MARKER)
    .lock                         # held by the process training in it (LOCK_NAME)
    checkpoints/ckpt_000010.pt
    checkpoints/ckpt_000020.pt
    checkpoints/latest            # text: "ckpt_000020.pt"

The names live here, below both the checkpoint writer
(:mod:`warp_drive.training.checkpoint`) and the run-directory lookup and lock
(:mod:`warp_drive.training.run_dirs`), so the two agree on them without
importing each other.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

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
