"""The build gate: every kernel the project ships, built by nvcc for the GPUs it
may meet -- no GPU needed.

Why: only sm_90 release builds were checked before, while users run on T4s
(sm_75), A100s (sm_80) and RTX 50xx cards (sm_120), and debug with ``-G``. A
kernel that spills, uses local memory, fails ptxas on one architecture only,
or launches a block too big for one architecture's limits is found here,
before anyone meets it on a GPU.

What is built, each with ``nvcc -cubin -Xptxas -v`` for sm_75, sm_80, sm_90 and
sm_120, and once with ``-G`` (device debug) for sm_90 -- the pycuda
executor's own flags, through :func:`warp_drive.runtime.backends.resources.ptxas_reports`
(one preprocessing per unit, nvcc on a small thread pool, every report in the
build cache, so a second run only re-reads the sources):

* the framework's kernels (``CORE_SOURCES``: sampler, reset, log), as one module
  as ``core_module`` builds them;
* every registered env's ``.cu`` with its ``cuda_defines`` (from the env
  classes, as the other kernel tests find them) and the demo's ``walk.cu``;
* the test kernels (``tests/kernels/*.cu`` except the gate's own ``planted_*``),
  ``benchmarks/kernels/*.cu`` and the WarpDrive-style native port;
* the WarpDrive-style ``line_chase_step.cu`` through the compat layer's own
  build (its header and ``-D`` sizes).

Sources are grouped into a few translation units (ptxas reports each kernel on
its own; ``test_grouped_units_report_what_each_source_reports`` checks that the
figures equal the per-source build the executors use). A unit that fails on an
architecture is rebuilt one source at a time for it, so a clash between two
files of a unit is not mistaken for an error, and a real error names its file.

What fails the gate:

(a) spills or local memory (a stack frame) in a step kernel or a framework
    kernel, in a release build: these run every step. Local memory kept by
    design is declared in ``LOCAL_MEMORY_BY_DESIGN`` with its reason and bound;
(b) a build error on any architecture (nvcc's message, naming the architecture);
(c) a documented configuration (every shipped run config and benchmark
    workload, as ``test_kernel_resources.py`` lists them; the demo's default)
    whose block, as the framework chooses it from that architecture's ptxas
    figures, breaks that architecture's register, shared-memory, stack or
    thread limits -- from ``ARCH_LIMITS``, the same table the framework's block
    sizes come from. In the ``-G`` build a thread-per-agent env too large for
    its debug registers is refused by the framework itself, naming the kernel,
    its registers and its largest block.

Cost (2 cores): see the README's "Kernels on every GPU architecture" section;
the nvcc work is in the slow tier. Skipped, with the reason, where nvcc is not
installed.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from warp_drive.runtime.backends.nvcc import find_nvcc

if find_nvcc() is None:
    pytest.skip("nvcc not found: the build gate compiles every shipped kernel with nvcc -Xptxas -v for sm_75, sm_80, "
                "sm_90, sm_120 and -G (install the CUDA toolkit, or set $NVCC / $CUDA_HOME)", allow_module_level=True)

import test_kernel_resources as kr  # noqa: E402  (the documented configurations and the offline GPU)

from warp_drive.runtime.backends import build_cache  # noqa: E402
from warp_drive.runtime.backends.cpu import GpuShapedCpuBackend  # noqa: E402
from warp_drive.runtime.backends.errors import KernelBuildError  # noqa: E402
from warp_drive.runtime.backends.resources import (  # noqa: E402
    ARCH_LIMITS,
    DEFAULT_ARCH,
    KernelResources,
    ResourceRequest,
    build_label,
    launch_problems,
    local_memory_problems,
    max_threads_for_registers,
    parse_ptxas_report,
    ptxas_reports,
    ptxas_resources,
)
from warp_drive.runtime.backends.signature import parse_symbols  # noqa: E402
from warp_drive.env.demo import WALK_SOURCE  # noqa: E402
from warp_drive.runtime.function_manager import CORE_SOURCES, EnvTooLargeError, FunctionManager  # noqa: E402
from warp_drive.env.registry import BUILTIN_ENVS, get_env_class  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
KERNELS = REPO / "tests" / "kernels"
TARGETS = (("sm_75", False), ("sm_80", False), ("sm_90", False), ("sm_120", False), ("sm_90", True))
RELEASE_TARGETS = tuple(t for t in TARGETS if not t[1])

# Local memory a step kernel keeps on purpose: kernel -> (most bytes of stack frame
# on any architecture's release build, why). Anything more, and any spill, fails.
LOCAL_MEMORY_BY_DESIGN = {
    "TagContinuousStep": (512, "the observer's k nearest (WdNearest in neighbors.h: WD_MAX_NEIGHBORS + 1 64-bit "
                               "keys, sorted by insertion at run-time positions) -- 416 bytes on sm_75..sm_90, 512 "
                               "on sm_120"),
}
DEMO_AGENTS = 32  # python -m warp_drive.env.demo's default --agents (a thread-per-agent launch)


# --------------------------------------------------------------------------- what is built
@dataclass(frozen=True)
class Unit:
    """One translation unit of the gate: sources nvcc builds together, and which of
    their kernels run every step (no spills or local memory allowed there)."""

    name: str
    sources: tuple[Path, ...]
    include_dirs: tuple[Path, ...] = ()
    defines: tuple[tuple[str, str], ...] = ()
    hot_kernels: frozenset[str] = field(default_factory=frozenset)

    def request(self, arch: str, debug: bool, sources: tuple[Path, ...] | None = None) -> ResourceRequest:
        return ResourceRequest(sources or self.sources, self.include_dirs, dict(self.defines), arch, debug)


class _RecordingGpu(kr.OfflineGpu):
    """Records what the compat layer asks a backend to build (nothing is built)."""

    def build(self, sources, include_dirs=(), defines=None):
        self.recorded = (tuple(Path(s) for s in sources), tuple(Path(d) for d in include_dirs),
                         tuple(sorted((defines or {}).items())))
        return kr._ReportedModule([Path(s) for s in sources], {})


def compat_unit() -> Unit:
    """``line_chase_step.cu`` as WarpDrive compatibility builds it: the compat
    header's wrapper and the function manager's sizes as ``-D`` defines."""
    from warp_drive.compat.cuda_build import build_warpdrive_source

    recorder = _RecordingGpu()
    fm = FunctionManager(2, 4, backend=recorder)  # LineChase's default num_agents
    build_warpdrive_source(fm, REPO / "tests" / "compat" / "warpdrive_style" / "line_chase_step.cu")
    sources, include_dirs, defines = recorder.recorded
    return Unit("WarpDrive-style line chase", sources, include_dirs, defines)


def shipped_units() -> list[Unit]:
    """Every kernel the project ships, in a few units (see the module docstring)."""
    classes = [get_env_class(name) for name in BUILTIN_ENVS]
    by_defines: dict[tuple, list] = {}
    for cls in classes:
        by_defines.setdefault(tuple(sorted(dict(cls.cuda_defines).items())), []).append(cls)
    units = [Unit("framework kernels", tuple(CORE_SOURCES), hot_kernels=frozenset(core_kernels()))]
    for defines, group in by_defines.items():
        sources = sorted({cls.cuda_source_path() for cls in group})
        hot = {cls.step_kernel for cls in group}
        if not defines:
            sources.append(WALK_SOURCE)
            hot.add("WalkStep")
        units.append(Unit(f"example envs {dict(defines) or ''}".strip(), tuple(sources), defines=defines,
                          hot_kernels=frozenset(hot)))
    tests = sorted(p for p in KERNELS.glob("*.cu") if not p.name.startswith("planted_"))
    tests += sorted((REPO / "benchmarks" / "kernels").glob("*.cu"))
    tests.append(REPO / "tests" / "compat" / "warpdrive_style" / "line_chase_native.cu")
    units.append(Unit("test and benchmark kernels", tuple(tests)))
    units.append(compat_unit())
    return units


def core_kernels() -> list[str]:
    return list(kernels_in(tuple(str(p) for p in CORE_SOURCES)))


@functools.lru_cache(maxsize=None)
def kernels_in(sources: tuple[str, ...], include_dirs: tuple[str, ...] = (), defines: tuple = ()) -> tuple[str, ...]:
    """The ``__global__`` kernels ``sources`` define (the executors' own signature pass)."""
    include_flags, define_flags = build_cache.include_and_define_flags(include_dirs, dict(defines))
    text = build_cache.preprocess_for_symbols(build_cache.host_compiler("the build gate"),
                                              [Path(s) for s in sources], include_flags, define_flags)
    return tuple(parse_symbols(text).kernels)


# --------------------------------------------------------------------------- building
@dataclass
class GateBuild:
    """Per (unit name, target): each kernel's resources; and the build errors."""

    reports: dict[tuple[str, tuple[str, bool]], dict[str, KernelResources]]
    errors: list[str]

    def kernels(self, target) -> dict[str, KernelResources]:
        """Every kernel's figures for ``target``; a name in two units: the first unit's
        (units are listed framework kernels and envs first)."""
        merged: dict[str, KernelResources] = {}
        for (_unit, t), found in self.reports.items():
            if t == target:
                for name, resources in found.items():
                    merged.setdefault(name, resources)
        return merged


def build(units: list[Unit], targets=TARGETS) -> GateBuild:
    """Every unit for every target; a unit that fails on a target is rebuilt
    source by source for it, and only the sources that fail alone are errors."""
    jobs = [(unit, target) for unit in units for target in targets]
    results = ptxas_reports([unit.request(*target) for unit, target in jobs])
    reports, errors, retry = {}, [], []
    for (unit, target), result in zip(jobs, results):
        if isinstance(result, KernelBuildError):
            retry += [(unit, target, source) for source in unit.sources]
        else:
            reports[(unit.name, target)] = result
    if retry:
        alone = ptxas_reports([unit.request(*target, sources=(source,)) for unit, target, source in retry])
        for (unit, target, source), result in zip(retry, alone):
            if isinstance(result, KernelBuildError):
                errors.append(f"{unit.name}, {source.relative_to(REPO) if source.is_relative_to(REPO) else source}, "
                              f"{result}")
            else:
                reports.setdefault((unit.name, target), {}).update(result)
    return GateBuild(reports, errors)


@functools.lru_cache(maxsize=None)
def shipped_build() -> GateBuild:
    return build(shipped_units())


# --------------------------------------------------------------------------- checks
def kernel_problems(gate: GateBuild, units: list[Unit]) -> list[str]:
    """(a) spills and local memory in hot kernels (release builds), and limits
    any block of a kernel breaks whatever its size (static shared memory, stack)."""
    problems = []
    for unit in units:
        for (name, target), found in gate.reports.items():
            if name != unit.name:
                continue
            arch, debug = target
            for kernel, resources in found.items():
                problems += launch_problems(kernel, resources, ARCH_LIMITS[arch].warp_size, arch)
                if kernel in unit.hot_kernels and not debug:
                    allowed = LOCAL_MEMORY_BY_DESIGN.get(kernel, (0, ""))[0]
                    problems += local_memory_problems(kernel, resources, allowed)
    return problems


_GPUS: dict[tuple[str, bool], kr.OfflineGpu] = {}


def offline_gpu(gate: GateBuild, target) -> kr.OfflineGpu:
    """A GPU of ``target``'s architecture as FunctionManager sees it, with the gate's figures."""
    if target not in _GPUS:
        kernels = gate.kernels(target)
        _GPUS[target] = kr.OfflineGpu(*target, resources_for=lambda paths: {k: kernels[k] for k in kernels_in(paths)})
    return _GPUS[target]


def configuration_problems(gate: GateBuild, target) -> list[str]:
    """(c) every documented configuration at the block the framework chooses on
    ``target`` (and the framework kernels at their blocks, the demo at its default)."""
    arch, _debug = target
    gpu = offline_gpu(gate, target)
    problems = []
    for where, env_name, config, num_envs in kr.POINTS:
        label = f"{build_label(*target)}, {where} ({num_envs} envs)"
        try:
            env, resources, grid, block, cooperative = kr.gpu_step_launch(env_name, config, num_envs, gpu)
        except EnvTooLargeError as exc:
            problems.append(f"{label}: {exc}")
            continue
        threads = block[0] * block[1] * block[2]
        found = launch_problems(type(env).step_kernel, resources, threads, arch)
        if cooperative and arch == DEFAULT_ARCH and (why := kr.co_residency_problem(resources, grid, block)):
            found.append(why)  # the SM count is an H100's: other architectures' GPUs vary
        problems += [f"{label}: {p}" for p in found]
    kernels = gate.kernels(target)
    for kernel, threads in kr.core_block_sizes().items():
        problems += [f"{build_label(*target)}: {p}" for p in launch_problems(kernel, kernels[kernel], threads, arch)]
    fm = FunctionManager(1000, DEMO_AGENTS, backend=gpu)
    fm.compile_and_load(WALK_SOURCE)
    grid, block, _cooperative = fm.env_geometry("WalkStep")
    problems += [f"{build_label(*target)}, the demo: {p}" for p in launch_problems("WalkStep", kernels["WalkStep"],
                                                                                    block[0], arch)]
    return problems


# --------------------------------------------------------------------------- the table (no nvcc)
def test_arch_table_holds_the_compute_capability_figures():
    """A few figures of CUDA's compute-capability table, checked by hand."""
    sm75, sm80, sm90, sm120 = (ARCH_LIMITS[a] for a in ("sm_75", "sm_80", "sm_90", "sm_120"))
    assert all(r.registers_per_block == 65536 and r.max_threads_per_block == 1024 and
               r.max_registers_per_thread == 255 and r.max_static_shared_bytes == 48 * 1024
               for r in ARCH_LIMITS.values())
    assert (sm75.shared_bytes_per_sm, sm75.max_shared_bytes_per_block, sm75.max_threads_per_sm) == (65536, 65536, 1024)
    assert (sm80.shared_bytes_per_sm, sm80.max_shared_bytes_per_block) == (164 * 1024, 163 * 1024)
    assert (sm90.shared_bytes_per_sm, sm90.max_shared_bytes_per_block, sm90.max_threads_per_sm) == (
        228 * 1024, 227 * 1024, 2048)
    assert (sm120.shared_bytes_per_sm, sm120.max_threads_per_sm) == (100 * 1024, 1536)


def test_framework_block_sizes_read_the_table(monkeypatch):
    """The block the framework derives from a ptxas report comes from ARCH_LIMITS:
    a row with half the register file halves it."""
    report = ("ptxas info    : Compiling entry function 'k' for 'sm_90'\n"
              "    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads\n"
              "ptxas info    : Used 121 registers, used 0 barriers\n")
    assert parse_ptxas_report(report)["k"].max_threads_per_block == 512
    assert max_threads_for_registers(255, "sm_75") == 256
    from dataclasses import replace

    monkeypatch.setitem(ARCH_LIMITS, "sm_90", replace(ARCH_LIMITS["sm_90"], registers_per_block=32 * 1024))
    assert parse_ptxas_report(report)["k"].max_threads_per_block == 256


def test_limits_check_names_the_kernel_block_and_architecture():
    """launch_problems over hand-made figures: shared memory beyond sm_75's 64 KiB,
    registers beyond a block, a stack beyond 512 KiB."""
    shared = KernelResources(max_threads_per_block=1024, registers=16, static_shared_bytes=40 * 1024)
    assert launch_problems("k", shared, 256, "sm_90", dynamic_shared=32 * 1024) == []
    [problem] = launch_problems("k", shared, 256, "sm_75", dynamic_shared=32 * 1024)
    assert "kernel k at 256 threads per block on sm_75" in problem and "over the 65536" in problem
    heavy = KernelResources(max_threads_per_block=256, registers=255, source=build_label("sm_90", True))
    problems = launch_problems("Step", heavy, 512, "sm_90")
    assert any("255 registers" in p and "512 threads" in p and "-G debug build" in p for p in problems), problems
    deep = KernelResources(max_threads_per_block=1024, registers=16, stack_frame_bytes=600 * 1024)
    assert any("local memory a thread may have" in p for p in launch_problems("d", deep, 32, "sm_120"))


# --------------------------------------------------------------------------- the gate (nvcc)
@pytest.mark.slow
def test_shipped_kernels_build_on_every_architecture_without_spills():
    """(a) and (b) over every shipped kernel, for every target."""
    gate = shipped_build()
    units = shipped_units()
    assert not gate.errors, "build errors:\n" + "\n\n".join(gate.errors)
    for unit in units:
        for target in TARGETS:
            assert gate.reports.get((unit.name, target)), f"{unit.name}: no report for {build_label(*target)}"
    hot = {k for unit in units for k in unit.hot_kernels}
    assert {get_env_class(name).step_kernel for name in BUILTIN_ENVS} | {"WalkStep", "wd_sample_categorical"} <= hot
    problems = kernel_problems(gate, units)
    assert not problems, "\n".join(problems)


@pytest.mark.slow
@pytest.mark.parametrize("target", TARGETS, ids=[build_label(*t).replace(" ", "_") for t in TARGETS])
def test_documented_configurations_fit_every_architecture(target):
    """(c): the block the framework chooses from this target's figures fits this target's limits."""
    problems = configuration_problems(shipped_build(), target)
    assert not problems, "\n".join(problems)


@pytest.mark.slow
def test_grouped_units_report_what_each_source_reports():
    """The gate builds sources together; the executors build an env's source alone
    (sm_90, release). Each step and framework kernel gets the same figures."""
    gate = shipped_build()
    grouped = gate.kernels(("sm_90", False))
    sources = [(CORE_SOURCES, None)] + [([get_env_class(n).cuda_source_path()], get_env_class(n).step_kernel)
                                        for n in BUILTIN_ENVS] + [([WALK_SOURCE], "WalkStep")]
    reports = ptxas_reports([ResourceRequest(tuple(paths), arch="sm_90", debug=False) for paths, _kernel in sources])
    for (paths, kernel), alone in zip(sources, reports):
        assert not isinstance(alone, KernelBuildError), alone
        for name in [kernel] if kernel else alone:
            assert alone[name] == grouped[name], (name, alone[name], grouped[name])


@pytest.mark.slow
def test_gate_refuses_a_spilling_step_kernel():
    """tests/kernels/planted_spill.cu spills and keeps a stack frame on every architecture."""
    unit = Unit("planted spill", (KERNELS / "planted_spill.cu",), hot_kernels=frozenset({"PlantedSpillStep"}))
    gate = build([unit], (("sm_75", False), ("sm_90", False)))
    assert not gate.errors, gate.errors
    problems = kernel_problems(gate, [unit])
    for arch in ("sm_75", "sm_90"):
        mine = [p for p in problems if f"ptxas {arch})" in p]
        assert any("PlantedSpillStep" in p and "spills to local memory" in p for p in mine), problems
        assert any("bytes of stack frame" in p for p in mine), problems


@pytest.mark.slow
def test_gate_refuses_a_configuration_too_large_for_sm_75():
    """tests/kernels/planted_shared.cu launched as documented (256 threads, 32 KiB
    of dynamic shared memory) fits sm_80, sm_90 and sm_120, not sm_75."""
    unit = Unit("planted shared", (KERNELS / "planted_shared.cu",))
    gate = build([unit], RELEASE_TARGETS)
    assert not gate.errors, gate.errors
    assert not kernel_problems(gate, [unit])
    for arch, _debug in RELEASE_TARGETS:
        resources = gate.kernels((arch, False))["PlantedSharedStep"]
        problems = launch_problems("PlantedSharedStep", resources, 256, arch, dynamic_shared=32 * 1024)
        if arch == "sm_75":
            assert problems and all("sm_75" in p and "PlantedSharedStep" in p for p in problems), problems
            assert any("40960 + 32768 bytes of static + dynamic shared memory" in p for p in problems), problems
        else:
            assert not problems, problems


ARCH_SPECIFIC = """\
// __reduce_add_sync exists from sm_80 on
extern "C" __global__ void warp_sum(const unsigned* in, unsigned* out) {
  out[threadIdx.x] = __reduce_add_sync(0xffffffffu, in[threadIdx.x]);
}
"""


@pytest.mark.slow
def test_gate_names_the_architecture_a_build_fails_on(tmp_path):
    """(b): a kernel that builds for sm_80 and later fails the gate on sm_75, saying so."""
    source = tmp_path / "warp_sum.cu"
    source.write_text(ARCH_SPECIFIC)
    gate = build([Unit("sm_80 intrinsic", (source,))], (("sm_75", False), ("sm_90", False)))
    [error] = gate.errors
    assert "ptxas sm_75" in error and "warp_sum.cu" in error and "__reduce_add_sync" in error, error
    assert "warp_sum" in gate.kernels(("sm_90", False))


@pytest.mark.slow
def test_env_too_large_for_a_debug_build_says_so(monkeypatch):
    """WARP_DRIVE_NVCC_DEBUG=1 asks for -G builds; the GPU-shaped executor then sizes
    blocks from the debug build's registers. DummyEnv's thread-per-agent step
    (28 registers in release, 74 with -G on sm_90 under nvcc 13) runs an env of
    1024 agents in one block in release and is refused in debug, naming the
    kernel, its debug registers and its largest block."""
    dummy = get_env_class("DummyEnv")
    source, kernel = dummy.cuda_source_path(), dummy.step_kernel
    release = ptxas_resources([source], debug=False)[kernel]
    debug = ptxas_resources([source], debug=True)[kernel]
    agents = release.max_threads_per_block
    assert debug.registers > release.registers and debug.max_threads_per_block < agents, (release, debug)

    fm = FunctionManager(2, agents, backend=GpuShapedCpuBackend())  # fresh executors: no cached figures
    fm.compile_and_load(source)
    assert fm.env_geometry(kernel)[1] == (agents, 1, 1)
    monkeypatch.setenv("WARP_DRIVE_NVCC_DEBUG", "1")
    fm = FunctionManager(2, agents, backend=GpuShapedCpuBackend())
    fm.compile_and_load(source)
    with pytest.raises(EnvTooLargeError) as info:
        fm.env_geometry(kernel)
    message = str(info.value)
    assert kernel in message and f"{debug.registers} registers" in message, message
    assert "-G debug build" in message and f"at most {debug.max_threads_per_block} threads per block" in message
    assert f"{agents} agents" in message, message


@pytest.mark.slow
def test_gate_reports_tagcontinuous_debug_registers():
    """The figure the issue quotes, kept honest: -G costs TagContinuous's step far
    more registers than release and caps its block (the framework then runs
    its phases with fewer threads; it never refuses a phase kernel)."""
    gate = shipped_build()
    release = gate.kernels(("sm_90", False))["TagContinuousStep"]
    debug = gate.kernels(("sm_90", True))["TagContinuousStep"]
    assert debug.registers > release.registers and debug.max_threads_per_block < release.max_threads_per_block
    env = get_env_class("TagContinuous")
    points = [p for p in kr.POINTS if p[1] == "TagContinuous"]
    big = max(points, key=lambda p: kr.env_of(p[1], p[2]).num_agents)
    _env, _res, _grid, block, _coop = kr.gpu_step_launch(big[1], big[2], big[3], offline_gpu(gate, ("sm_90", True)))
    assert block[0] <= debug.max_threads_per_block and env.thread_layout == "phases"


# --------------------------------------------------------------------------- a second front end (optional)
def _clang_units():
    return [(unit.sources, unit.include_dirs, dict(unit.defines)) for unit in shipped_units()]


@pytest.fixture(scope="module")
def clang_cuda():
    import clang_cuda

    if clang_cuda.find_clang_tidy() is None:
        pytest.skip(clang_cuda.INSTALL_HINT)
    return clang_cuda


@pytest.mark.slow
def test_clang_parses_every_shipped_source_as_cuda(clang_cuda):
    """clang's CUDA front end, host and device side, accepts every unit of the gate
    (tests/runtime/clang_cuda.py says why and how). Skipped without clang-tidy."""
    problems = clang_cuda.parse_units(_clang_units(), build_cache.INCLUDE_DIR, find_nvcc())
    assert not problems, "\n\n".join(problems)


@pytest.mark.slow
def test_clang_reports_a_device_function_calling_host_code(clang_cuda, tmp_path):
    """The clang check is not vacuous: a host-only call in device code is reported with its file and line."""
    source = tmp_path / "host_call.cu"
    source.write_text('int host_only(int x) { return x + 1; }\n'
                      'extern "C" __global__ void k(int* out) { out[0] = host_only(out[0]); }\n')
    problems = clang_cuda.parse_units([([source], [], {})], build_cache.INCLUDE_DIR, find_nvcc())
    assert len(problems) == 2 and all("host_call.cu:2" in p and "host_only" in p for p in problems), problems
