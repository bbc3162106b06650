"""A run directory as a whole: made new for each run, held by one process at a time, found again by
``latest``.

:func:`new_run_dir` makes ``<basedir>/<name>/<tag>/<timestamp>`` (checked first by
:func:`check_run_dir`, undone by :func:`remove_refused_run` when the run never
began), :class:`RunLock` keeps two processes from training in one run, and
:func:`resolve_run_dir` turns ``--resume latest`` (or a path relative to the
run base directory) into a run directory. The files inside one are
:mod:`~warp_drive.training.runs.layout`'s and
:mod:`~warp_drive.training.runs.checkpoint`'s. No torch here: the command line
resolves run directories before it imports the training stack.
"""

from __future__ import annotations

import fcntl
import os
import shutil
from datetime import datetime
from pathlib import Path
from typing import Any

from warp_drive.training.config import ConfigError, RunConfig, RunError, parse_yaml
from warp_drive.training.runs.layout import CHECKPOINT_DIR, LATEST_NAME, LOCK_NAME, RUN_MARKER, open_run_file


class RunLockedError(RunError):
    """Another process holds the run directory."""


def new_run_dir(config: RunConfig, run_name: str | None = None, made: list[Path] | None = None) -> Path:
    """``<basedir>/<name>/<tag>/<timestamp>``, or ``.../<run_name>`` (WarpDrive's ``--run_name``),
    which must be new or empty: a second run's checkpoints beside the first's would be resumed as one run.
    ``made`` (a list) receives the directories this call created, deepest first (see :func:`remove_refused_run`)."""
    base, path = check_run_dir(config, run_name)
    if path is not None:
        _make_dirs(path, made, exist_ok=True)
        return path
    stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
    for n in range(1000):
        path = base / (stamp if n == 0 else f"{stamp}-{n}")
        try:
            _make_dirs(path, made)
            return path
        except FileExistsError:
            continue
    raise RuntimeError(f"cannot create a run directory under {base}")


def check_run_dir(config: RunConfig, run_name: str | None = None) -> tuple[Path, Path | None]:
    """``(base, named run dir or None)`` of :func:`new_run_dir`, refused as it would refuse them, creating
    nothing: ``train`` checks before the (maybe long) build and creates the directory after it."""
    root = Path(config.saving.basedir)
    base = root / (config.saving.name or config.name) / config.saving.tag
    # The config refuses absolute and '..' parts; this catches anything that still resolves outside.
    if not base.resolve().is_relative_to(root.resolve()):
        raise ConfigError(f"saving: the run directory {base} is outside saving.basedir {root}")
    if run_name is None:
        return base, None
    path = base / str(run_name)
    if Path(str(run_name)).is_absolute() or ".." in Path(str(run_name)).parts or path == base:
        raise ConfigError(f"run name: a directory name inside {base}, got {run_name!r}")
    if path.exists() and any(path.iterdir()):
        raise RunError(f"run name: {path} exists and is not empty; pick another name, or continue that "
                       f"run with --resume {path}")
    return base, path


def _make_dirs(path: Path, made: list[Path] | None, exist_ok: bool = False) -> None:
    missing = [p for p in (path, *path.parents) if not p.exists()]
    path.mkdir(parents=True, exist_ok=exist_ok)
    if made is not None:
        made.extend(missing)


def remove_refused_run(run_dir: Path, made: list[Path]) -> None:
    """Undo a new run that never began to iterate (its env, kernel or policies refused, a failure before the
    first iteration): a run directory with a config.yaml and no checkpoint would be what ``--resume latest``
    and ``evaluate latest`` pick next. Only what this process made goes: ``run_dir`` itself when it made it
    (else the files it put into that directory, which was empty when the run claimed it: ``--run-name``) and
    the parents in ``made`` that are still empty; nothing that existed before, and no other run."""
    if run_dir in made:
        shutil.rmtree(run_dir, ignore_errors=True)
    elif run_dir.is_dir():
        for entry in run_dir.iterdir():
            if entry.is_dir() and not entry.is_symlink():
                shutil.rmtree(entry, ignore_errors=True)
            else:
                entry.unlink(missing_ok=True)
    for parent in made:
        if parent != run_dir:
            try:
                parent.rmdir()  # only while empty: another run may have started beside this one meanwhile
            except OSError:
                break


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
