"""Checkpoints that survive crashes: atomic writes, a ``latest`` pointer, safe loading.

Every file appears under its final name only when complete: it is written to
a temp file in the same directory (same filesystem, so ``os.replace`` is an
atomic rename), fsync'ed, then renamed. ``latest`` is updated the same way and
only after the checkpoint itself is in place, so it never names a missing or
partial file -- a run killed at any moment resumes from a whole checkpoint.

Checkpoints are read with ``torch.load(weights_only=True)``: tensors, dicts,
lists and Python scalars only, never arbitrary pickled objects, so a planted
``ckpt_*.pt`` cannot run code when a run is evaluated or resumed (such a file
is refused with :class:`UnsafeCheckpointError`). :func:`save_checkpoint`
converts NumPy values to tensors and plain scalars so everything we write loads
that way. A checkpoint that exists but cannot be read (truncated by a crash of
the disk, not of the writer) is skipped with a warning by :func:`load_latest`,
which falls back to the newest intact one.

Only the newest ``keep`` checkpoints are kept (``saving.keep_checkpoints``),
temp files left by a killed save are removed by the next save, and a run
directory is held by one process at a time (:class:`RunLock`).

This module writes and reads checkpoint files, and refuses weights that are
broken (NaN, inf, exploded) on the way in and out. The names and lookup of a
run's checkpoints are :mod:`~warp_drive.training.runs.layout`'s, the run
directory as a whole (its lock, ``--resume latest``) is
:mod:`~warp_drive.training.runs.dirs`'s, and restoring a checkpoint's env
arrays into the envs is :mod:`~warp_drive.training.runs.env_arrays`'s.
"""

from __future__ import annotations

import errno
import io
import os
import pickle
import re
import shutil
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any

import torch

from warp_drive.training.config import RunError
from warp_drive.training.runs.layout import (CHECKPOINT_DIR, LATEST_NAME, checkpoint_name, latest_checkpoint,
                                             list_checkpoints)

__all__ = [
    "CheckpointError",
    "CheckpointWarning",
    "UnsafeCheckpointError",
    "atomic_write",
    "load_checkpoint",
    "load_checkpoint_file",
    "load_latest",
    "load_weights",
    "save_checkpoint",
]

_TEMP_RE = re.compile(r"^\..+\.tmp$")  # atomic_write's temp files: .ckpt_000010.pt.<random>.tmp, .latest.<random>.tmp
# Temp files older than this process cannot be one of its own saves in progress.
_PROCESS_START = time.time()


class CheckpointError(RunError):
    """A checkpoint that cannot be loaded or saved."""


class UnsafeCheckpointError(CheckpointError):
    """A checkpoint holding pickled objects other than tensors and plain values: refused, never executed."""


class CheckpointWarning(UserWarning):
    """A checkpoint was skipped (unreadable), with the file named in the message."""


def _no_space_error(path: Path, exc: OSError) -> CheckpointError:
    """ENOSPC as a sentence: which directory is full and how much is left there."""
    try:
        free = f"{shutil.disk_usage(path.parent).free / 2**20:,.1f} MiB free"
    except OSError:
        free = "free space unknown"
    return CheckpointError(f"no space left on the device holding {path.parent} ({free}) while writing {path.name}: "
                           f"free some space or point saving.basedir at a larger disk ({exc})")


def write_bytes(f, data: bytes, path: Path) -> None:
    """Write ``data`` to the open file ``f`` (destined for ``path``), flush and fsync it.

    A full disk raises :class:`CheckpointError` naming the directory and its
    free space. The bytes are ours to write (not torch's C++ writer, whose
    failure reads "unexpected pos"), so the kernel's ENOSPC reaches us intact.
    """
    try:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    except OSError as exc:
        if exc.errno in (errno.ENOSPC, errno.EDQUOT):
            raise _no_space_error(path, exc) from None
        raise


def atomic_write(path: Path, data: bytes) -> None:
    """Write ``data`` to a temp file next to ``path``, then rename it into place (any file a run must never
    leave half-written: checkpoints, ``latest``, WarpDrive's per-policy weight files)."""
    try:
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    except OSError as exc:
        if exc.errno in (errno.ENOSPC, errno.EDQUOT):
            raise _no_space_error(path, exc) from None
        raise
    try:
        with os.fdopen(fd, "wb") as f:
            write_bytes(f, data, path)
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


def plain_state(value: Any) -> Any:
    """``value`` with NumPy arrays as tensors and NumPy scalars as Python scalars, recursively.

    Those are what ``torch.load(weights_only=True)`` accepts; NumPy objects
    would need unpickling NumPy globals, which we do not allow.
    """
    import numpy as np

    if isinstance(value, dict):
        return {k: plain_state(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        items = [plain_state(v) for v in value]
        return items if isinstance(value, list) else tuple(items)
    if isinstance(value, np.ndarray):
        return torch.from_numpy(np.ascontiguousarray(value))
    if isinstance(value, np.generic):
        return value.item()
    return value


def nonfinite_weight(state: dict) -> str | None:
    """The first model tensor of a checkpoint state that holds a NaN or inf, as "policy P's NAME"; None if all
    are finite. A model with one is broken whatever it scores: its outputs are NaN somewhere."""
    for tag, weights in (state.get("models") or {}).items():
        for name, value in (weights or {}).items():
            if torch.is_tensor(value) and value.is_floating_point() and not bool(torch.isfinite(value).all()):
                return f"policy {tag!r}'s {name}"
    return None


def exploded_weight(policies: dict, bound: float | None) -> str | None:
    """The first model parameter of ``policies`` ({tag: policy with ``.model``}) holding a value beyond
    ``bound`` in magnitude, as "policy P's NAME holds V (the largest ...)"; None when every one fits, or with no
    bound. Parameters only: buffers such as an observation normaliser's running count grow legitimately."""
    if bound is None:
        return None
    for tag, policy in policies.items():
        for name, weight in policy.model.named_parameters():
            if not weight.is_floating_point() or weight.numel() == 0:
                continue
            flat = weight.detach().reshape(-1)
            peak = flat[int(flat.abs().argmax())]
            if float(peak.abs()) > bound:  # NaN compares false: nonfinite_weight names those
                return (f"policy {tag!r}'s {name} holds {float(peak):.3g} (its largest magnitude), beyond "
                        f"trainer.max_weight_magnitude = {bound:g}")
    return None


def refuse_exploded_weights(policies: dict, bound: float | None, source: Any) -> None:
    """Raise :class:`CheckpointError` when a loaded model (from checkpoint ``source``) holds a parameter beyond
    ``bound``: the weights exploded, and such a model scores plausible-looking returns all the same."""
    problem = exploded_weight(policies, bound)
    if problem is not None:
        raise CheckpointError(f"{source}: {problem}: the weights exploded, so the model is broken however it "
                              f"scores; evaluate or resume an earlier checkpoint (pass its path), or, if weights "
                              f"this large are intended, raise trainer.max_weight_magnitude (null: no bound) with "
                              f"--set on --resume, or in the run's config.yaml for evaluate")


def save_checkpoint(run_dir: str | os.PathLike, iteration: int, state: dict, keep: int = 0,
                    policies: dict | None = None, max_weight_magnitude: float | None = None) -> Path:
    """Write ``state`` as ``<run_dir>/checkpoints/ckpt_<iteration:06d>.pt`` and point ``latest`` at it.

    ``keep`` > 0 then deletes all but the newest ``keep`` checkpoints (0 keeps
    every one): a long run would otherwise fill its disk. Temp files of saves
    killed before this process started are removed first. Weights with a NaN
    or inf, or (``policies``, the trainer's, whose models ``state`` holds) a
    parameter beyond ``max_weight_magnitude``, are refused: nothing is written
    and ``latest`` still names the previous checkpoint.
    """
    if isinstance(iteration, bool) or not isinstance(iteration, int) or iteration < 0:
        raise ValueError(f"iteration must be a non-negative int, got {iteration!r}")
    ckpt_dir = Path(run_dir) / CHECKPOINT_DIR
    path = ckpt_dir / checkpoint_name(iteration)
    broken = nonfinite_weight(state)
    if broken is not None:
        raise CheckpointError(f"not saving {path}: {broken} holds NaN or inf; the previous checkpoint stays "
                              f"'latest' (lower the learning rate, or set trainer.on_nonfinite: skip)")
    exploded = exploded_weight(policies or {}, max_weight_magnitude)
    if exploded is not None:
        raise CheckpointError(f"not saving {path}: {exploded}: the weights exploded; nothing was saved and "
                              f"'latest' still names the previous checkpoint, if any (lower the learning rate or "
                              f"set max_grad_norm; if weights this large are intended, resume with --set "
                              f"trainer.max_weight_magnitude=<larger>, or null for no bound)")
    ckpt_dir.mkdir(parents=True, exist_ok=True)
    remove_stale_temp_files(run_dir)
    buffer = io.BytesIO()
    torch.save(plain_state(state), buffer)
    atomic_write(path, buffer.getvalue())
    atomic_write(ckpt_dir / LATEST_NAME, (path.name + "\n").encode())
    if keep > 0:
        prune_checkpoints(run_dir, keep, protect=path)
    return path


def prune_checkpoints(run_dir: str | os.PathLike, keep: int, protect: Path | None = None) -> list[Path]:
    """Delete all but the newest ``keep`` checkpoints (never ``protect``); return the deleted paths."""
    doomed = [p for p in list_checkpoints(run_dir)[:-keep] if p != protect]
    for p in doomed:
        try:
            p.unlink()
        except FileNotFoundError:
            pass
    return doomed


def remove_stale_temp_files(run_dir: str | os.PathLike, before: float | None = None) -> list[Path]:
    """Remove ``checkpoints/.*.tmp`` files last written before ``before`` (default: this process's start).

    They are what a save killed mid-write leaves behind; a save of this
    process in progress is newer, and another live writer is excluded by :class:`RunLock`.
    """
    ckpt_dir = Path(run_dir) / CHECKPOINT_DIR
    if not ckpt_dir.is_dir():
        return []
    cutoff = _PROCESS_START if before is None else before
    removed = []
    for p in ckpt_dir.iterdir():
        try:
            if _TEMP_RE.match(p.name) and p.is_file() and p.stat().st_mtime < cutoff:
                p.unlink()
                removed.append(p)
        except FileNotFoundError:
            pass
    return removed


class _CorruptCheckpoint(CheckpointError):
    """A checkpoint file that is there but cannot be read (truncated, not a torch file)."""


def load_checkpoint_file(path: Path, map_location: Any) -> dict:
    """One file, ``torch.load(path, weights_only=True)``, with its failures as CheckpointErrors that name the
    file; a checkpoint whose weights hold NaN or inf is refused (it would evaluate to plausible-looking numbers).
    :func:`load_checkpoint` finds the file of a run; this reads a file already chosen."""
    state = _unpickle(path, map_location)
    broken = nonfinite_weight(state) if isinstance(state, dict) else None
    if broken is not None:
        raise CheckpointError(f"{path}: {broken} holds NaN or inf, so the model is broken; evaluate or resume "
                              f"an earlier checkpoint of {path.parent} (pass its path)")
    return state


def _unpickle(path: Path, map_location: Any) -> Any:
    try:
        return torch.load(path, map_location=map_location, weights_only=True)
    except pickle.UnpicklingError as exc:
        reason = str(exc).strip().splitlines()
        detail = next((line for line in reason if "GLOBAL" in line or "Unsupported" in line), reason[0] if reason else "")
        raise UnsafeCheckpointError(
            f"refusing to load {path}: it holds pickled objects other than tensors and plain Python values "
            f"({detail.strip()}), and unpickling those can run arbitrary code. warp-drive never writes such "
            f"checkpoints; delete the file unless you know where it came from"
        ) from None
    except (RuntimeError, EOFError, ValueError, OSError) as exc:
        if isinstance(exc, FileNotFoundError):
            raise
        raise _CorruptCheckpoint(f"{path} is not a readable checkpoint ({type(exc).__name__}: "
                                 f"{str(exc).strip().splitlines()[0] if str(exc).strip() else 'no detail'})") from None


def load_latest(run_dir: str | os.PathLike, map_location: Any = "cpu") -> tuple[Path, dict]:
    """The newest checkpoint of ``run_dir`` that loads, as ``(path, state)``.

    The one named by ``latest`` is tried first, then the others newest first.
    An unreadable one (truncated by a disk or filesystem failure) is skipped
    with a :class:`CheckpointWarning` naming it: the previous checkpoint is a
    better place to resume than none. An unsafe one (pickled code) is never
    skipped quietly: it raises :class:`UnsafeCheckpointError`.
    """
    run_dir = Path(run_dir)
    candidates = []
    for p in [latest_checkpoint(run_dir), *reversed(list_checkpoints(run_dir))]:
        if p is not None and p not in candidates:
            candidates.append(p)
    if not candidates:
        raise FileNotFoundError(f"run directory {run_dir} has no checkpoint (expected "
                                f"{run_dir / CHECKPOINT_DIR}/ckpt_*.pt)")
    skipped = []
    for path in candidates:
        try:
            state = load_checkpoint_file(path, map_location)
        except _CorruptCheckpoint as exc:
            skipped.append(str(exc))
            warnings.warn(f"skipping checkpoint {path}: {exc}; trying the previous one", CheckpointWarning,
                          stacklevel=2)
            continue
        return path, state
    raise CheckpointError(f"no checkpoint of {run_dir} could be read:\n  " + "\n  ".join(skipped))


def load_checkpoint(path_or_run_dir: str | os.PathLike, map_location: Any = "cpu") -> dict:
    """Load a checkpoint file, or a run directory's newest intact checkpoint (see :func:`load_latest`).

    Always ``weights_only=True``: tensors and plain values only, so loading a
    checkpoint never runs code from it (see the module docstring).
    """
    return _load_path(path_or_run_dir, map_location)[1]


def _load_path(path_or_run_dir: str | os.PathLike, map_location: Any) -> tuple[Path, dict]:
    path = Path(path_or_run_dir)
    if not path.exists():
        raise FileNotFoundError(f"no checkpoint or run directory at {path}")
    if path.is_dir():
        run_dir = path.parent if path.name == CHECKPOINT_DIR and not (path / CHECKPOINT_DIR).is_dir() else path
        return load_latest(run_dir, map_location)
    return path, load_checkpoint_file(path, map_location)


def load_weights(policies: dict, path_or_run_dir: str | os.PathLike, max_weight_magnitude: float | None = None,
                 map_location: Any = "cpu") -> dict:
    """:func:`load_checkpoint`, with its models loaded into ``policies`` ({tag: policy with ``.model``}); a
    checkpoint whose weights hold NaN or inf, or a parameter beyond ``max_weight_magnitude``, is refused
    naming the file and the parameter (what ``evaluate`` loads: such models scored plausible returns)."""
    path, state = _load_path(path_or_run_dir, map_location)
    for tag, policy in policies.items():
        policy.model.load_state_dict(state["models"][tag])
    refuse_exploded_weights(policies, max_weight_magnitude, path)
    return state
