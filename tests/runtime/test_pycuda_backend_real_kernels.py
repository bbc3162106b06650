"""The pycuda executor's host code against the real kernels, without a GPU.

:mod:`fake_cuda_driver` stands in for ``libcuda``: nvcc builds the cubins as
on a GPU machine, and the driver runs each launch with the cpu executor's
build of the same source, on the parameter buffer it assembles from the
backend's ``kernelParams`` with the offsets and sizes nvcc compiled. So the
backend's argument packing, ``__constant__`` uploads, launch geometry,
cooperative-launch path and error handling run the real kernels, and their
results are compared bit for bit with the ``cpu-gpu`` executor (and with
known answers where a kernel has them).

What the cpu executor cannot run is an env spread over several blocks with a
grid-wide barrier; the co-residency checks of such launches are tested, their
results are not (``tests/gpu`` runs them on a GPU).
"""

from __future__ import annotations

import ctypes
import textwrap
import threading
from pathlib import Path

import numpy as np
import pytest
import torch

from warp_drive.runtime.backends import get_backend
from warp_drive.runtime.backends import pycuda_backend as pb
from warp_drive.runtime.backends.arguments import PackedArguments, StaleArgumentError
from warp_drive.runtime.backends.base import KernelBuildError, KernelLaunchError
from warp_drive.runtime.data_manager import DataManager
from warp_drive.runtime.function_manager import FunctionManager
from warp_drive.services.sampler import Sampler

from fake_cuda_driver import (
    CUDA_ERROR_INVALID_VALUE,
    CUDA_ERROR_LAUNCH_FAILED,
    CUDA_ERROR_NO_BINARY_FOR_GPU,
    STREAM,
    install,
)

pytestmark = [pytest.mark.slow,  # nvcc builds (the fast tier: pytest -m 'not slow')
              pytest.mark.skipif(pb.find_nvcc() is None, reason="nvcc not found (install the CUDA toolkit)")]

REPO = Path(__file__).resolve().parents[2]
KERNELS = REPO / "tests" / "kernels"

# Random123 kat_vectors, philox4x32 with 10 rounds: (ctr[4], key[2]) -> out[4].
PHILOX_KAT = [
    ((0x00000000,) * 4, (0x00000000,) * 2, (0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8)),
    ((0xFFFFFFFF,) * 4, (0xFFFFFFFF,) * 2, (0x408F276D, 0x41C83B0E, 0xA20BC7C6, 0x6D5451FD)),
    ((0x243F6A88, 0x85A308D3, 0x13198A2E, 0x03707344), (0xA4093822, 0x299F31D0),
     (0xD16CFE09, 0x94FDCCEB, 0x5001E420, 0x24126EA1)),
]

# Every agent reads a value written by another agent after a barrier
# (tests/runtime/test_pycuda_backend_offline.py builds the same kernel).
COOP_KERNEL = """\
    #include <warp_drive/core.h>
    extern "C" __global__ void wd_test_mirror(const float* in, float* out, int n_agents) {
      int agent = wd_agent_id();
      bool active = agent < n_agents;
      float v = active ? 2.0f * in[wd_agent_index(n_agents)] : 0.0f;
      if (active) out[wd_agent_index(n_agents)] = v;
      wd_sync_env();
      float mirrored = active ? out[wd_env_id() * n_agents + (n_agents - 1 - agent)] : 0.0f;
      wd_sync_env();
      if (active) out[wd_agent_index(n_agents)] = v + mirrored + 1.0f;
    }
    """


@pytest.fixture
def gpu(monkeypatch):
    """(backend, driver): a PyCudaBackend over the fake driver."""
    backend, driver = install(monkeypatch)
    yield backend, driver
    driver.close()


def same_bits(a: torch.Tensor, b: torch.Tensor) -> bool:
    if a.dtype != b.dtype or a.shape != b.shape:
        return False
    return a.contiguous().numpy().tobytes() == b.contiguous().numpy().tobytes()


def echo(backend, count=-7, scale=1.5, flag=True, big=2**63 + 5, precise=0.125):
    """``echo_args`` (every scalar width after three pointers) on ``backend``: what arrived."""
    kernel = backend.build([KERNELS / "arguments.cu"]).get_function("echo_args")
    ints = torch.zeros(2, dtype=torch.int32)
    floats = torch.zeros(2, dtype=torch.float32)
    wides = torch.zeros(2, dtype=torch.int64)
    kernel(ints, floats, wides, count, scale, flag, big, precise, grid=1, block=32)
    backend.synchronize()
    return ints.tolist(), floats.tolist(), wides.tolist()


ECHOED = ([-7, 1], [1.5, 0.25], [2**63 + 5 - 2**64, 125000000])


# ---------------------------------------------------------------- arguments
def test_every_scalar_width_reaches_the_real_kernel(gpu):
    backend, driver = gpu
    assert echo(backend) == ECHOED
    launch = driver.launches[-1]
    assert (launch.kind, launch.kernel, launch.grid, launch.block, launch.stream) == (
        "launch", "echo_args", (1, 1, 1), (32, 1, 1), STREAM)
    # The parameter buffer, read with nvcc's table: 8-byte pointers, then the
    # scalars at their compiled offsets (the bool at 32, the u64 realigned to 40).
    assert [(o, s) for _i, o, s in launch.param_table] == [(0, 8), (8, 8), (16, 8), (24, 4), (28, 4), (32, 1),
                                                             (40, 8), (48, 8)]
    assert launch.value(3, "<i") == -7 and launch.value(4, "<f") == 1.5 and launch.value(5, "<?") is True
    assert launch.value(6, "<Q") == 2**63 + 5 and launch.value(7, "<d") == 0.125
    assert echo(get_backend("cpu-gpu")) == ECHOED


def test_set_scalar_changes_what_the_next_launch_passes(gpu):
    backend, driver = gpu
    add_step = backend.build([KERNELS / "arguments.cu"]).get_function("add_step")
    out = torch.zeros(64, dtype=torch.int32)
    launch = add_step.bind(out, 1)
    for step in (1, 10, -3):
        launch.set_scalar(1, step)
        launch.launch((2, 1, 1), (32, 1, 1))
        assert driver.launches[-1].value(1, "<i") == step
    backend.synchronize()
    assert out.tolist() == [8] * 64


def test_a_dropped_parameter_is_refused_by_the_drivers_parameter_check(gpu, monkeypatch):
    """A packing that forgets one parameter (its array is as long as the
    signature, the last entry never filled): the driver reads kernelParams with
    nvcc's table and refuses the launch instead of running on garbage."""
    backend, driver = gpu

    class ForgetsOne(PackedArguments):
        def __init__(self, signature, checked):
            super().__init__(signature, checked)
            kept = [ctypes.addressof(s) for i, s in enumerate(self._slots) if i != 2]
            self._argv = (ctypes.c_void_p * len(self._slots))(*kept)
            self.address = ctypes.addressof(self._argv)

    monkeypatch.setattr(pb, "PackedArguments", ForgetsOne)
    with pytest.raises(KernelLaunchError, match="echo_args: launch .* CUDA_ERROR_INVALID_VALUE"):
        echo(backend)
    assert "kernelParams[7]" in driver.faults[-1] and not driver.launches


def test_a_shifted_parameter_list_faults_on_the_device(gpu, monkeypatch):
    """Parameters shifted by one: the kernel would take the int `count` as its
    third array; the driver finds the pointer unmapped, and the fault surfaces
    at the next synchronization as on a GPU."""
    backend, driver = gpu

    class Shifted(PackedArguments):
        def __init__(self, signature, checked):
            super().__init__(signature, checked)
            kept = [ctypes.addressof(s) for i, s in enumerate(self._slots) if i != 2]
            kept.append(ctypes.addressof(self._slots[-1]))
            self._argv = (ctypes.c_void_p * len(self._slots))(*kept)
            self.address = ctypes.addressof(self._argv)

    monkeypatch.setattr(pb, "PackedArguments", Shifted)
    with pytest.raises(KernelLaunchError, match="device work failed: CUDA error: an illegal memory access"):
        echo(backend)
    assert "parameter 2 'long long * wides' = 0xfffffff9 points at no mapped memory" in driver.faults[-1]


def test_a_scalar_packed_at_the_wrong_width_arrives_wrong(gpu, monkeypatch):
    """``double precise`` packed as a float: the driver copies the 8 bytes nvcc
    compiled, and the kernel sees another number."""
    backend, _driver = gpu

    class Narrow(PackedArguments):
        def __init__(self, signature, checked):
            super().__init__(signature, checked)
            self._slots[7] = ctypes.c_float(float(checked[7]))
            self._argv[7] = ctypes.addressof(self._slots[7])

    monkeypatch.setattr(pb, "PackedArguments", Narrow)
    assert echo(backend) != ECHOED


def test_a_tensor_given_other_memory_after_bind_is_refused(gpu):
    backend, driver = gpu
    add_step = backend.build([KERNELS / "arguments.cu"]).get_function("add_step")
    out = torch.zeros(32, dtype=torch.int32)
    first_memory = out.view(-1)  # kept alive: were the check missing, the kernel would not write into freed memory
    launch = add_step.bind(out, 1)
    out.set_(torch.zeros(64, dtype=torch.int32))
    with pytest.raises(StaleArgumentError, match="add_step: parameter 0"):
        launch.launch(1, 32)
    assert not driver.launches and first_memory.eq(0).all()


# ---------------------------------------------------------------- __constant__ and the framework's kernels
def constants_run(backend, upload: bool):
    n = 40
    dm = DataManager(1, n, 1, backend=backend)
    dm.add_shared_constants({"poly_coeffs": np.array([1, -2, 3, 0.5], np.float32), "int_offset": np.int32(7)})
    fm = FunctionManager(1, n, backend=backend)
    fm.compile_and_load(KERNELS / "constants.cu")
    if upload:
        fm.initialize_shared_constants(dm, dm.shared_constant_names)
    x = torch.arange(n, dtype=torch.float32) - 20
    out = torch.full((n,), float("nan"))
    fm.launch_flat("eval_poly", [x, out, n], n, block_size=16)
    backend.synchronize()
    return x, out


def test_constant_uploads_reach_the_real_kernel(gpu):
    backend, driver = gpu
    x, before = constants_run(backend, upload=False)
    assert before.eq(0).all()  # a fresh module's constants are zero: nothing shared with another load
    x, out = constants_run(backend, upload=True)
    expected = ((0.5 * x + 3) * x - 2) * x + 1 + 7
    assert same_bits(out, expected)
    assert same_bits(out, constants_run(get_backend("cpu-gpu"), upload=True)[1])
    assert sorted(driver.constant_copies[-2:]) == [("int_offset", 4), ("poly_coeffs", 16)]
    module = backend.build([KERNELS / "constants.cu"])
    with pytest.raises(ValueError, match="16 bytes"):
        module.set_constant("poly_coeffs", np.zeros(3, np.float32))
    with pytest.raises(KeyError, match="no_such_constant"):
        module.set_constant("no_such_constant", np.zeros(1, np.float32))


def framework_kernels(backend):
    """Philox known answers, RNG draws (u64 scalars after an int), and both samplers."""
    fm = FunctionManager(4, 6, backend=backend)
    rows = np.array([[*ctr, *key] for ctr, key, _ in PHILOX_KAT], np.uint32)
    ctr_key = torch.from_numpy(rows.view(np.int32).copy()).view(torch.uint32)
    kat = torch.zeros((len(rows), 4), dtype=torch.int32).view(torch.uint32)
    fm.launch_flat("wd_philox_kat", [ctr_key, kat, len(rows)], len(rows))
    draws = torch.zeros((300, 3))
    fm.launch_flat("wd_rng_probe", [draws, 300, 2**64 - 3, 41, 5], 300, block_size=128)

    dm = DataManager(4, 6, 10, backend=backend)
    dm.push_data_to_device({"discrete": {"data": np.zeros((4, 6, 2), np.int32)},
                            "greedy": {"data": np.zeros((4, 6), np.int32)},
                            "continuous": {"data": np.zeros((4, 6, 3), np.float32)}})
    sampler = Sampler(fm, seed=12345)
    sampler.register_actions(dm, "discrete", [5, 3])
    sampler.register_actions(dm, "greedy", 7)
    sampler.register_continuous_actions(dm, "continuous", low=[-1, -2, 0], high=[1, 2, 0.5])
    generator = torch.Generator().manual_seed(0)
    heads = [torch.softmax(torch.randn(4, 6, n, generator=generator), -1) for n in (5, 3)]
    greedy = torch.softmax(torch.randn(4, 6, 7, generator=generator), -1)
    mean = torch.randn(4, 6, 3, generator=generator)
    draws_per_step = []
    for _ in range(3):
        sampler.sample(dm, heads, "discrete")
        sampler.sample(dm, greedy, "greedy", argmax=True)
        sampler.sample(dm, mean, "continuous")
        backend.synchronize()
        draws_per_step.append({name: dm.pull_data_from_device(name).copy()
                               for name in ("discrete", "greedy", "continuous", "continuous_ou_state")})
    backend.synchronize()
    return kat.view(torch.int32).numpy().view(np.uint32), draws, draws_per_step, greedy


def test_framework_kernels_match_the_cpu_executor_bit_for_bit(gpu):
    backend, driver = gpu
    kat, draws, steps, greedy = framework_kernels(backend)
    assert kat.tolist() == [list(out) for _c, _k, out in PHILOX_KAT]
    assert (steps[-1]["greedy"] == greedy.argmax(-1).numpy()).all()
    assert {l.kernel for l in driver.launches} >= {"wd_philox_kat", "wd_rng_probe", "wd_sample_categorical",
                                                   "wd_sample_ou"}
    ref_kat, ref_draws, ref_steps, _ = framework_kernels(get_backend("cpu-gpu"))
    assert (kat == ref_kat).all() and same_bits(draws, ref_draws)
    for step, (mine, theirs) in enumerate(zip(steps, ref_steps)):
        for name in mine:
            assert mine[name].tobytes() == theirs[name].tobytes(), (step, name)
    assert len({steps[0]["discrete"].tobytes(), steps[1]["discrete"].tobytes()}) == 2  # the counter advanced


# ---------------------------------------------------------------- example envs through the env wrapper
ENVS = {
    "TagGridWorld": dict(num_taggers=2, grid_length=6, episode_length=5, random_starts=True),
    "TagContinuous": dict(num_taggers=2, num_runners=7, episode_length=5, use_full_observation=False,
                          num_other_agents_observed=3, tagging_distance=0.25, seed=4),
}


def env_rollout(env_name: str, backend, steps: int = 8):
    """Step ``env_name`` with sampled actions and done-resets; every array after every step."""
    from warp_drive.env.wrapper import EnvWrapper
    from gymnasium import spaces

    wrapper = EnvWrapper(env_name, 3, backend=backend, env_config=ENVS[env_name], seed=11, reset_pool_size=6)
    dm = wrapper.data_manager
    sampler = Sampler(wrapper.function_manager, seed=99)
    space = wrapper.env.action_space(0)
    sizes = [int(space.n)] if isinstance(space, spaces.Discrete) else [int(n) for n in space.nvec]
    sampler.register_actions(dm, "sampled_actions", sizes if len(sizes) > 1 else sizes[0])
    generator = torch.Generator().manual_seed(1)
    probabilities = [torch.softmax(torch.randn(3, wrapper.num_agents, n, generator=generator), -1) for n in sizes]
    history = []
    for _ in range(steps):
        sampler.sample(dm, probabilities, "sampled_actions")
        wrapper.step_all_envs()
        after_step = {name: dm.pull_data_from_device(name).tobytes() for name in dm.array_names}
        wrapper.reset_only_done_envs()
        history.append((after_step, {name: dm.pull_data_from_device(name).tobytes() for name in dm.array_names}))
    return wrapper, history


@pytest.mark.parametrize("env_name", sorted(ENVS))
def test_example_env_steps_match_the_cpu_executor_bit_for_bit(gpu, env_name):
    backend, driver = gpu
    wrapper, history = env_rollout(env_name, backend)
    reference, reference_history = env_rollout(env_name, get_backend("cpu-gpu"))
    # The same geometry: the fake's registers from the cubin, the cpu-gpu executor's from ptxas.
    assert (wrapper._step.grid, wrapper._step.block) == (reference._step.grid, reference._step.block)
    assert wrapper._step.block[0] == wrapper.num_agents  # one thread per agent, as on a GPU
    kernels = {launch.kernel for launch in driver.launches}
    assert {wrapper.env.step_kernel, "wd_sample_categorical", "wd_reset_arrays", "wd_clear_done_flags"} <= kernels
    resets = sum(1 for launch in driver.launches if launch.kernel == "wd_reset_arrays")
    assert resets == 1 + len(history)  # the first reset and one per step
    for step, (mine, theirs) in enumerate(zip(history, reference_history)):
        for phase, (arrays, reference_arrays) in enumerate(zip(mine, theirs)):
            assert arrays.keys() == reference_arrays.keys()
            differ = [name for name in arrays if arrays[name] != reference_arrays[name]]
            assert not differ, f"step {step} {('after the step', 'after the reset')[phase]}: {differ} differ"
    done = [np.frombuffer(after_step["_done_"], np.int32) for after_step, _ in history]
    assert sum(int(d.sum()) for d in done) >= 3  # every env ended an episode: the resets ran


# ---------------------------------------------------------------- cooperative launches
@pytest.fixture(scope="module")
def coop_source(tmp_path_factory):
    src = tmp_path_factory.mktemp("coop") / "coop.cu"  # one file for the module: one nvcc build
    src.write_text(textwrap.dedent(COOP_KERNEL))
    return src


def test_cooperative_launch_runs_the_real_kernel(gpu, coop_source):
    backend, driver = gpu
    x = torch.rand(5, 64, generator=torch.Generator().manual_seed(3))
    out = torch.zeros_like(x)
    backend.build([coop_source]).get_function("wd_test_mirror")(x, out, 64, grid=(5, 1, 1), block=(64, 1, 1),
                                                                  cooperative=True)
    backend.synchronize()
    assert (driver.launches[-1].kind, driver.launches[-1].grid) == ("cooperative", (5, 1, 1))
    assert same_bits(out, 2 * x + 2 * x.flip(1) + 1)
    reference = torch.zeros_like(x)
    get_backend("cpu-gpu").build([coop_source]).get_function("wd_test_mirror")(
        x, reference, 64, grid=(5, 1, 1), block=(64, 1, 1), cooperative=True)
    assert same_bits(out, reference)


def test_cooperative_grids_that_cannot_be_resident_are_refused(monkeypatch, coop_source):
    backend, driver = install(monkeypatch, multiprocessors=2)
    try:
        mirror = backend.build([coop_source]).get_function("wd_test_mirror")
        x = torch.rand(8, 1024)
        out = torch.zeros_like(x)
        # 1024-thread blocks: two per SM (2048 threads), so four on this two-SM device.
        mirror(x, out, 1024, grid=(4, 1, 1), block=(1024, 1, 1), cooperative=True)
        backend.synchronize()
        assert same_bits(out[:4], 2 * x[:4] + 2 * x[:4].flip(1) + 1)
        with pytest.raises(KernelLaunchError, match="at most 4 such blocks .* at most 2 envs"):
            mirror(x, out, 2048, grid=(3, 2, 1), block=(1024, 1, 1), cooperative=True)
        with pytest.raises(KernelLaunchError, match="at most 4 such blocks"):
            mirror(x, out, 1024, grid=(5, 1, 1), block=(1024, 1, 1), cooperative=True)
        # The backend's refusal agrees with the driver's own: without it, the driver refuses.
        monkeypatch.setattr(pb.PyCudaKernel, "check_co_resident", lambda self, geometry, shared: None)
        with pytest.raises(KernelLaunchError, match="CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE.*5 blocks cannot be"):
            mirror(x, out, 1024, grid=(5, 1, 1), block=(1024, 1, 1), cooperative=True)
        assert len([launch for launch in driver.launches if launch.kind == "cooperative"]) == 1
    finally:
        driver.close()


# ---------------------------------------------------------------- error handling
def test_driver_errors_surface_as_the_backends_exceptions(gpu):
    backend, driver = gpu
    module = backend.build([KERNELS / "arguments.cu", KERNELS / "constants.cu"])
    add_step = module.get_function("add_step")
    out = torch.zeros(32, dtype=torch.int32)
    driver.fail_next("cuLaunchKernel", CUDA_ERROR_LAUNCH_FAILED)
    with pytest.raises(KernelLaunchError, match=r"kernel add_step: launch with grid \(1, 1, 1\), block \(32, 1, 1\), "
                                                r"0 bytes .* CUDA_ERROR_LAUNCH_FAILED \(unspecified launch failure\)"):
        add_step(out, 1, grid=1, block=32)
    driver.fail_next("cuMemcpyHtoDAsync_v2", CUDA_ERROR_INVALID_VALUE)
    with pytest.raises(KernelLaunchError, match="copying __constant__ int_offset failed: CUDA_ERROR_INVALID_VALUE"):
        module.set_constant("int_offset", np.int32(1))
    driver.fail_next("cuModuleLoadData", CUDA_ERROR_NO_BINARY_FOR_GPU)
    with pytest.raises(KernelBuildError, match="could not load .* CUDA_ERROR_NO_BINARY_FOR_GPU"):
        backend.build([KERNELS / "arguments.cu"])
    driver.fail_next("cuLaunchKernel", 999)  # a code the driver cannot name
    with pytest.raises(KernelLaunchError, match="CUresult 999"):
        add_step(out, 1, grid=1, block=32)
    add_step(out, 2, grid=1, block=32)  # the failures were not sticky
    backend.synchronize()
    assert out.tolist() == [2] * 32


def test_a_cubin_for_another_architecture_is_refused_at_load(gpu):
    backend, driver = gpu
    driver.compute_capability = (8, 0)  # the backend built for sm_90 when it was made
    with pytest.raises(KernelBuildError, match="could not load .*built for sm_90.*CUDA_ERROR_NO_BINARY_FOR_GPU"):
        backend.build([KERNELS / "constants.cu"])


def test_a_device_assert_fails_the_synchronization_and_every_later_call(gpu):
    backend, driver = gpu
    module = backend.build([KERNELS / "assert_printf.cu"])
    values = torch.tensor([3, -1, 4], dtype=torch.int32)
    out = torch.zeros(3, dtype=torch.int32)
    module.get_function("check_non_negative")(values, out, 3, grid=1, block=32)  # asynchronous: no error yet
    with pytest.raises(KernelLaunchError, match="device work failed: CUDA error: device-side assert triggered"):
        backend.synchronize()
    assert "values[i] >= 0" in driver.faults[-1]
    with pytest.raises(KernelLaunchError, match="CUDA_ERROR_ASSERT .* the CUDA context is unusable after it"):
        module.get_function("check_non_negative")(values, out, 3, grid=1, block=32)


def test_block_limits_come_from_the_kernels_registers(gpu, monkeypatch):
    backend, driver = gpu
    heavy = backend.build([KERNELS / "heavy_registers.cu"]).get_function("HeavyRegistersStep")
    reference = get_backend("cpu-gpu").build([KERNELS / "heavy_registers.cu"]).get_function("HeavyRegistersStep")
    assert heavy.resources.registers == reference.resources.registers  # the cubin's table and ptxas agree
    assert heavy.resources.max_threads_per_block == reference.resources.max_threads_per_block < 1024
    limit = heavy.resources.max_threads_per_block
    inputs = torch.rand(2, limit, 80)
    outputs = torch.zeros_like(inputs)
    with pytest.raises(KernelLaunchError, match="registers"):
        heavy(inputs, outputs, limit, grid=(2, 1, 1), block=(limit + 32, 1, 1))
    monkeypatch.setattr(pb, "check_geometry", lambda *args: None)  # past the backend's check: the driver refuses
    with pytest.raises(KernelLaunchError, match="CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES.*too many registers"):
        heavy.bind(inputs, outputs, limit).launch((2, 1, 1), (limit + 32, 1, 1))
    assert not driver.launches


def test_a_thread_without_a_current_context_gets_the_primary_one(gpu):
    backend, driver = gpu
    add_step = backend.build([KERNELS / "arguments.cu"]).get_function("add_step")
    out = torch.zeros(32, dtype=torch.int32)
    launch = add_step.bind(out, 5)
    errors = []

    def worker():
        try:
            launch.launch(1, 32)
        except Exception as exc:  # pragma: no cover - reported below
            errors.append(exc)

    misses = driver.context_misses
    thread = threading.Thread(target=worker)
    thread.start()
    thread.join()
    assert not errors and driver.context_misses == misses + 1
    backend.synchronize()
    assert out.tolist() == [5] * 32


def test_the_cubin_parameter_table_is_read_independently():
    """The fake's own reader of ``.nv.info`` agrees with the backend's signature
    layout on every framework kernel (so the launch checks above are not the
    backend checking itself)."""
    from fake_cuda_driver import read_cubin

    toolchain = pb.NvccToolchain.find()
    plan = pb.plan_build(toolchain, "sm_90", sorted((REPO / "warp_drive" / "cuda" / "kernels").glob("*.cu")))
    plan.compile()
    cubin = read_cubin(plan.target.read_bytes())
    assert cubin.arch == (9, 0)
    for name, signature in plan.symbols.kernels.items():
        assert [(o, s) for _i, o, s in cubin.kernels[name].params] == pb.param_layout(signature), name
        assert cubin.kernels[name].registers > 0
