"""Every shipped kernel fits a GPU at the block the framework gives it.

nvcc builds each shipped source for sm_90 (H100 / H200) with ``-Xptxas -v``
(:func:`warp_drive.runtime.backends.resources.ptxas_resources`: one compile per source
file, cached in the build cache) and reports each kernel's registers, static
shared memory and spills. The block each kernel is launched with is the one the
framework chooses on a GPU, computed by the framework's own code:

* env step kernels, for every documented configuration (the shipped run
  configs in ``warp_drive/training/configs`` and the workloads of
  ``benchmarks/``): ``FunctionManager.env_geometry`` over an offline GPU -- a
  backend with the pycuda executor's capabilities and CUDA's block limit whose
  kernels carry ptxas's figures (nothing runs) -- for the env's own
  ``thread_layout``; thread-per-env kernels get ``EnvWrapper``'s flat block;
* the core kernels (sampler, reset, log): the block sizes ``sampler.py``,
  ``reset.py``, ``log.py`` and ``FunctionManager.launch_flat`` launch with at most.

Each must fit: at most the kernel's largest block, its registers (rounded up to
256 per warp, warps in groups of 4 as the register file is split in four) times
its warps within the 65,536 registers of a block, static shared memory within
48 KiB, and no spills to local memory in a step kernel -- the figures of sm_90's
row of ``ARCH_LIMITS`` in ``warp_drive/runtime/backends/resources.py``, the table the
framework's own block sizes come from. ``test_build_gate.py`` runs the same
checks for sm_75, sm_80, sm_120 and a ``-G`` build, reusing this file's helpers. A cooperative launch
(an env over several blocks) must also have all its blocks resident at once
on one H100 / H200, or the pycuda executor refuses it.

The last test checks the other side: on the GPU-shaped cpu executor, a
thread-per-agent kernel whose registers cap its block below the env's agent
count is refused with ``EnvTooLargeError`` naming the kernel, its registers and
the largest env that fits -- and an env of that size runs.

Skipped where nvcc is not installed.
"""

from __future__ import annotations

import functools
import inspect
import json
import math
from pathlib import Path

import numpy as np
import pytest
import torch

from warp_drive.runtime.backends import backend_class
from warp_drive.runtime.backends.base import Backend, DeviceLimits, Kernel, Module
from warp_drive.runtime.backends.pycuda_backend import find_nvcc
from warp_drive.runtime.backends.signature import KernelSignature

if find_nvcc() is None:
    pytest.skip("nvcc not found: the resource check compiles every shipped kernel with nvcc -Xptxas -v "
                "(install the CUDA toolkit, or set $NVCC / $CUDA_HOME)", allow_module_level=True)

from warp_drive.services import env_clock as wd_clock  # noqa: E402
from warp_drive.services import log as wd_log  # noqa: E402
from warp_drive.services import reset as wd_reset  # noqa: E402
from warp_drive.services import sampler as wd_sampler  # noqa: E402
from warp_drive.runtime.backends.resources import (  # noqa: E402
    ARCH_LIMITS,
    DEFAULT_ARCH,
    MAX_THREADS_PER_BLOCK,
    KernelResources,
    block_registers,
    blocks_per_sm,
    launch_problems,
    parse_ptxas_report,
    ptxas_resources,
)
from warp_drive.env_wrapper import FLAT_BLOCK, make_env  # noqa: E402
from warp_drive.env.environment import THREADS_PER_ENV  # noqa: E402
from warp_drive.runtime.function_manager import CORE_SOURCES, EnvTooLargeError, FunctionManager  # noqa: E402
from warp_drive.env.registry import BUILTIN_ENVS  # noqa: E402
from warp_drive.training.config import available_configs, load_config  # noqa: E402

KERNELS = Path(__file__).resolve().parents[1] / "kernels"

# sm_90's row of the one table (CUDA's data for compute capability 9.0)
REGISTERS_PER_BLOCK = ARCH_LIMITS[DEFAULT_ARCH].registers_per_block
WARP_SIZE = ARCH_LIMITS[DEFAULT_ARCH].warp_size
MULTIPROCESSORS = 132  # H100 SXM and H200, the GPUs this project is measured on (a GPU's fact, not the arch's)


# --------------------------------------------------------------------------- register arithmetic
def test_register_arithmetic_matches_the_resource_report():
    """The figures below agree with resources.py's own (the 121-register example of its docstring)."""
    assert block_registers(121, 512) == REGISTERS_PER_BLOCK
    assert block_registers(121, 513) > REGISTERS_PER_BLOCK
    assert block_registers(96, 640) <= REGISTERS_PER_BLOCK < block_registers(96, 641)
    assert block_registers(64, 1024) == REGISTERS_PER_BLOCK < block_registers(65, 1024)
    for registers in (1, 24, 32, 33, 40, 64, 65, 96, 121, 128, 168, 200, 255):
        largest = max(t for t in range(WARP_SIZE, MAX_THREADS_PER_BLOCK + 1, WARP_SIZE)
                      if block_registers(registers, t) <= REGISTERS_PER_BLOCK)
        report = f"Used {registers} registers, used 0 barriers, 0 bytes smem"
        parsed = parse_ptxas_report(f"ptxas info    : Compiling entry function 'k' for 'sm_90'\n"
                                    f"ptxas info    : Function properties for k\n"
                                    f"    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads\n"
                                    f"ptxas info    : {report}\n")
        assert parsed["k"].max_threads_per_block == largest, registers


# --------------------------------------------------------------------------- an offline GPU
class _ReportedKernel(Kernel):
    def __init__(self, module: Module, signature: KernelSignature, resources: KernelResources):
        super().__init__(module, signature)
        self._resources = resources

    @property
    def resources(self) -> KernelResources:
        return self._resources

    def bind(self, *args):
        raise NotImplementedError("the offline GPU only chooses geometry; nothing runs")


class _ReportedModule(Module):
    def __init__(self, sources, resources: dict[str, KernelResources]):
        super().__init__(sources, {name: KernelSignature(name, ()) for name in resources}, from_cache=True)
        self._resources = resources

    def _kernel(self, name: str) -> Kernel:
        return _ReportedKernel(self, self.signatures[name], self._resources[name])

    def set_constant(self, name: str, value) -> None:
        raise NotImplementedError("the offline GPU only chooses geometry; nothing runs")


class OfflineGpu(Backend):
    """The pycuda executor as ``FunctionManager`` sees it, without a GPU: its
    capabilities, CUDA's block limit, and each kernel's resources from ptxas for
    ``arch`` (a ``-G`` build when ``debug``). ``resources_for`` maps a tuple of
    source paths to their kernels' resources (default: one ptxas run per source
    set, :func:`resources_of`)."""

    capabilities = backend_class("pycuda").capabilities
    device = torch.device("cpu")

    def __init__(self, arch: str = DEFAULT_ARCH, debug: bool = False, resources_for=None):
        self.arch, self.debug = arch, debug
        self.name = f"offline {arch}{' -G' if debug else ''}"
        self.limits = DeviceLimits(max_threads_per_block=ARCH_LIMITS[arch].max_threads_per_block,
                                   max_dynamic_shared_bytes=48 * 1024)
        self.resources_for = resources_for or (lambda paths: resources_of(paths, arch, debug))

    def build(self, sources, include_dirs=(), defines=None) -> Module:
        paths = tuple(str(Path(s).resolve()) for s in sources)
        return _ReportedModule([Path(p) for p in paths], self.resources_for(paths))


@functools.lru_cache(maxsize=None)
def resources_of(sources: tuple[str, ...], arch: str = DEFAULT_ARCH, debug: bool = False
                 ) -> dict[str, KernelResources]:
    """ptxas's figures for one source set: one nvcc run, cached on disk afterwards."""
    return ptxas_resources([Path(s) for s in sources], arch=arch, debug=debug)


OFFLINE_GPU = OfflineGpu()


def check_fits(kernel: str, resources: KernelResources, threads: int, step: bool,
               arch: str = DEFAULT_ARCH) -> list[str]:
    """What keeps a block of ``threads`` of ``kernel`` from launching on ``arch``
    (empty: it launches): ``launch_problems`` over the architecture's row of the
    table, and spills in a step kernel."""
    problems = launch_problems(kernel, resources, threads, arch)
    what = f"kernel {kernel} at {threads} threads per block ({resources.describe()})"
    if step and (resources.spill_store_bytes or resources.spill_load_bytes):
        problems.append(f"{what}: spills to local memory ({resources.spill_store_bytes} bytes stored, "
                        f"{resources.spill_load_bytes} loaded per thread); bound the block with __launch_bounds__ "
                        "or lighten the step")
    return problems


# --------------------------------------------------------------------------- core kernels
def core_block_sizes() -> dict[str, int]:
    """The largest block each core kernel is launched with (read from the modules that launch them)."""
    flat = inspect.signature(FunctionManager.launch_flat).parameters["block_size"].default
    log_block = 256  # log.py: min(256, the widest logged row rounded up to a warp)
    assert f"min({log_block}," in inspect.getsource(wd_log), "log.py's block cap changed: update this test"
    return {
        "wd_sample_categorical": wd_sampler.FLAT_BLOCK,
        "wd_sample_ou": wd_sampler.FLAT_BLOCK,
        "wd_reset_arrays": wd_reset.BLOCK,
        "wd_clear_done_flags": wd_reset.BLOCK,
        "wd_mark_done_flags": wd_reset.BLOCK,
        "wd_clock_tick": wd_clock.BLOCK,
        "wd_clock_truncate": wd_clock.BLOCK,
        "wd_log_step": log_block,
        # test probes, launched with launch_flat's default block
        "wd_philox_kat": flat,
        "wd_math_probe": flat,
        "wd_rng_probe": flat,
    }


def test_core_kernels_fit_their_blocks():
    resources = resources_of(tuple(str(p.resolve()) for p in CORE_SOURCES))
    blocks = core_block_sizes()
    assert sorted(resources) == sorted(blocks), (
        f"core kernels {sorted(resources)}; this test knows the blocks of {sorted(blocks)}")
    problems = [p for name, r in resources.items() for p in check_fits(name, r, blocks[name], step=False)]
    assert not problems, "\n".join(problems)


# --------------------------------------------------------------------------- documented configurations
def _point(source: str, env: str, config: dict, num_envs: int) -> tuple:
    return (source, env, json.dumps(config, sort_keys=True), int(num_envs))


def documented_points() -> list[tuple]:
    """(where, env name, env config as JSON, num_envs): the shipped run configs and the benchmarks' workloads."""
    points = []
    for name in available_configs():
        cfg = load_config(name)
        points.append(_point(f"config {name}", cfg.env.name, dict(cfg.env.config), cfg.trainer.num_envs))

    from benchmarks import envs, lightning, paper, scaling, training

    for label, env, config, num_envs, _targets in envs.WORKLOADS:
        points.append(_point(f"benchmarks.envs {label}", env, config, num_envs))
    for label, env, config, num_envs, *_ in paper.workloads(quick=False):
        points.append(_point(f"benchmarks.paper {label}", env, config, num_envs))
    # The training benchmarks run a shipped config (and overrides) at several env counts.
    for label, config_name, cpu_envs, gpu_envs, _target, extra in training.WORKLOADS:
        cfg = load_config(config_name, extra)
        for num_envs in sorted({*cpu_envs, *gpu_envs}):
            points.append(_point(f"benchmarks.training {label}", cfg.env.name, dict(cfg.env.config), num_envs))
    for label, config_name, cpu_envs, gpu_envs, extra in lightning.WORKLOADS:
        cfg = load_config(config_name, extra)
        for num_envs in sorted({*cpu_envs, *gpu_envs}):
            points.append(_point(f"benchmarks.lightning {label}", cfg.env.name, dict(cfg.env.config), num_envs))
    counts = {n for pair in scaling.ENV_COUNTS.values() for ns in pair for n in ns}
    counts |= {n for pair in scaling.MAX_ENVS.values() for n in pair}
    counts |= {n for n, _iterations in scaling.PROCESS_RUN.values()}
    cfg = load_config(scaling.CONFIG)
    for num_envs in sorted(counts):
        points.append(_point(f"benchmarks.scaling {scaling.CONFIG}", cfg.env.name, dict(cfg.env.config), num_envs))

    seen, unique = set(), []
    for p in points:
        if p[1:] not in seen:
            seen.add(p[1:])
            unique.append(p)
    return unique


POINTS = documented_points()


@functools.lru_cache(maxsize=None)
def env_of(env_name: str, config_json: str):
    """One env per (name, config), shared by every point and test that reads it
    (PandemicEconomy takes seconds to construct; nothing here changes an env)."""
    return make_env(env_name, json.loads(config_json))


def _point_id(point: tuple) -> str:
    source, env_name, config, num_envs = point
    try:  # constructors only set up NumPy arrays; a broken one fails its own tests, not collection
        agents = f"{env_of(env_name, config).num_agents}"
    except Exception:  # noqa: BLE001
        agents = "?"
    return f"{source}: {num_envs} envs x {agents} agents".replace("×", "x")


@functools.lru_cache(maxsize=None)
def gpu_step_launch(env_name: str, config_json: str, num_envs: int, gpu: OfflineGpu = OFFLINE_GPU):
    """(env, kernel resources, grid, block, cooperative) of the env's step as the
    framework launches it on ``gpu`` (an offline GPU of some architecture)."""
    env = env_of(env_name, config_json)
    env_class = type(env)
    source = env_class.cuda_source_path()
    if env_class.thread_layout == THREADS_PER_ENV:  # FunctionManager.bind_env_kernel's flat launch
        block = min(FLAT_BLOCK, num_envs)
        grid, block, cooperative = (math.ceil(num_envs / block), 1, 1), (block, 1, 1), False
    else:
        fm = FunctionManager(num_envs, env.num_agents, backend=gpu)
        fm.compile_and_load(source)
        grid, block, cooperative = fm.env_geometry(env_class.step_kernel, env_class.thread_layout)
    resources = gpu.resources_for((str(source.resolve()),))[env_class.step_kernel]
    return env, resources, grid, block, cooperative


def test_every_shipped_env_has_a_documented_configuration():
    covered = {p[1] for p in POINTS}
    assert set(BUILTIN_ENVS) <= covered, f"no documented configuration runs {sorted(set(BUILTIN_ENVS) - covered)}"


def co_residency_problem(resources: KernelResources, grid, block) -> str | None:
    """Why a cooperative launch of ``grid`` x ``block`` cannot have all its blocks resident on one GPU."""
    threads, blocks = block[0] * block[1] * block[2], grid[0] * grid[1] * grid[2]
    per_sm = blocks_per_sm(resources, threads)
    if blocks <= per_sm * MULTIPROCESSORS:
        return None
    return (f"a cooperative launch of {blocks} blocks of {threads} threads ({grid[1]} per env) needs them all "
            f"resident at once, but {MULTIPROCESSORS} SMs hold {per_sm} each: at most "
            f"{per_sm * MULTIPROCESSORS // grid[1]} envs. Write the step with WD_FOR_EACH_AGENT "
            "(thread_layout = AGENT_PHASES), or lighten it to fit one block per env")


@pytest.mark.slow
@pytest.mark.parametrize("point", POINTS, ids=[_point_id(p) for p in POINTS])
def test_step_kernel_launches_at_the_block_the_framework_chooses(point):
    """The block fits the kernel's registers, shared memory and largest block, with
    no spills; and an env over several blocks (a cooperative launch, which the
    pycuda executor refuses unless every block can be resident) fits one GPU."""
    _source, env_name, config, num_envs = point
    env, resources, grid, block, cooperative = gpu_step_launch(env_name, config, num_envs)
    threads = block[0] * block[1] * block[2]
    layout = type(env).thread_layout
    problems = check_fits(type(env).step_kernel, resources, threads, step=True)
    if cooperative and (why := co_residency_problem(resources, grid, block)):
        problems.append(f"kernel {type(env).step_kernel} ({resources.describe()}): {why}")
    assert not problems, (f"{env_name} ({num_envs} envs x {env.num_agents} agents, thread_layout {layout!r}, "
                          f"grid {grid}, block {block}):\n" + "\n".join(problems))


# --------------------------------------------------------------------------- too heavy for its env
HEAVY = KERNELS / "heavy_registers.cu"
HEAVY_WIDTH = 80  # floats per agent (WIDTH in the kernel)


def test_kernel_too_heavy_for_its_env_is_refused_naming_its_registers():
    heavy = resources_of((str(HEAVY.resolve()),))["HeavyRegistersStep"]
    assert heavy.registers > 64 and heavy.max_threads_per_block < 1024, (
        f"tests/kernels/heavy_registers.cu should need more than 64 registers per thread; ptxas says "
        f"{heavy.describe()}")
    num_envs, agents = 2, 1024

    def arrays(n_agents):
        rng = np.random.default_rng(0)
        inputs = rng.uniform(0.0, 0.1, size=(num_envs * n_agents, HEAVY_WIDTH)).astype(np.float32)
        return torch.from_numpy(inputs), torch.zeros(num_envs * n_agents, HEAVY_WIDTH, dtype=torch.float32)

    fm = FunctionManager(num_envs, agents, backend="cpu-gpu")
    fm.compile_and_load(HEAVY)
    with pytest.raises(EnvTooLargeError) as info:
        fm.bind("HeavyRegistersStep", [*arrays(agents), agents])
    message = str(info.value)
    largest = heavy.max_threads_per_block
    assert "HeavyRegistersStep" in message
    assert f"{heavy.registers} registers" in message
    assert f"{agents} agents" in message and f"at most {largest} agents per env" in message, message

    # ... and the largest env it names runs (one block of `largest` threads per env).
    fm = FunctionManager(num_envs, largest, backend="cpu-gpu")
    fm.compile_and_load(HEAVY)
    inputs, outputs = arrays(largest)
    step = fm.bind("HeavyRegistersStep", [inputs, outputs, largest])
    assert step.block == (largest, 1, 1) and step.grid == (num_envs, 1, 1)
    step()
    fm.backend.synchronize()
    v = inputs.numpy().copy()
    for _round in range(3):
        total = np.zeros(len(v), np.float32)
        for i in range(HEAVY_WIDTH):
            total += v[:, i]
        v = v * (total[:, None] - v)
    np.testing.assert_array_equal(outputs.numpy(), v)
