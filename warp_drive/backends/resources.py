"""What a kernel costs on a GPU (registers, shared and local memory) and so how
many threads one block of it may have.

On a GPU the driver says (``cuFuncGetAttribute``, read by the pycuda
executor). Without one, nvcc's own report says the same thing: ``ptxas -v``
prints each kernel's registers, static shared memory, stack frame and spills
for a target architecture (the toolkit is installed where CI runs; no driver
is needed). The GPU-shaped cpu executor sizes its blocks from that report, and
the resource test checks every shipped kernel with it.

A block may not use more than 64 Ki registers (every architecture since sm_50
that nvcc 13 still targets), allocated per warp in units of 256 and warps in
groups of 4; so a kernel of 121 registers (rounded to 128 per thread, 4096
per warp) fits 16 warps: at most 512 threads per block.
"""

from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Sequence

from warp_drive.backends import build_cache
from warp_drive.backends.errors import KernelBuildError
from warp_drive.backends.nvcc import NvccToolchain, plan_build

DEFAULT_ARCH = "sm_90"  # H100 / H200, the GPUs this project is measured on
MAX_THREADS_PER_BLOCK = 1024
MAX_STATIC_SHARED_BYTES = 48 * 1024
REGISTERS_PER_BLOCK = 64 * 1024
REGISTER_ALLOCATION_UNIT = 256  # registers, per warp
WARP_ALLOCATION_GRANULARITY = 4
WARP_SIZE = 32


@dataclass(frozen=True)
class KernelResources:
    """One kernel's per-thread and per-block costs, and the block size they allow.

    Fields are None where the executor has no such cost (the native cpu
    executor has no registers and no block size limit beyond its own).
    """

    max_threads_per_block: int
    registers: int | None = None
    static_shared_bytes: int | None = None
    stack_frame_bytes: int | None = None
    spill_store_bytes: int | None = None
    spill_load_bytes: int | None = None
    source: str = ""  # where the figures come from, e.g. "ptxas sm_90" or "the driver"

    def describe(self) -> str:
        """e.g. ``121 registers, 6192 bytes of static shared memory (ptxas sm_90): at most 512 threads per block``."""
        parts = []
        if self.registers is not None:
            parts.append(f"{self.registers} registers")
        if self.static_shared_bytes is not None:
            parts.append(f"{self.static_shared_bytes} bytes of static shared memory")
        if self.stack_frame_bytes:
            parts.append(f"{self.stack_frame_bytes} bytes of stack frame")
        cost = ", ".join(parts) or "no per-thread limit"
        source = f" ({self.source})" if self.source else ""
        return f"{cost}{source}: at most {self.max_threads_per_block} threads per block"


def max_threads_for_registers(registers: int) -> int:
    """The largest block a kernel of ``registers`` registers per thread may launch with."""
    if registers <= 0:
        return MAX_THREADS_PER_BLOCK
    per_warp = -(-registers * WARP_SIZE // REGISTER_ALLOCATION_UNIT) * REGISTER_ALLOCATION_UNIT
    warps = REGISTERS_PER_BLOCK // per_warp
    warps -= warps % WARP_ALLOCATION_GRANULARITY
    return max(0, min(MAX_THREADS_PER_BLOCK, warps * WARP_SIZE))


_ENTRY = re.compile(r"Compiling entry function '([^']+)'")
_FRAME = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")
_USED = re.compile(r"Used (\d+) registers(?:.*?(\d+) bytes smem)?")


def parse_ptxas_report(text: str, arch: str = DEFAULT_ARCH) -> dict[str, KernelResources]:
    """Per-kernel resources from ``ptxas -v`` output (``__global__`` entries only)."""
    out: dict[str, KernelResources] = {}
    name, frame = None, (0, 0, 0)
    for line in text.splitlines():
        if m := _ENTRY.search(line):
            name, frame = m.group(1), (0, 0, 0)
        elif name and (m := _FRAME.search(line)):
            frame = tuple(int(g) for g in m.groups())
        elif name and (m := _USED.search(line)):
            registers, shared = int(m.group(1)), int(m.group(2) or 0)
            out[name] = KernelResources(
                max_threads_per_block=max_threads_for_registers(registers), registers=registers,
                static_shared_bytes=shared, stack_frame_bytes=frame[0], spill_store_bytes=frame[1],
                spill_load_bytes=frame[2], source=f"ptxas {arch}")
            name = None
    return out


def ptxas_resources(sources: Sequence[str | Path], include_dirs: Sequence[str | Path] = (),
                    defines: dict[str, str] | None = None, arch: str = DEFAULT_ARCH) -> dict[str, KernelResources]:
    """Each kernel's resources as nvcc builds ``sources`` for ``arch`` -- the pycuda
    executor's very build (same flags), with ``-Xptxas -v``. Cached by the same
    key as that build. Raises KernelBuildError when nvcc is missing."""
    plan = plan_build(NvccToolchain.find(), arch, sources, include_dirs, defines)
    # Verified against its recorded hash like every cached product: an altered
    # or truncated report is rebuilt, never believed.
    report = build_cache.cache_dir("pycuda") / f"resources_{plan.key}.json"

    def compile_to(tmp: Path) -> None:
        # plan.command ends with "-o <cubin>"
        command = [*plan.command[:-2], "-Xptxas", "-v", "-o", str(tmp.with_suffix(".cubin"))]
        text = _run_with_report(command, f"nvcc -Xptxas -v for {', '.join(map(str, plan.sources))}")
        tmp.with_suffix(".cubin").unlink(missing_ok=True)
        found = parse_ptxas_report(text, arch)
        missing = set(plan.symbols.kernels) - set(found)
        if missing:
            raise KernelBuildError(f"ptxas reported no resources for {', '.join(sorted(missing))}:\n{text}")
        tmp.write_text(json.dumps({name: asdict(r) for name, r in found.items()}, indent=1))

    build_cache.build_atomically(report, compile_to)
    return {name: KernelResources(**fields) for name, fields in json.loads(report.read_text()).items()}


def _run_with_report(command: list[str], what: str) -> str:
    """Run nvcc and return what it printed on both streams (ptxas -v writes to stderr)."""
    import subprocess

    proc = subprocess.run(command, capture_output=True, text=True)
    if proc.returncode != 0:
        raise KernelBuildError(f"{what} failed (exit {proc.returncode}):\n{proc.stderr.strip()}\n"
                               f"command: {' '.join(command)}")
    return proc.stdout + proc.stderr
