"""WarpDrive 2.7's managers, written as its tutorials use them, over this project.

Tutorials 1-3 below are WarpDrive's programs with the backend named
(``backend=...``). Where a tutorial loaded WarpDrive's prebuilt
``test_build.fatbin`` (tutorials 2 and 3), the kernel it used is written here as
source and loaded with ``load_cuda_from_source_code`` (binaries are not loaded
here); the sampler, reset and log kernels need no loading at all.
"""

from __future__ import annotations

import importlib
import warnings

import numpy as np
import pytest
import torch

from warp_drive.compat import managers as compat
from warp_drive.compat.cuda_build import build_warpdrive_source, warpdrive_defines
from warp_drive.runtime.data_manager import DataManager
from warp_drive.runtime.function_manager import FunctionFeed, FunctionManager
from warp_drive.services.log import LogController
from warp_drive.services.reset import EnvironmentReset
from warp_drive.services.sampler import Sampler

# --------------------------------------------------------------------------- import paths


def test_warpdrive_import_paths_resolve_to_this_projects_classes():
    from warp_drive.managers.data_manager import CUDADataManager
    from warp_drive.managers.function_manager import (
        CUDAEnvironmentReset,
        CUDAFunctionFeed,
        CUDAFunctionManager,
        CUDALogController,
        CUDASampler,
    )
    from warp_drive.managers.pycuda_managers.pycuda_data_manager import CudaTensorHolder, PyCUDADataManager
    from warp_drive.managers.pycuda_managers.pycuda_function_manager import (
        PyCUDAEnvironmentReset,
        PyCUDAFunctionManager,
        PyCUDALogController,
        PyCUDASampler,
    )
    from warp_drive.utils.constants import Constants
    from warp_drive.utils.data_feed import DataFeed
    from warp_drive.utils.env_registrar import EnvironmentRegistrar, env_registrar

    import warp_drive.runtime.data_feed

    pairs = [(CUDADataManager, DataManager), (CUDAFunctionManager, FunctionManager), (CUDAFunctionFeed, FunctionFeed),
             (CUDASampler, Sampler), (CUDAEnvironmentReset, EnvironmentReset), (CUDALogController, LogController)]
    for compat_class, ours in pairs:
        assert issubclass(compat_class, ours)
    assert PyCUDADataManager is CUDADataManager is compat.CUDADataManager
    assert PyCUDAFunctionManager is CUDAFunctionManager
    assert PyCUDASampler is CUDASampler and PyCUDAEnvironmentReset is CUDAEnvironmentReset
    assert PyCUDALogController is CUDALogController
    assert issubclass(DataFeed, warp_drive.runtime.data_feed.DataFeed)
    pools = DataFeed()
    # WarpDrive's keywords
    pools.add_pool_for_reset(name="start_pool", data=np.zeros((4, 2), np.float32), reset_target="start")
    assert pools["start_pool"]["attributes"]["reset_target"] == "start"
    assert isinstance(env_registrar, EnvironmentRegistrar)
    tensor = torch.zeros(2)
    assert CudaTensorHolder(tensor) is tensor
    assert (Constants.OBSERVATIONS, Constants.ACTIONS, Constants.REWARDS) == ("observations", "sampled_actions",
                                                                             "rewards")
    assert Constants.DONE_FLAGS == "_done_"


def test_numba_managers_say_what_to_use_instead():
    for module in ("warp_drive.managers.numba_managers",
                   "warp_drive.managers.numba_managers.numba_function_manager"):
        with pytest.raises(ImportError, match="PyCUDADataManager") as info:
            importlib.import_module(module)
        assert "Numba is not a backend" in str(info.value)


# --------------------------------------------------------------------------- tutorial 1


INCREMENT_SOURCE = """
// tutorial 1's kernel: each (env, agent) entry grows by env_id + agent_id
extern "C"{
    __global__ void cuda_increment(float* data, int num_agents)
    {
        int env_id = blockIdx.x;
        int agent_id = threadIdx.x;
        if (agent_id < num_agents){
            int array_index = env_id * num_agents + agent_id;
            int increment = env_id + agent_id;
            data[array_index] += increment;
        }
    }
}
"""


def test_tutorial_1_basics(backend_name):
    from warp_drive.managers.pycuda_managers.pycuda_data_manager import PyCUDADataManager
    from warp_drive.managers.pycuda_managers.pycuda_function_manager import PyCUDAFunctionManager
    from warp_drive.utils.data_feed import DataFeed

    num_agents, num_envs, episode_length = 3, 2, 5
    cuda_data_manager = PyCUDADataManager(num_agents, num_envs, episode_length=episode_length, backend=backend_name)
    assert (cuda_data_manager.num_envs, cuda_data_manager.num_agents) == (2, 3)

    random_data = np.random.default_rng(0).random((num_envs, num_agents))  # float64, as np.random.rand gives
    data_feed = DataFeed()
    data_feed.add_data(name="random_data", data=random_data, save_copy_and_apply_at_reset=False,
                       log_data_across_episode=False)
    with pytest.warns(UserWarning, match="'random_data' is float64; cast to float32"):
        cuda_data_manager.push_data_to_device(data_feed)
    fetched = cuda_data_manager.pull_data_from_device("random_data")
    assert fetched.dtype == np.float32 and cuda_data_manager.get_dtype("random_data") == "float32"
    np.testing.assert_array_equal(fetched, random_data.astype(np.float32))

    tensor_feed = DataFeed()
    tensor_feed.add_data(name="random_tensor", data=random_data)
    with pytest.warns(UserWarning, match="random_tensor"):
        cuda_data_manager.push_data_to_device(tensor_feed, torch_accessible=True)
    tensor_on_device = cuda_data_manager.data_on_device_via_torch("random_tensor")
    assert tensor_on_device.dtype == torch.float32 and tuple(tensor_on_device.shape) == (2, 3)

    cuda_function_manager = PyCUDAFunctionManager(
        num_agents=cuda_data_manager.meta_info("n_agents"),
        num_envs=cuda_data_manager.meta_info("n_envs"),
        backend=backend_name,
    )
    cuda_function_manager.load_cuda_from_source_code(INCREMENT_SOURCE, default_functions_included=False)
    cuda_function_manager.initialize_functions(["cuda_increment"])
    increment_function = cuda_function_manager._get_function("cuda_increment")
    assert cuda_function_manager.get_function("cuda_increment") is increment_function

    cuda_data_manager.push_data_to_device({"num_agents": {"data": num_agents, "attributes": {
        "save_copy_and_apply_at_reset": False, "log_data_across_episode": False}}})
    expected_increment = np.add.outer(np.arange(num_envs), np.arange(num_agents)).astype(np.float32)
    for launches in (1, 2):
        increment_function(
            cuda_data_manager.device_data("random_data"),
            cuda_data_manager.device_data("num_agents"),
            block=cuda_function_manager.block,
            grid=cuda_function_manager.grid,
        )
        np.testing.assert_allclose(cuda_data_manager.pull_data_from_device("random_data") - random_data,
                                   launches * expected_increment, atol=1e-6)


def test_positional_warpdrive_order_builds_agents_first():
    """The issue's silent trap: WarpDrive's positional order is agents first."""
    from warp_drive.managers.pycuda_managers.pycuda_data_manager import PyCUDADataManager
    from warp_drive.managers.pycuda_managers.pycuda_function_manager import PyCUDAFunctionManager

    dm = PyCUDADataManager(3, 2, 1, 7, backend="cpu")  # num_agents, num_envs, blocks_per_env, episode_length
    assert (dm.num_agents, dm.num_envs, dm.episode_length) == (3, 2, 7)
    assert (dm.meta_info("n_agents"), dm.meta_info("n_envs"), dm.meta_info("blocks_per_env")) == (3, 2, 1)
    assert dm.get_shape("_done_") == (2,)
    fm = PyCUDAFunctionManager(3, 2, backend="cpu")
    assert (fm.num_agents, fm.num_envs, fm.blocks_per_env) == (3, 2, 1)
    assert fm.block == (3, 1, 1) and fm.grid == (2, 1, 1)
    with pytest.raises(TypeError, match="episode_length"):
        PyCUDADataManager(3, 2, backend="cpu")


# --------------------------------------------------------------------------- 64-bit data


def test_warpdrive_cast_warns_names_the_array_and_refuses_what_does_not_fit():
    from warp_drive.utils.data_feed import DataFeed

    feed = DataFeed()
    feed.add_data("ints", np.array([[1, -2, 3]], dtype=np.int64))
    feed.add_data("floats", np.array([0.5, 1e30]))
    feed.add_data("already", np.zeros(2, np.float32))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        cast = compat.warpdrive_cast(feed)
    messages = sorted(str(w.message) for w in caught)
    assert len(messages) == 2 and "'floats' is float64" in messages[0] and "'ints' is int64" in messages[1]
    assert all(w.category is UserWarning and w.filename == __file__ for w in caught)
    assert cast["ints"]["data"].dtype == np.int32 and cast["floats"]["data"].dtype == np.float32
    assert cast["already"]["data"] is feed["already"]["data"]
    assert feed["ints"]["data"].dtype == np.int64  # the caller's feed is not changed
    assert isinstance(cast, DataFeed)

    dm = compat.CUDADataManager(num_agents=3, num_envs=1, episode_length=4, backend="cpu")
    for name, value, match in [("big_int", np.array([2**40], dtype=np.int64), "outside the int32 range"),
                               ("big_float", np.array([1e300]), "beyond float32's maximum")]:
        bad = DataFeed()
        bad.add_data(name, value)
        with pytest.raises(ValueError, match=match):
            dm.push_data_to_device(bad)
        assert not dm.is_data_on_device(name)
    with pytest.warns(UserWarning, match="'scale' is float64"):
        dm.add_meta_info({"scale": np.float64(0.25)})
    assert dm.meta_info("scale") == np.float32(0.25) and dm.meta_info("scale").dtype == np.float32


def test_fortran_ordered_arrays_are_copied_to_c_order_with_a_warning():
    dm = compat.CUDADataManager(num_agents=2, num_envs=3, episode_length=4, backend="cpu")
    value = np.asfortranarray(np.arange(6, dtype=np.float32).reshape(3, 2))
    with pytest.warns(UserWarning, match="'f_order' is not C-contiguous"):
        dm.push_data_to_device({"f_order": {"data": value, "attributes": {}}})
    np.testing.assert_array_equal(dm.pull_data_from_device("f_order"), value)


# --------------------------------------------------------------------------- tutorial 2


def test_tutorial_2_sampler(backend_name):
    from warp_drive.managers.pycuda_managers.pycuda_data_manager import PyCUDADataManager
    from warp_drive.managers.pycuda_managers.pycuda_function_manager import PyCUDAFunctionManager, PyCUDASampler
    from warp_drive.utils.constants import Constants
    from warp_drive.utils.data_feed import DataFeed

    _ACTIONS = Constants.ACTIONS
    cuda_data_manager = PyCUDADataManager(num_agents=5, episode_length=10, num_envs=2, backend=backend_name)
    cuda_function_manager = PyCUDAFunctionManager(
        num_agents=cuda_data_manager.meta_info("n_agents"),
        num_envs=cuda_data_manager.meta_info("n_envs"),
        backend=backend_name,
    )
    cuda_function_manager.initialize_default_functions()  # WarpDrive loaded them with its fatbin; a no-op here
    cuda_sampler = PyCUDASampler(function_manager=cuda_function_manager)
    cuda_sampler.init_random(seed=7)

    data_feed = DataFeed()
    data_feed.add_data(name=f"{_ACTIONS}_a", data=[[[0], [0], [0], [0], [0]], [[0], [0], [0], [0], [0]]])
    cuda_data_manager.push_data_to_device(data_feed, torch_accessible=True)
    assert cuda_data_manager.is_data_on_device_via_torch(f"{_ACTIONS}_a")
    cuda_sampler.register_actions(cuda_data_manager, action_name=f"{_ACTIONS}_a", num_actions=3)

    distribution = np.array([
        [[0.333, 0.333, 0.333], [0.2, 0.5, 0.3], [0.95, 0.02, 0.03], [0.02, 0.95, 0.03], [0.02, 0.03, 0.95]],
        [[0.1, 0.7, 0.2], [0.7, 0.2, 0.1], [0.5, 0.5, 0.0], [0.0, 0.5, 0.5], [0.5, 0.0, 0.5]],
    ])
    device = cuda_data_manager.device
    distribution_t = torch.from_numpy(distribution).float().to(device)
    draws = 3000
    actions_batch = torch.empty((draws, 2, 5), dtype=torch.int32, device=device)
    for i in range(draws):
        cuda_sampler.sample(cuda_data_manager, distribution_t, action_name=f"{_ACTIONS}_a")
        actions_batch[i] = cuda_data_manager.data_on_device_via_torch(f"{_ACTIONS}_a")[:, :, 0]
    actions = actions_batch.cpu().numpy()
    frequencies = np.stack([(actions == a).mean(axis=0) for a in range(3)], axis=-1)
    # 5 standard deviations of a frequency over `draws` samples at p = 0.5 (a fixed seed: no flakiness)
    np.testing.assert_allclose(frequencies, distribution / distribution.sum(-1, keepdims=True),
                               atol=5 * 0.5 / np.sqrt(draws))
    assert not (actions[:, 1, 2] == 2).any() and not (actions[:, 1, 3] == 0).any()  # zero probability never drawn

    cuda_sampler.sample(cuda_data_manager, distribution_t, action_name=f"{_ACTIONS}_a", use_argmax=True)
    np.testing.assert_array_equal(cuda_data_manager.pull_data_from_device(f"{_ACTIONS}_a")[:, :, 0],
                                  [[0, 1, 0, 1, 2], [1, 0, 0, 1, 0]])  # ties go to the first action

    chosen = np.arange(10, dtype=np.int32).reshape(2, 5, 1) % 3
    PyCUDASampler.assign(cuda_data_manager, chosen, f"{_ACTIONS}_a")
    np.testing.assert_array_equal(cuda_data_manager.pull_data_from_device(f"{_ACTIONS}_a"), chosen)
    with pytest.raises(TypeError, match="int64"):
        PyCUDASampler.assign(cuda_data_manager, chosen.astype(np.int64), f"{_ACTIONS}_a")


# --------------------------------------------------------------------------- tutorial 3

# The `testkernel` of WarpDrive's dummy env, which tutorial 3 steps: x /= multiplier,
# y *= multiplier, actions = 0, 1, 2, and the env is done at the last step (or
# once any agent's y reaches the target).
TESTKERNEL_SOURCE = """
extern "C" __global__ void testkernel(float* x, int* y, int* done, int* actions, float multiplier, int target,
                                      int step, int episode_length) {
  __shared__ int reached;
  const int env_id = getEnvID(blockIdx.x);
  const int agent_id = getAgentID(threadIdx.x, blockIdx.x, blockDim.x);
  const int action_dim = 3;
  if (threadIdx.x == 0) reached = 0;
  __sync_env_threads();
  if (agent_id < wkNumberAgents) {
    const int index = env_id * wkNumberAgents + agent_id;
    x[index] = x[index] / multiplier;
    y[index] = (int)(y[index] * multiplier);
    if (y[index] >= target) atomicAdd(&reached, 1);
    for (int i = 0; i < action_dim; i++) actions[index * action_dim + i] = i;
  }
  __sync_env_threads();
  if (threadIdx.x == 0 && (step == episode_length || reached > 0)) done[env_id] = 1;
}
"""


def test_tutorial_3_reset_and_log(backend_name):
    from warp_drive.managers.pycuda_managers.pycuda_data_manager import PyCUDADataManager
    from warp_drive.managers.pycuda_managers.pycuda_function_manager import (
        PyCUDAEnvironmentReset,
        PyCUDAFunctionManager,
        PyCUDALogController,
    )
    from warp_drive.utils.constants import Constants
    from warp_drive.utils.data_feed import DataFeed

    _ACTIONS = Constants.ACTIONS
    cuda_data_manager = PyCUDADataManager(num_agents=5, num_envs=2, episode_length=2, backend=backend_name)
    cuda_function_manager = PyCUDAFunctionManager(
        num_agents=cuda_data_manager.meta_info("n_agents"),
        num_envs=cuda_data_manager.meta_info("n_envs"),
        backend=backend_name,
    )
    cuda_function_manager.load_cuda_from_source_code(TESTKERNEL_SOURCE)
    cuda_env_resetter = PyCUDAEnvironmentReset(function_manager=cuda_function_manager)
    cuda_env_logger = PyCUDALogController(function_manager=cuda_function_manager)
    cuda_function_manager.initialize_functions(["testkernel"])

    def cuda_dummy_step(function_manager, data_manager, env_resetter, target: int, step: int):
        env_resetter.reset_when_done(data_manager)
        test_step = function_manager.get_function("testkernel")
        test_step(
            data_manager.device_data("X"),
            data_manager.device_data("Y"),
            data_manager.device_data("_done_"),
            data_manager.device_data(f"{_ACTIONS}"),
            data_manager.device_data("multiplier"),
            np.int32(target),
            np.int32(step),
            data_manager.meta_info("episode_length"),
            block=function_manager.block,
            grid=function_manager.grid,
        )

    data = DataFeed()
    data.add_data(name="X", data=[[0.1, 0.2, 0.3, 0.4, 0.5], [0.6, 0.7, 0.8, 0.9, 1.0]],
                  save_copy_and_apply_at_reset=True, log_data_across_episode=True)
    data.add_data(name="Y", data=np.array([[6, 7, 8, 9, 10], [1, 2, 3, 4, 5]]),
                  save_copy_and_apply_at_reset=True, log_data_across_episode=True)
    data.add_data(name="multiplier", data=2.0)
    tensor = DataFeed()
    tensor.add_data(name=f"{_ACTIONS}", data=[[[0, 0, 0]] * 5, [[0, 0, 0]] * 5])
    with pytest.warns(UserWarning, match="'Y' is int64"):
        cuda_data_manager.push_data_to_device(data)
    cuda_data_manager.push_data_to_device(tensor, torch_accessible=True)
    assert cuda_data_manager.is_data_on_device("X") and cuda_data_manager.is_data_on_device("Y")
    assert cuda_data_manager.is_data_on_device_via_torch(f"{_ACTIONS}")

    cuda_env_logger.reset_log(data_manager=cuda_data_manager, env_id=0)
    for t in range(1, cuda_data_manager.meta_info("episode_length") + 1):
        cuda_dummy_step(cuda_function_manager, cuda_data_manager, cuda_env_resetter, target=100, step=t)
        cuda_env_logger.update_log(data_manager=cuda_data_manager, step=t)

    dense_log = cuda_env_logger.fetch_log(data_manager=cuda_data_manager, names=["X", "Y"])
    assert sorted(dense_log) == ["X_for_log", "Y_for_log"]
    X_update, Y_update = dense_log["X_for_log"], dense_log["Y_for_log"]
    assert X_update.shape == (3, 5) and Y_update.shape == (3, 5)
    assert abs(X_update[0].mean() - 0.3) < 1e-5 and Y_update[0].mean() == 8
    assert abs(X_update[1].mean() - 0.15) < 1e-5
    assert abs(X_update[2].mean() - 0.075) < 1e-5
    assert Y_update[1].mean() == 16
    assert Y_update[2].mean() == 32
    np.testing.assert_array_equal(cuda_data_manager.pull_data_from_device(_ACTIONS), np.tile([0, 1, 2], (2, 5, 1)))
    np.testing.assert_array_equal(cuda_data_manager.pull_data_from_device("_done_"), [1, 1])

    # WarpDrive's fetch_log keywords: last_step is capped at the last logged step
    assert cuda_env_logger.last_valid_step == 2
    partial = cuda_env_logger.fetch_log(cuda_data_manager, names="X", last_step=1, check_last_valid_step=True)
    assert list(partial) == ["X_for_log"] and partial["X_for_log"].shape == (2, 5)
    assert cuda_env_logger.fetch_log(cuda_data_manager, last_step=99)["Y_for_log"].shape == (3, 5)

    cuda_env_resetter.reset_when_done(data_manager=cuda_data_manager)
    done = cuda_data_manager.pull_data_from_device("_done_")
    assert done[0] == 0 and done[1] == 0
    X_after_reset = cuda_data_manager.pull_data_from_device("X")
    Y_after_reset = cuda_data_manager.pull_data_from_device("Y")
    assert abs(X_after_reset[0].mean() - 0.3) < 1e-5
    assert abs(X_after_reset[1].mean() - 0.8) < 1e-5
    assert Y_after_reset[0].mean() == 8
    assert Y_after_reset[1].mean() == 3


# --------------------------------------------------------------------------- compat header and build

PROBE_SOURCE = """
#ifndef OFFSET
#define OFFSET 0
#endif
extern "C" __global__ void wd_compat_probe(int* env_ids, int* agent_ids, int* sums, const int n) {
  __shared__ int seen[wkNumberAgents];
  const int e = getEnvID(blockIdx.x);
  const int a = getAgentID(threadIdx.x, blockIdx.x, blockDim.x);
  if (a < n) { seen[a] = 10 * (a + 1); env_ids[e * n + a] = e; agent_ids[e * n + a] = a; }
  __sync_env_threads();  // every agent's `seen` entry is written before any is read
  if (a < n) {
    int total = 0;
    for (int i = 0; i < wkNumberAgents; i++) total += seen[i];
    int index[2] = {e, a};
    const int shape[2] = {wkNumberEnvs, wkNumberAgents};
    sums[get_flattened_array_index(index, shape, 2)] = total + 1000 * wkNumberEnvs + OFFSET;
  }
}
"""


@pytest.mark.parametrize("as_file", [False, True])
def test_warpdrive_helper_names_build_and_run(env_backend, as_file, tmp_path):
    E, N = 3, 4
    fm = compat.CUDAFunctionManager(N, E, backend=env_backend)
    source = PROBE_SOURCE
    if as_file:
        source = tmp_path / "probe.cu"
        source.write_text(PROBE_SOURCE)
    module = build_warpdrive_source(fm, source, defines={"OFFSET": 5})
    assert "wd_compat_probe" in module.kernel_names
    device = fm.backend.device
    env_ids, agent_ids, sums = (torch.full((E, N), -1, dtype=torch.int32, device=device) for _ in range(3))
    fm.get_function("wd_compat_probe")(env_ids, agent_ids, sums, np.int32(N), grid=fm.grid, block=fm.block)
    np.testing.assert_array_equal(env_ids.cpu().numpy(), np.repeat(np.arange(E)[:, None], N, axis=1))
    np.testing.assert_array_equal(agent_ids.cpu().numpy(), np.tile(np.arange(N), (E, 1)))
    np.testing.assert_array_equal(sums.cpu().numpy(), np.full((E, N), 10 * N * (N + 1) // 2 + 1000 * E + 5))


def test_build_defines_are_the_function_managers_sizes():
    assert warpdrive_defines(2, 3, 1) == {"WD_COMPAT_NUM_ENVS": "2", "WD_COMPAT_NUM_AGENTS": "3",
                                          "WD_COMPAT_BLOCKS_PER_ENV": "1"}
    with pytest.raises(ValueError, match="num_agents must be positive"):
        warpdrive_defines(2, 0, 1)
    fm = compat.CUDAFunctionManager(4, 3, backend="cpu")
    with pytest.raises(ValueError, match="contradicts the function manager's size"):
        build_warpdrive_source(fm, PROBE_SOURCE, defines={"WD_COMPAT_NUM_AGENTS": 8})
    with pytest.raises(FileNotFoundError, match="is not a file"):
        build_warpdrive_source(fm, "no_such_kernel.cu")
    with pytest.raises(NotImplementedError, match="load_cuda_from_source_code"):
        fm.load_cuda_from_binary_file("test_build.fatbin")


# --------------------------------------------------------------------------- feed, registrar


def test_function_feed_meta_and_shared_entries():
    from warp_drive.managers.function_manager import CUDAFunctionFeed

    dm = compat.CUDADataManager(num_agents=2, num_envs=2, episode_length=3, backend="cpu")
    with pytest.warns(UserWarning, match="'table' is int64"):
        dm.add_shared_constants({"table": np.array([[1, 2], [3, 4]]), "gain": 1.5})
    dm.push_data_to_device({"pos": {"data": np.zeros((2, 2), np.float32), "attributes": {}}})
    args = CUDAFunctionFeed(dm)(["pos", ("n_agents", "meta"), ("gain", "shared"), ("table", "S")])
    assert args[0] is dm.data_on_device_via_torch("pos")
    assert args[1] == 2 and args[2] == np.float32(1.5)
    assert args[3].dtype == torch.int32 and args[3].tolist() == [[1, 2], [3, 4]]
    assert CUDAFunctionFeed(dm)([("n_envs", "m")]) == [2]  # resolved anew for every list


def test_environment_registrar_and_compile_and_load_cuda(clean_registrar, tmp_path):
    from warp_drive.utils.env_registrar import env_registrar

    source = tmp_path / "probe_env.cu"
    source.write_text(PROBE_SOURCE)

    @env_registrar.add(env_backend=["cpu", "pycuda"], cuda_env_src_path=str(source))  # crashed in WarpDrive
    class ProbeEnv:
        name = "ProbeEnv"

    other = clean_registrar()  # class-level: every registrar sees the same entries
    assert other.get("probeenv") is ProbeEnv and other.get("ProbeEnv", env_backend="pycuda") is ProbeEnv
    assert other.has_env("PROBEENV", "cpu") and not other.has_env("ProbeEnv", "numba")
    for backend in ("pycuda", "cpu", "cpu-gpu"):
        assert other.get_cuda_env_src_path("ProbeEnv", env_backend=backend) == str(source.resolve())
    assert other.get_cuda_env_src_path("ProbeEnv", env_backend="numba") is None
    assert other.get_cuda_env_src_path("Unknown") is None
    with pytest.raises(KeyError, match="did you mean 'probeenv'"):
        other.get("probeenvv")
    with pytest.raises(ValueError, match="already registered"):
        env_registrar.add()(type("Clash", (), {"name": "ProbeEnv"}))
    with pytest.raises(FileNotFoundError):
        other.add_cuda_env_src_path("Missing", str(tmp_path / "missing.cu"))
    assert other.has_env("TagGridWorld", "pycuda")  # this project's envs are found too

    fm = compat.CUDAFunctionManager(num_agents=2, num_envs=2, backend="cpu")
    fm.compile_and_load_cuda(env_name="ProbeEnv", template_header_file="template_env_config.h",
                             template_runner_file="template_env_runner.cu")
    assert "wd_compat_probe" in fm.get_function("wd_compat_probe").module.kernel_names


def test_services_must_run_on_their_function_managers_backend():
    fm = compat.CUDAFunctionManager(2, 2, backend="cpu")
    compat.CUDASampler(fm, backend="cpu")
    with pytest.raises(ValueError, match="differs from the function manager's backend"):
        compat.CUDAEnvironmentReset(fm, backend="cpu-gpu")


def test_shared_constants_reach_constant_memory():
    source = """
    __constant__ int kTable[4];
    extern "C" __global__ void read_table(int* out) {
      const int a = getAgentID(threadIdx.x, blockIdx.x, blockDim.x);
      out[getEnvID(blockIdx.x) * wkNumberAgents + a] = kTable[a];
    }
    """
    dm = compat.CUDADataManager(4, 2, episode_length=3, backend="cpu")
    with pytest.warns(UserWarning, match="'kTable' is int64"):
        dm.add_shared_constants({"kTable": np.array([5, 6, 7, 8])})
    dm.push_data_to_device({"out": {"data": np.zeros((2, 4), np.int32), "attributes": {}}})
    fm = compat.CUDAFunctionManager(4, 2, backend="cpu")
    fm.load_cuda_from_source_code(source)
    fm.initialize_shared_constants(dm, ["kTable"])
    fm.get_function("read_table")(dm.device_data("out"), block=fm.block, grid=fm.grid)
    np.testing.assert_array_equal(dm.pull_data_from_device("out"), [[5, 6, 7, 8]] * 2)
