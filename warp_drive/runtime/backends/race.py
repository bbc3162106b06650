"""Race mode of the cpu executor: ThreadSanitizer over CUDA threads.

``WARP_DRIVE_CPU_MODE=race`` builds kernels with ``-fsanitize=thread`` and runs
every CUDA thread as a ThreadSanitizer fiber of its own (``runtime.cpp`` says
how barriers and launches are described to TSan). A kernel that reads what
another thread of its block writes without a ``__syncthreads()`` between them,
accumulates with a plain ``+=`` where it needs ``atomicAdd``, counts on a warp
running in lockstep, or lets two blocks write the same memory, then fails its
launch with :class:`KernelRaceError`: the kernel, the two source lines, the
two CUDA threads and, when the memory is one of the kernel's array
parameters, that parameter and element. The GPU does not report such a
kernel; it computes something else on some runs.

TSan's runtime must be in the process before anything else, so race mode
runs in a process started for it::

    WARP_DRIVE_CPU_MODE=race LD_PRELOAD=$(g++ -print-file-name=libtsan.so) \
    TSAN_OPTIONS="halt_on_error=0 exitcode=0 report_signal_unsafe=0 history_size=4" python my_env_test.py

or, from Python, ``subprocess.run(cmd, env=race_environment())``. Each block
runs on an OS thread of its own and every CUDA thread on a fiber: race mode is
for small sizes (a few envs, tens of agents), about 0.5 ms per CUDA thread and
block.

Limits, from what TSan can see: it models locks, atomics and the barriers
above, not memory fences, so a ``__threadfence()`` publication protocol (write
data, fence, set a flag that another block spins on) is reported as a race
although it is correct on a GPU -- and no shipped kernel uses one; the
cpu executor has no grid-wide barrier (``wd_sync_env`` over several blocks is
GPU-only), so cooperative launches are not checked here. Only memory the
kernels touch through instrumented code is tracked: torch's own kernels and
Python's writes are not, and are ordered before and after every launch.
Races are found on the accesses that ran: run the kernels with the sizes,
thread counts and inputs that reach their branches.

The same mode turns on the shuffle (``WARP_DRIVE_CPU_SHUFFLE``, usable in any
mode): the threads of each block start, and resume after each barrier, in a
seeded random order, so a result that depends on thread order differs between
seeds.
"""

from __future__ import annotations

import ctypes
import os
import re
import shlex
import subprocess
from dataclasses import dataclass
from pathlib import Path

from warp_drive.runtime import env_vars
from warp_drive.runtime.backends.errors import KernelLaunchError

# Reports go to our file, and the process carries on after one (the launch raises instead).
TSAN_OPTIONS = "halt_on_error=0 exitcode=0 report_signal_unsafe=0 history_size=4"
SHUFFLE_VARIABLE = "WARP_DRIVE_CPU_SHUFFLE"


class KernelRaceError(KernelLaunchError):
    """ThreadSanitizer saw two CUDA threads of a launch access the same memory,
    at least one writing, with nothing ordering them."""


def runtime_library_path(library: str, cxx: str = "g++") -> str | None:
    """The host compiler's runtime ``library`` (``libtsan.so``, ``libasan.so``), or None when it has none."""
    try:
        out = subprocess.run([cxx, f"-print-file-name={library}"], capture_output=True, text=True).stdout.strip()
    except OSError:
        return None
    return out if os.path.isabs(out) and os.path.exists(out) else None


def libtsan_path(cxx: str = "g++") -> str | None:
    """The host compiler's ThreadSanitizer runtime, or None when it has none."""
    return runtime_library_path("libtsan.so", cxx)


def race_environment(base: dict | None = None, shuffle_seed: int | None = None) -> dict:
    """Environment variables of a process that runs the cpu executor in race mode."""
    libtsan = libtsan_path()
    if libtsan is None:
        raise RuntimeError("race mode needs gcc's ThreadSanitizer runtime (libtsan); install gcc's libtsan "
                           "(Debian: apt install libtsan2) and check `g++ -print-file-name=libtsan.so`")
    env = dict(os.environ if base is None else base)
    env.update(LD_PRELOAD=libtsan, TSAN_OPTIONS=TSAN_OPTIONS, WARP_DRIVE_CPU_MODE="race")
    if shuffle_seed is not None:
        env[SHUFFLE_VARIABLE] = str(shuffle_seed)
    return env


def require_tsan_loaded() -> ctypes.CDLL:
    """The process's symbols, once ThreadSanitizer's runtime is known to be among them."""
    process = ctypes.CDLL(None)
    if not hasattr(process, "__tsan_create_fiber"):
        hint = libtsan_path() or "$(g++ -print-file-name=libtsan.so)"
        raise RuntimeError(
            "WARP_DRIVE_CPU_MODE=race needs ThreadSanitizer's runtime loaded before Python starts; run "
            f"LD_PRELOAD={hint} TSAN_OPTIONS={shlex.quote(TSAN_OPTIONS)} python ... (from Python, "
            "warp_drive.runtime.backends.race.race_environment() gives a subprocess that environment)"
        )
    return process


def _keep_tsan_to_this_process() -> None:
    """Take libtsan out of LD_PRELOAD once it is loaded here: the compilers this
    process runs (g++, nvcc) must not start under ThreadSanitizer (nvcc crashes
    under it). A child Python that wants race mode gets race_environment()."""
    kept = [p for p in os.environ.get("LD_PRELOAD", "").replace(":", " ").split() if "libtsan" not in Path(p).name]
    if kept:
        os.environ["LD_PRELOAD"] = " ".join(kept)
    else:
        os.environ.pop("LD_PRELOAD", None)


def shuffle_seed_from_environment(default: int | None) -> int | None:
    """``WARP_DRIVE_CPU_SHUFFLE``: an integer seed, ``off``, or unset (``default``)."""
    value = env_vars.read(SHUFFLE_VARIABLE)  # EnvVarError (a ValueError) for anything else
    if value is None:
        return default
    return None if value == env_vars.SHUFFLE_OFF else value


@dataclass(frozen=True)
class Access:
    """One side of a race as TSan reports it."""
    kind: str          # "Write", "Read", "Atomic write", ...
    size: int
    address: int
    thread: str        # "block (0,0,0) thread (3,0,0)" (its fiber's name) or TSan's T-number
    location: str      # "file.cu:12" of the innermost frame in kernel code
    function: str


_ACCESS = re.compile(r"^\s*(?:Previous )?([A-Za-z ]+?) of size (\d+) at (0x[0-9a-f]+) by (?:thread (T\d+)|main thread)",
                     re.IGNORECASE)
_FRAME = re.compile(r"^\s*#\d+ (\S+) (\S+?):(\d+)(?::\d+)? ")
_THREAD_NAME = re.compile(r"^\s*Thread (T\d+) '([^']*)'")
_RUNTIME_FILES = ("cuda_emulation.h", "runtime.cpp", "module_")


class ReportLog:
    """ThreadSanitizer's reports, redirected into a file this process reads after each launch."""

    def __init__(self, directory: Path):
        process = require_tsan_loaded()
        directory.mkdir(parents=True, exist_ok=True)
        self.path = directory / f"tsan_reports_{os.getpid()}.txt"
        self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND, 0o600)
        set_report_fd = getattr(process, "__sanitizer_set_report_fd")  # (a dunder name inside a class is mangled)
        set_report_fd.argtypes = [ctypes.c_void_p]
        set_report_fd(ctypes.c_void_p(self._fd))
        self._seen = 0
        _keep_tsan_to_this_process()

    def new_text(self) -> str:
        """What TSan wrote since the last call."""
        size = os.fstat(self._fd).st_size
        if size == self._seen:
            return ""
        text = os.pread(self._fd, size - self._seen, self._seen).decode(errors="replace")
        self._seen = size
        return text

    def pass_on_unrelated(self) -> None:
        """Reports written outside a launch (not about a kernel) go to stderr as TSan wrote them."""
        text = self.new_text()
        if text:
            os.write(2, text.encode())

    def check_launch(self, kernel: str, arrays: dict[str, tuple[int, int, int]]) -> None:
        """Raise KernelRaceError if the launch of ``kernel`` that just ran was reported.
        ``arrays``: parameter name -> (address, bytes, element size)."""
        text = self.new_text()
        if "ThreadSanitizer" not in text:
            return
        reports = [r for r in text.split("==================") if "WARNING: ThreadSanitizer" in r]
        first = _describe(reports[0], arrays) if reports else text.strip().splitlines()[0]
        more = f"; {len(reports) - 1} more report(s)" if len(reports) > 1 else ""
        raise KernelRaceError(f"kernel {kernel}: {first}{more}. TSan's full report: {self.path}")


def parse_accesses(report: str) -> list[Access]:
    """The two accesses of one TSan report, innermost kernel frame of each."""
    names = {m.group(1): m.group(2) for m in map(_THREAD_NAME.match, report.splitlines()) if m}
    accesses, current, frames = [], None, []

    def close():
        if current is None:
            return
        kind, size, address, tid = current
        user = [f for f in frames if not any(r in f[1] for r in _RUNTIME_FILES)] or frames or [("?", "?", "?")]
        function, file, line = user[0]
        accesses.append(Access(kind, size, address, names.get(tid, tid or "main thread"),
                               f"{file}:{line}", function))

    for line in report.splitlines():
        match = _ACCESS.match(line)
        if match:
            close()
            current, frames = (match.group(1), int(match.group(2)), int(match.group(3), 16), match.group(4)), []
            continue
        frame = _FRAME.match(line)
        if frame and current is not None:
            frames.append((frame.group(1), frame.group(2), frame.group(3)))
        elif current is not None and line.strip() == "" and frames:
            close()
            current, frames = None, []
    close()
    return accesses


def _array_of(address: int, arrays: dict[str, tuple[int, int, int]]) -> str | None:
    for name, (start, nbytes, item) in arrays.items():
        if start <= address < start + nbytes:
            return f"array parameter `{name}`, element {(address - start) // max(1, item)}"
    return None


def _describe(report: str, arrays: dict[str, tuple[int, int, int]]) -> str:
    kind = report.split("WARNING: ThreadSanitizer:")[1].split("(pid")[0].strip()
    accesses = parse_accesses(report)
    if not accesses:
        return f"{kind} (ThreadSanitizer): " + " ".join(report.split())[:300]
    now = accesses[0]
    where = _array_of(now.address, arrays)
    if where is None and ("dl-tls" in report or "tls_get_addr" in report):
        where = "`__shared__` memory"
    on = f" on {where}" if where else ""
    access = f"{now.kind.lower()} of {now.size} bytes at {now.location} by {now.thread}"
    if kind != "data race" or len(accesses) < 2:
        return f"{kind} (ThreadSanitizer){on}: {access}"
    before = accesses[1]
    return (f"data race (ThreadSanitizer){on}: {access}, and an unordered {before.kind.lower()} at "
            f"{before.location} by {before.thread} -- put a barrier (wd_sync_env() in an env kernel, "
            "__syncthreads() in a block) between them, or make the update an atomic")
