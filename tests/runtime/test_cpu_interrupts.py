"""Ctrl-C, oversized blocks and fiber stack overflows on the cpu executor.

Each case runs in a child process (a real SIGINT, a real guard-page fault):
the child must survive and say what happened; the parent asserts on it.
Kernels: ``tests/kernels/interrupts.cu``.
"""

from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # child processes that compile and are interrupted (the fast tier: pytest -m 'not slow')

KERNELS = Path(__file__).resolve().parents[1] / "kernels"
ROOT = Path(__file__).resolve().parents[2]

PRELUDE = """
import sys, time, torch
from warp_drive.runtime.backends.cpu import CpuBackend
from warp_drive.runtime.backends.base import KernelLaunchError

backend = CpuBackend(num_workers=int(sys.argv[2]))
module = backend.build([sys.argv[1]])
"""

INTERRUPT_SCRIPT = PRELUDE + """
stop = torch.zeros(1, dtype=torch.int32)
progress = torch.zeros(1, dtype=torch.int32)
kernel, grid, block = sys.argv[3], int(sys.argv[4]), int(sys.argv[5])
print("launching", flush=True)
try:
    module.get_function(kernel)(stop, progress, grid=grid, block=block)
    print("RETURNED", flush=True)
except KeyboardInterrupt as exc:
    print("KEYBOARD_INTERRUPT", " ".join(getattr(exc, "__notes__", [])), flush=True)
out = torch.zeros(8, dtype=torch.int32)
try:
    module.get_function("neighbour_after_barrier")(out, 8, grid=1, block=8)
    print("NEXT_LAUNCH", out.tolist(), flush=True)
except KernelLaunchError as exc:
    print("NEXT_LAUNCH_REFUSED", exc, flush=True)
"""


def _as_in_a_terminal() -> None:
    """The child's Ctrl-C as a terminal gives it: SIGINT handled and not blocked.

    A job started in the background of a non-interactive shell (``make test &``,
    ``nohup``) inherits SIGINT *ignored*, and then Ctrl-C rightly never reaches
    the kernel; these tests are about the terminal case, so they set it up.
    """
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})


def child(script: str, *args, env=None, **kwargs) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", script, str(KERNELS / "interrupts.cu"), *map(str, args)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT,
                            env=env or os.environ.copy(), preexec_fn=_as_in_a_terminal, **kwargs)


def read_line(proc: subprocess.Popen, timeout: float) -> str:
    ready, _, _ = select.select([proc.stdout], [], [], timeout)
    if not ready:
        proc.kill()
        out, err = proc.communicate()
        raise AssertionError(f"no output within {timeout} s\nstdout: {out}\nstderr: {err}")
    return proc.stdout.readline()


@pytest.fixture
def cache_env(tmp_path_factory):
    # One cache for this module's children: the kernels are compiled once.
    cache = tmp_path_factory.getbasetemp() / "interrupts-cache"
    return dict(os.environ, WARP_DRIVE_CACHE=str(cache))


@pytest.mark.parametrize("kernel,grid,block,workers,next_launch", [
    ("spin_forever", 1, 1, 1, "runs"),           # one thread, a plain call, no barrier
    ("spin_forever", 1, 32, 1, "runs"),          # thread 0 on a fiber, no barrier
    ("spin_with_barrier", 4, 32, 2, "runs"),     # every worker stops at its next barrier
    ("spin_forever", 4, 32, 2, "refused"),       # the other worker's block cannot be stopped
    ("spin_printing", 1, 1, 1, "runs"),          # inside libc's printf: stopped as printf returns
    ("spin_printing", 4, 32, 2, "runs"),         # ... on every worker
])
def test_ctrl_c_ends_an_endless_launch_with_keyboard_interrupt(cache_env, kernel, grid, block, workers, next_launch):
    proc = child(INTERRUPT_SCRIPT, workers, kernel, grid, block, env=cache_env)
    try:
        assert read_line(proc, 240).strip() == "launching"
        time.sleep(0.5)
        sent = time.monotonic()
        proc.send_signal(signal.SIGINT)
        line = read_line(proc, 10)
        elapsed = time.monotonic() - sent
        assert line.startswith("KEYBOARD_INTERRUPT"), line
        assert elapsed < 1.0, f"KeyboardInterrupt {elapsed:.2f} s after SIGINT"
        assert f"kernel {kernel}" in line and "SIGINT" in line, line  # the note names the kernel
        after = read_line(proc, 30)
        if next_launch == "runs":  # the executor is whole again
            assert after.strip() == "NEXT_LAUNCH [1, 2, 3, 4, 5, 6, 7, 0]", after
        else:
            assert after.startswith("NEXT_LAUNCH_REFUSED") and "spin_forever" in after and "unusable" in after, after
    finally:
        proc.kill()
        proc.communicate()


BIG_BLOCK_SCRIPT = PRELUDE + """
out = torch.zeros(40000, dtype=torch.int32)
try:
    module.get_function("neighbour_after_barrier")(out, 40000, grid=1, block=40000)
    print("RAN", out[:4].tolist())
except KernelLaunchError as exc:
    print("ERROR", exc)
out = torch.zeros(8, dtype=torch.int32)
module.get_function("neighbour_after_barrier")(out, 8, grid=1, block=8)
print("NEXT_LAUNCH", out.tolist())
"""


def test_block_too_large_for_fibers_is_a_clear_error(cache_env):
    proc = child(BIG_BLOCK_SCRIPT, 1, env=cache_env)
    out, err = proc.communicate(timeout=240)
    assert proc.returncode == 0, f"rc={proc.returncode}\n{out}\n{err}"
    lines = out.splitlines()
    error = next((line for line in lines if line.startswith(("ERROR", "RAN"))), "")
    assert error.startswith("ERROR"), out
    for part in ("neighbour_after_barrier", "40000 threads", "vm.max_map_count", "WARP_DRIVE_CPU_STACK_KB"):
        assert part in error, (part, error)
    assert "NEXT_LAUNCH [1, 2, 3, 4, 5, 6, 7, 0]" in lines


OVERFLOW_SCRIPT = PRELUDE + """
out = torch.zeros(4, dtype=torch.float32)
try:
    module.get_function("deep_locals")(out, 4, grid=2, block=4)
    print("RAN", out.tolist())
except KernelLaunchError as exc:
    print("ERROR", exc)
small = torch.zeros(8, dtype=torch.int32)
module.get_function("neighbour_after_barrier")(small, 8, grid=1, block=8)
print("NEXT_LAUNCH", small.tolist())
"""


@pytest.mark.parametrize("faulthandler", [False, True])
def test_fiber_stack_overflow_names_the_kernel_and_the_setting(cache_env, faulthandler):
    env = dict(cache_env, WARP_DRIVE_CPU_STACK_KB="64")
    script = ("import faulthandler; faulthandler.enable()\n" if faulthandler else "") + OVERFLOW_SCRIPT
    proc = child(script, 2, env=env)
    out, err = proc.communicate(timeout=240)
    assert proc.returncode == 0, f"rc={proc.returncode}\n{out}\n{err}"
    error = next((line for line in out.splitlines() if line.startswith(("ERROR", "RAN"))), "")
    assert error.startswith("ERROR"), out
    for part in ("kernel deep_locals", "overflowed its fiber stack of 64 KiB", "WARP_DRIVE_CPU_STACK_KB"):
        assert part in error, (part, error)
    assert "NEXT_LAUNCH [1, 2, 3, 4, 5, 6, 7, 0]" in out

    # The fix the message names: with enough stack the same kernel runs.
    proc = child(OVERFLOW_SCRIPT, 1, env=dict(cache_env, WARP_DRIVE_CPU_STACK_KB="1024"))
    out, err = proc.communicate(timeout=240)
    assert proc.returncode == 0, f"rc={proc.returncode}\n{out}\n{err}"
    # sum over i = 0, 4096, ..., 61440 of (i + thread): 491520 + 16 * thread
    assert "RAN [491520.0, 491536.0, 491552.0, 491568.0]" in out, out
