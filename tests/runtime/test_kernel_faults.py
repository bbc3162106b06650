"""A kernel that faults on the cpu executor -- an integer division by zero
(SIGFPE), a read outside every mapping (SIGSEGV) -- fails its launch with
KernelLaunchError naming the kernel, the CUDA thread and the .cu line, instead
of killing Python with a signal and no message (tests/kernels/faults.cu)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import torch

from warp_drive.runtime.backends.base import KernelLaunchError
from warp_drive.runtime.backends.cpu import CpuBackend

ROOT = Path(__file__).resolve().parents[2]
FAULTS = ROOT / "tests" / "kernels" / "faults.cu"


def line_of(marker: str) -> int:
    return next(i for i, line in enumerate(FAULTS.read_text().splitlines(), 1) if marker in line)


@pytest.mark.parametrize("threads", [1, 8])  # one thread: a plain call; eight: a fiber, then the fast path
def test_an_integer_division_by_zero_names_kernel_thread_and_line(threads):
    backend = CpuBackend()
    divide = backend.build([FAULTS]).get_function("divide")
    a = torch.arange(1, threads + 1, dtype=torch.int32)
    b = torch.ones(threads, dtype=torch.int32)
    b[threads - 1] = 0
    out = torch.zeros(threads, dtype=torch.int32)
    with pytest.raises(KernelLaunchError) as error:
        divide(a, b, out, grid=1, block=threads)
    message = str(error.value)
    assert "kernel divide" in message and "integer division by zero (SIGFPE)" in message
    assert f"thread ({threads - 1},0,0)" in message
    assert f"faults.cu:{line_of('DIVIDE')}" in message
    b[threads - 1] = 1  # a division by zero is not a memory fault: the executor carries on
    divide(a, b, out, grid=1, block=threads)
    assert out.tolist() == a.tolist()


WILD_READ = """
import sys, torch
from warp_drive.runtime.backends.base import KernelLaunchError
from warp_drive.runtime.backends.cpu import CpuBackend
module = CpuBackend().build([sys.argv[1]])
a, out = torch.arange(8, dtype=torch.int32), torch.zeros(1, dtype=torch.int32)
for attempt in range(2):
    try:
        module.get_function("wild_read")(a, out, 10**12, grid=1, block=int(sys.argv[2]))
    except KernelLaunchError as exc:
        print(exc)
"""


@pytest.mark.slow  # a child process
@pytest.mark.parametrize("threads", [1, 4])
def test_a_read_outside_every_mapping_fails_the_launch_and_then_the_executor(threads):
    proc = subprocess.run([sys.executable, "-c", WILD_READ, str(FAULTS), str(threads)], capture_output=True,
                          text=True, cwd=ROOT, timeout=300)
    assert proc.returncode == 0, f"rc {proc.returncode} (negative: killed by a signal)\n{proc.stderr}"
    first, second = proc.stdout.strip().splitlines()
    assert "kernel wild_read" in first and "invalid memory access (SIGSEGV" in first
    assert f"faults.cu:{line_of('WILD READ')}" in first and "thread (0,0,0)" in first
    assert "unusable" in second and "kernel wild_read faulted (SIGSEGV)" in second
