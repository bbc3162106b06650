"""What a kernel costs on a GPU (registers, shared and local memory) and so how
many threads one block of it may have.

On a GPU the driver says (``cuFuncGetAttribute``, read by the pycuda
executor). Without one, nvcc's own report says the same thing: ``ptxas -v``
prints each kernel's registers, static shared memory, stack frame and spills
for a target architecture (the toolkit is installed where CI runs; no driver
is needed). The GPU-shaped cpu executor sizes its blocks from that report, and
the resource test checks every shipped kernel with it.

The limits every architecture puts on a block live in ONE table,
:data:`ARCH_LIMITS`: the block size the framework derives for a kernel
(:func:`max_threads_for_registers`, through :func:`parse_ptxas_report`) and
the build gate (``tests/runtime/test_build_gate.py``, which builds every
shipped kernel for sm_75, sm_80, sm_90 and sm_120 and once with ``-G``) read the
same figures, so what the framework launches and what the gate accepts cannot
drift apart.

A block may not use more than 64 Ki registers (every architecture nvcc 13
targets), allocated per warp in units of 256 and warps in groups of 4; so a
kernel of 121 registers (rounded to 128 per thread, 4096 per warp) fits 16
warps: at most 512 threads per block.
"""

from __future__ import annotations

import json
import os
import re
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Sequence

from warp_drive.runtime.backends import build_cache
from warp_drive.runtime.backends.errors import KernelBuildError
from warp_drive.runtime.backends.nvcc import CubinBuild, NvccToolchain, debug_requested, plan_builds

DEFAULT_ARCH = "sm_90"  # H100 / H200, the GPUs this project is measured on
KiB = 1024


@dataclass(frozen=True)
class ArchLimits:
    """What one GPU architecture allows a block and holds per multiprocessor (SM).

    The figures are the CUDA C++ Programming Guide's "Technical Specifications
    per Compute Capability" table and the occupancy calculator's allocation
    granularities; NVIDIA's CCCL encodes the same table as
    ``cuda::arch_traits_for`` (libcudacxx ``cuda/__device/arch_traits.h``).
    Fields that are the same on every architecture nvcc 13 builds for have
    defaults; a row gives the rest.
    """

    arch: str
    shared_bytes_per_sm: int           # "maximum amount of shared memory per SM"
    max_shared_bytes_per_block: int    # static + dynamic, with the opt-in attribute (per SM less the reserve)
    reserved_shared_bytes_per_block: int  # the driver's reserve per resident block (1 KiB from sm_80)
    max_threads_per_sm: int
    max_blocks_per_sm: int
    max_threads_per_block: int = 1024
    max_registers_per_thread: int = 255
    registers_per_block: int = 64 * KiB
    registers_per_sm: int = 64 * KiB
    max_static_shared_bytes: int = 48 * KiB  # ptxas refuses more static __shared__ on every architecture
    max_local_bytes_per_thread: int = 512 * KiB  # local memory (stack frame) per thread
    register_allocation_unit: int = 256  # registers, per warp
    warp_allocation_granularity: int = 4  # a block's warps are spread over the 4 SM sub-partitions
    shared_allocation_unit: int = 128  # bytes
    warp_size: int = 32


#: Per-architecture limits: the one table the framework's block sizes and the build gate read.
ARCH_LIMITS: dict[str, ArchLimits] = {row.arch: row for row in (
    ArchLimits("sm_75", shared_bytes_per_sm=64 * KiB, max_shared_bytes_per_block=64 * KiB,
               reserved_shared_bytes_per_block=0, max_threads_per_sm=1024, max_blocks_per_sm=16,
               shared_allocation_unit=256),                              # Turing: T4, RTX 20xx
    ArchLimits("sm_80", 164 * KiB, 163 * KiB, 1 * KiB, 2048, 32),        # A100, A30
    ArchLimits("sm_86", 100 * KiB, 99 * KiB, 1 * KiB, 1536, 16),         # RTX 30xx, A10, A40
    ArchLimits("sm_87", 164 * KiB, 163 * KiB, 1 * KiB, 1536, 16),        # Jetson Orin
    ArchLimits("sm_89", 100 * KiB, 99 * KiB, 1 * KiB, 1536, 24),         # L4, L40, RTX 40xx
    ArchLimits("sm_90", 228 * KiB, 227 * KiB, 1 * KiB, 2048, 32),        # H100, H200
    ArchLimits("sm_100", 228 * KiB, 227 * KiB, 1 * KiB, 2048, 32),       # B200
    ArchLimits("sm_120", 100 * KiB, 99 * KiB, 1 * KiB, 1536, 24),        # RTX 50xx, RTX PRO 6000
)}


def arch_limits(arch: str) -> ArchLimits:
    """The row of :data:`ARCH_LIMITS` for ``arch`` (e.g. ``sm_90``); KernelBuildError if there is none."""
    try:
        return ARCH_LIMITS[arch]
    except KeyError:
        raise KernelBuildError(f"no block limits are known for {arch}: add its row to ARCH_LIMITS in "
                               f"warp_drive/runtime/backends/resources.py (known: {', '.join(ARCH_LIMITS)})") from None


# The default architecture's figures under their historical names (the cpu executor reads these).
MAX_THREADS_PER_BLOCK = ARCH_LIMITS[DEFAULT_ARCH].max_threads_per_block
MAX_STATIC_SHARED_BYTES = ARCH_LIMITS[DEFAULT_ARCH].max_static_shared_bytes
REGISTERS_PER_BLOCK = ARCH_LIMITS[DEFAULT_ARCH].registers_per_block
REGISTER_ALLOCATION_UNIT = ARCH_LIMITS[DEFAULT_ARCH].register_allocation_unit
WARP_ALLOCATION_GRANULARITY = ARCH_LIMITS[DEFAULT_ARCH].warp_allocation_granularity
WARP_SIZE = ARCH_LIMITS[DEFAULT_ARCH].warp_size


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


def registers_per_warp(registers: int, arch: str = DEFAULT_ARCH) -> int:
    """Registers one warp of a kernel takes: ``registers`` per thread, rounded up to the allocation unit."""
    limits = arch_limits(arch)
    unit = limits.register_allocation_unit
    return -(-max(registers, 1) * limits.warp_size // unit) * unit


def block_registers(registers: int, threads: int, arch: str = DEFAULT_ARCH) -> int:
    """Registers a block of ``threads`` takes from the register file: whole warps,
    each rounded up to the allocation unit, in groups of one warp per sub-partition."""
    limits = arch_limits(arch)
    warps = -(-threads // limits.warp_size)
    groups = limits.warp_allocation_granularity
    return registers_per_warp(registers, arch) * (-(-warps // groups) * groups)


def max_threads_for_registers(registers: int, arch: str = DEFAULT_ARCH) -> int:
    """The largest block a kernel of ``registers`` registers per thread may launch with on ``arch``."""
    limits = arch_limits(arch)
    most = min(limits.max_threads_per_block, limits.max_threads_per_sm)
    if registers <= 0:
        return most
    if registers > limits.max_registers_per_thread:
        return 0
    warps = limits.registers_per_block // registers_per_warp(registers, arch)
    warps -= warps % limits.warp_allocation_granularity
    return max(0, min(most, warps * limits.warp_size))


def blocks_per_sm(resources: "KernelResources", threads: int, arch: str = DEFAULT_ARCH,
                  dynamic_shared: int = 0) -> int:
    """How many blocks of ``threads`` one SM of ``arch`` holds at once (CUDA's occupancy rules)."""
    limits = arch_limits(arch)
    warps = -(-threads // limits.warp_size)
    by_threads = limits.max_threads_per_sm // (warps * limits.warp_size)
    partitions = limits.warp_allocation_granularity
    per_partition = limits.registers_per_sm // partitions // registers_per_warp(resources.registers or 1, arch)
    by_registers = per_partition * partitions // warps
    shared = (resources.static_shared_bytes or 0) + dynamic_shared + limits.reserved_shared_bytes_per_block
    unit = limits.shared_allocation_unit
    by_shared = limits.shared_bytes_per_sm // (-(-shared // unit) * unit) if shared else limits.max_blocks_per_sm
    return min(limits.max_blocks_per_sm, by_threads, by_registers, by_shared)


def launch_problems(kernel: str, resources: "KernelResources", threads: int, arch: str = DEFAULT_ARCH,
                    dynamic_shared: int = 0) -> list[str]:
    """Why a block of ``threads`` (and ``dynamic_shared`` bytes) of ``kernel`` cannot
    launch on ``arch`` with the resources ptxas reported for that architecture;
    empty when it can. Each line names the kernel, the block and the limit."""
    limits = arch_limits(arch)
    what = f"kernel {kernel} at {threads} threads per block on {arch} ({resources.describe()})"
    problems = []
    if threads > limits.max_threads_per_block:
        problems.append(f"{what}: over the {limits.max_threads_per_block} threads of a block")
    elif threads > resources.max_threads_per_block:
        problems.append(f"{what}: more threads than its largest block")
    registers = resources.registers or 0
    if registers > limits.max_registers_per_thread:
        problems.append(f"{what}: {registers} registers per thread, over {limits.max_registers_per_thread}")
    elif registers and block_registers(registers, threads, arch) > limits.registers_per_block:
        problems.append(f"{what}: {block_registers(registers, threads, arch)} registers, over the "
                        f"{limits.registers_per_block} of a block")
    static = resources.static_shared_bytes or 0
    if static > limits.max_static_shared_bytes:
        problems.append(f"{what}: {static} bytes of static shared memory, over {limits.max_static_shared_bytes}")
    if static + dynamic_shared > limits.max_shared_bytes_per_block:
        problems.append(f"{what}: {static} + {dynamic_shared} bytes of static + dynamic shared memory, over the "
                        f"{limits.max_shared_bytes_per_block} a block of {arch} may have")
    if (resources.stack_frame_bytes or 0) > limits.max_local_bytes_per_thread:
        problems.append(f"{what}: a stack frame of {resources.stack_frame_bytes} bytes, over the "
                        f"{limits.max_local_bytes_per_thread} bytes of local memory a thread may have")
    if not problems and threads > 0 and blocks_per_sm(resources, threads, arch, dynamic_shared) < 1:
        problems.append(f"{what}: one block does not fit on one SM of {arch} ({limits.max_threads_per_sm} "
                        f"threads, {limits.shared_bytes_per_sm} bytes of shared memory)")
    return problems


def local_memory_problems(kernel: str, resources: "KernelResources", allowed_stack_bytes: int = 0) -> list[str]:
    """Spills and local memory of a kernel that should have none: any spill, and
    a stack frame beyond ``allowed_stack_bytes`` (local arrays kept by design)."""
    problems = []
    what = f"kernel {kernel} ({resources.describe()})"
    if resources.spill_store_bytes or resources.spill_load_bytes:
        problems.append(f"{what}: spills to local memory ({resources.spill_store_bytes} bytes stored, "
                        f"{resources.spill_load_bytes} loaded per thread); bound the block with __launch_bounds__ "
                        "or lighten the kernel")
    if (resources.stack_frame_bytes or 0) > allowed_stack_bytes:
        allowed = f", {allowed_stack_bytes} allowed" if allowed_stack_bytes else ""
        problems.append(f"{what}: {resources.stack_frame_bytes} bytes of stack frame (local memory{allowed}); "
                        "a dynamically indexed local array or a large local struct lives there -- index it "
                        "with constants, or keep it in registers or shared memory")
    return problems


_ENTRY = re.compile(r"Compiling entry function '([^']+)'")
_FRAME = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")
_USED = re.compile(r"Used (\d+) registers(?:.*?(\d+) bytes smem)?")


def build_label(arch: str, debug: bool = False) -> str:
    """How a report names its build: ``ptxas sm_90``, or ``ptxas sm_90, -G debug build``."""
    return f"ptxas {arch}, -G debug build" if debug else f"ptxas {arch}"


def parse_ptxas_report(text: str, arch: str = DEFAULT_ARCH, debug: bool = False) -> dict[str, KernelResources]:
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
                max_threads_per_block=max_threads_for_registers(registers, arch), registers=registers,
                static_shared_bytes=shared, stack_frame_bytes=frame[0], spill_store_bytes=frame[1],
                spill_load_bytes=frame[2], source=build_label(arch, debug))
            name = None
    return out


def ptxas_resources(sources: Sequence[str | Path], include_dirs: Sequence[str | Path] = (),
                    defines: dict[str, str] | None = None, arch: str = DEFAULT_ARCH,
                    debug: bool | None = None) -> dict[str, KernelResources]:
    """Each kernel's resources as nvcc builds ``sources`` for ``arch`` -- the pycuda
    executor's very build (same flags), with ``-Xptxas -v``. Cached by the same
    key as that build. ``debug`` None: a ``-G`` build when ``$WARP_DRIVE_NVCC_DEBUG``
    asks for one. Raises KernelBuildError when nvcc is missing or the build fails."""
    if debug is None:
        debug = debug_requested()
    [result] = ptxas_reports([ResourceRequest(tuple(sources), tuple(include_dirs), defines, arch, debug)])
    if isinstance(result, KernelBuildError):
        raise result
    return result


@dataclass(frozen=True)
class ResourceRequest:
    """One ``ptxas -v`` report to produce: sources, include dirs, defines, architecture, debug (``-G``)."""

    sources: tuple
    include_dirs: tuple = ()
    defines: dict | None = None
    arch: str = DEFAULT_ARCH
    debug: bool = False

    def unit(self) -> tuple:
        """What the requests of one preprocessing share."""
        return (tuple(str(s) for s in self.sources), tuple(str(d) for d in self.include_dirs),
                tuple(sorted((self.defines or {}).items())))


def ptxas_reports(requests: Sequence[ResourceRequest], workers: int | None = None,
                  toolchain: NvccToolchain | None = None) -> list["dict[str, KernelResources] | KernelBuildError"]:
    """:func:`ptxas_resources` for many requests at once: sources read once for
    all their targets, nvcc runs on a small thread pool (``workers``; default
    the usable cores, at most 4), every report cached. Returns, in order, each
    request's resources -- or the KernelBuildError its build raised, naming the
    architecture, so one failing target does not hide the others."""
    toolchain = toolchain or NvccToolchain.find()
    groups: dict[tuple, list[int]] = {}
    for index, request in enumerate(requests):
        groups.setdefault(request.unit(), []).append(index)
    workers = workers or min(4, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1)
    results: list = [None] * len(requests)

    def plan(indices: list[int]):
        first = requests[indices[0]]
        try:
            return plan_builds(toolchain, [(requests[i].arch, requests[i].debug) for i in indices], first.sources,
                               first.include_dirs, first.defines)
        except KernelBuildError as exc:
            return exc

    def report(index: int, build: CubinBuild):
        try:
            results[index] = _report(build)
        except KernelBuildError as exc:
            results[index] = KernelBuildError(f"{build_label(build.arch, build.debug)}: {exc}")

    with ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
        plans = list(pool.map(plan, groups.values()))
        jobs = []
        for indices, planned in zip(groups.values(), plans):
            for position, index in enumerate(indices):
                if isinstance(planned, KernelBuildError):
                    results[index] = planned
                else:
                    jobs.append(pool.submit(report, index, planned[position]))
        for job in jobs:
            job.result()
    return results


def _report(plan: CubinBuild) -> dict[str, KernelResources]:
    """The cached ``-Xptxas -v`` report of one planned build (built when missing)."""
    # Verified against its recorded hash like every cached product: an altered
    # or truncated report is rebuilt, never believed.
    report = build_cache.cache_dir("pycuda") / f"resources_{plan.key}.json"

    def compile_to(tmp: Path) -> None:
        # plan.command ends with "-o <cubin>"
        command = [*plan.command[:-2], "-Xptxas", "-v", "-o", str(tmp.with_suffix(".cubin"))]
        text = _run_with_report(command, f"nvcc -Xptxas -v for {', '.join(map(str, plan.sources))}")
        tmp.with_suffix(".cubin").unlink(missing_ok=True)
        found = parse_ptxas_report(text, plan.arch, plan.debug)
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
