"""A run directory as a whole: one process trains in it at a time, and ``latest`` names the newest.

:class:`RunLock` keeps two processes from resuming one run, and
:func:`resolve_run_dir` turns ``--resume latest`` (or a path relative to the
run base directory) into a run directory. Both are about run directories, not
checkpoint files, so they live apart from :mod:`warp_drive.training.checkpoint`,
which re-exports them.
"""

from __future__ import annotations

import errno
import fcntl
import os
from pathlib import Path
from typing import Any

from warp_drive.training.config import RunError, parse_yaml
from warp_drive.training.run_layout import CHECKPOINT_DIR, LATEST_NAME, LOCK_NAME, RUN_MARKER


class RunLockedError(RunError):
    """Another process holds the run directory."""


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


class RunLock:
    """An exclusive ``fcntl.flock`` on ``<run_dir>/.lock`` for as long as a process trains in that run.

    Two processes resuming one run would both append to ``metrics.csv`` and
    overwrite each other's checkpoints; the second now fails at once, naming
    the directory and the holder's pid. The kernel drops the lock when the
    holder exits, however it exits, so a crashed run never leaves it stuck.
    """

    def __init__(self, run_dir: str | os.PathLike):
        self.run_dir = Path(run_dir)
        self.path = self.run_dir / LOCK_NAME
        self._fd: int | None = None

    def acquire(self) -> "RunLock":
        fd = open_run_file(self.path, os.O_RDWR | os.O_CREAT)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 64, 0).decode(errors="replace").strip() or "unknown"
            os.close(fd)
            raise RunLockedError(f"run directory {self.run_dir} is in use by another warp-drive process (pid {holder}); "
                                 f"wait for it to finish or stop it before resuming this run") from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        self._fd = fd
        return self

    def release(self) -> None:
        if self._fd is not None:
            fd, self._fd = self._fd, None
            os.ftruncate(fd, 0)
            os.close(fd)  # closing the last descriptor releases the flock

    def __enter__(self) -> "RunLock":
        return self.acquire()

    def __exit__(self, *exc: Any) -> None:
        self.release()


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


def run_name(run_dir: str | os.PathLike) -> str | None:
    """The ``name`` in a run's ``config.yaml`` (None when unreadable): which config the run was started from."""
    import yaml

    try:
        raw = parse_yaml((Path(run_dir) / RUN_MARKER).read_text(encoding="utf-8"))
    except (OSError, ValueError, yaml.YAMLError):  # a broken or oversized config.yaml is simply not a match
        return None
    name = raw.get("name") if isinstance(raw, dict) else None
    return name if isinstance(name, str) else None


def resolve_run_dir(spec: str | os.PathLike, basedir: str | os.PathLike = "runs", name: str | None = None) -> Path:
    """``"latest"`` -> the most recently written run under ``basedir``; otherwise the path itself.

    With ``name``, ``latest`` is the newest run *of that config* (its
    ``config.yaml`` has that ``name``): ``--config cartpole --resume latest``
    must not pick up a run of another config that happened to write last.
    A relative path that does not exist from the current directory is also
    tried relative to ``basedir`` (so ``tag_continuous/experiment/2024...`` works).
    """
    basedir = Path(basedir)
    if str(spec) == "latest":
        if not basedir.is_dir():
            raise FileNotFoundError(f"cannot resolve 'latest': run base directory {basedir} does not exist")
        runs = find_run_dirs(basedir)
        if name is not None:
            runs = [r for r in runs if run_name(r) == name]
        if not runs:
            of = f" of config {name!r}" if name is not None else ""
            raise FileNotFoundError(f"cannot resolve 'latest': no run directory{of} (with {RUN_MARKER}) under {basedir}")
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
