"""WarpDrive 2.7.1's tutorials 1.a, 2.a and 3 as written, on the directory laid out as WarpDrive's
repository (``warp_drive.utils.common.get_project_root()``).

Each test makes the tutorial's calls, with its arguments, in its order, through WarpDrive's import
paths and with no ``backend=`` (WarpDrive's programs name none: the cpu executor here, pycuda on a
GPU machine). What differs is only size (fewer draws, envs, runs) and torch's own GPU timing
(``torch.cuda.Event``), which tutorial 2 used to time the sampler and which has no CPU form: timed
with ``time.perf_counter`` instead. Tutorials 2 and 3 build
``{get_project_root()}/warp_drive/cuda_includes/test_build.cu`` with
``CUDAFunctionManager._compile`` and load ``cuda_bin/test_build.fatbin``: that file is this
project's (``warp_drive.compat.project_root.TEST_BUILD_SOURCE``), its ``testkernel`` in
``<warp_drive/compat/test_steps.cu>``.
"""

from __future__ import annotations

import time
from pathlib import Path
from timeit import Timer

import numpy as np
import pytest
import torch

from warp_drive.runtime.backends.nvcc import find_nvcc


def _project_paths():
    from warp_drive.utils.common import get_project_root

    return f"{get_project_root()}/warp_drive/cuda_includes", f"{get_project_root()}/warp_drive/cuda_bin"


# --------------------------------------------------------------------------- tutorial 1.a


SOURCE_CODE = """
// tutorial 1.a's kernel: entry (env, agent) grows by env_id + agent_id
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


def test_tutorial_1a_as_written():
    from warp_drive.managers.pycuda_managers.pycuda_data_manager import PyCUDADataManager
    from warp_drive.managers.pycuda_managers.pycuda_function_manager import PyCUDAFunctionManager
    from warp_drive.utils.data_feed import DataFeed

    num_agents, num_envs, episode_length = 3, 2, 5
    cuda_data_manager = PyCUDADataManager(num_agents, num_envs, episode_length=episode_length)
    random_data = np.random.rand(num_envs, num_agents)
    data_feed = DataFeed()
    data_feed.add_data(name="random_data", data=random_data, save_copy_and_apply_at_reset=False,
                       log_data_across_episode=False)
    with pytest.warns(UserWarning, match="'random_data' is float64"):
        cuda_data_manager.push_data_to_device(data_feed)
    data_fetched_from_device = cuda_data_manager.pull_data_from_device("random_data")
    np.testing.assert_array_equal(data_fetched_from_device, random_data.astype(np.float32))

    tensor_feed = DataFeed()
    tensor_feed.add_data(name="random_tensor", data=random_data)
    with pytest.warns(UserWarning, match="'random_tensor' is float64"):
        cuda_data_manager.push_data_to_device(tensor_feed, torch_accessible=True)
    tensor_on_device = cuda_data_manager.data_on_device_via_torch("random_tensor")
    assert isinstance(tensor_on_device, torch.Tensor) and tuple(tensor_on_device.shape) == (num_envs, num_agents)

    large_array = np.random.rand(100, 100)  # the tutorial's 1000 x 1000, smaller
    data_feed = DataFeed()
    data_feed.add_data(name="large_array", data=large_array)
    with pytest.warns(UserWarning):
        cuda_data_manager.push_data_to_device(data_feed, torch_accessible=False)
    assert Timer(lambda: cuda_data_manager.pull_data_from_device("large_array")).timeit(number=10) >= 0
    data_feed = DataFeed()
    data_feed.add_data(name="large_array_torch", data=large_array)
    with pytest.warns(UserWarning):
        cuda_data_manager.push_data_to_device(data_feed, torch_accessible=True)
    assert Timer(lambda: cuda_data_manager.data_on_device_via_torch("random_tensor")).timeit(10) >= 0

    cuda_function_manager = PyCUDAFunctionManager(
        num_agents=cuda_data_manager.meta_info("n_agents"),
        num_envs=cuda_data_manager.meta_info("n_envs"),
    )
    cuda_function_manager.load_cuda_from_source_code(SOURCE_CODE, default_functions_included=False)
    cuda_function_manager.initialize_functions(["cuda_increment"])
    increment_function = cuda_function_manager.get_function("cuda_increment")
    cuda_data_manager.push_data_to_device(
        {"num_agents": {"data": num_agents,
                        "attributes": {"save_copy_and_apply_at_reset": False, "log_data_across_episode": False}}}
    )
    increment = np.arange(num_envs)[:, None] + np.arange(num_agents)[None, :]
    for times in (1, 2):
        increment_function(
            cuda_data_manager.device_data("random_data"),
            cuda_data_manager.device_data("num_agents"),
            block=cuda_function_manager.block,
            grid=cuda_function_manager.grid,
        )
        np.testing.assert_allclose(cuda_data_manager.pull_data_from_device("random_data") - random_data,
                                   times * increment, atol=1e-6)

    # push_random_data_and_increment_timer, over fewer scenarios and runs
    def push_random_data_and_increment_timer(num_runs=1, num_envs=2, num_agents=3, source_code=None,
                                             episode_length=100):
        assert source_code is not None
        cuda_data_manager = PyCUDADataManager(num_agents=num_agents, num_envs=num_envs,
                                              episode_length=episode_length)
        cuda_function_manager = PyCUDAFunctionManager(
            num_agents=cuda_data_manager.meta_info("n_agents"),
            num_envs=cuda_data_manager.meta_info("n_envs"),
        )
        cuda_function_manager.load_cuda_from_source_code(source_code, default_functions_included=False)
        cuda_function_manager.initialize_functions(["cuda_increment"])
        increment_function = cuda_function_manager.get_function("cuda_increment")

        def push_random_data(num_agents, num_envs):
            data_feed = DataFeed()
            data_feed.add_data(name="random_data", data=np.random.rand(num_envs, num_agents))
            data_feed.add_data(name="num_agents", data=num_agents)
            cuda_data_manager.push_data_to_device(data_feed)

        def increment_data():
            increment_function(cuda_data_manager.device_data("random_data"),
                               cuda_data_manager.device_data("num_agents"),
                               block=cuda_function_manager.block, grid=cuda_function_manager.grid)

        with pytest.warns(UserWarning):
            data_push_time = Timer(lambda: push_random_data(num_agents, num_envs)).timeit(number=1)
        before = cuda_data_manager.pull_data_from_device("random_data")
        program_run_time = Timer(lambda: increment_data()).timeit(number=num_runs)
        grown = cuda_data_manager.pull_data_from_device("random_data") - before
        expected = num_runs * (np.arange(num_envs)[:, None] + np.arange(num_agents)[None, :])
        np.testing.assert_allclose(grown, expected, rtol=1e-5, atol=1e-3)
        return {"data push times": data_push_time, "code run time": program_run_time}

    times = {}
    for num_envs, num_agents in [(1, 1), (1, 10), (10, 10)]:
        times[f"envs={num_envs}, agents={num_agents}"] = push_random_data_and_increment_timer(
            10, num_envs, num_agents, SOURCE_CODE)
    assert len(times) == 3 and all(value["code run time"] > 0 for value in times.values())


# --------------------------------------------------------------------------- tutorial 2.a


def test_tutorial_2a_as_written():
    from warp_drive.managers.pycuda_managers.pycuda_data_manager import PyCUDADataManager
    from warp_drive.managers.pycuda_managers.pycuda_function_manager import PyCUDAFunctionManager, PyCUDASampler
    from warp_drive.utils.constants import Constants
    from warp_drive.utils.data_feed import DataFeed

    _MAIN_FILEPATH, _CUBIN_FILEPATH = _project_paths()
    _ACTIONS = Constants.ACTIONS

    cuda_data_manager = PyCUDADataManager(num_agents=5, episode_length=10, num_envs=2)
    cuda_function_manager = PyCUDAFunctionManager(
        num_agents=cuda_data_manager.meta_info("n_agents"),
        num_envs=cuda_data_manager.meta_info("n_envs"),
    )
    main_example_file = f"{_MAIN_FILEPATH}/test_build.cu"
    bin_example_file = f"{_CUBIN_FILEPATH}/test_build.fatbin"
    cuda_function_manager._compile(main_file=main_example_file, cubin_file=bin_example_file)
    cuda_function_manager.load_cuda_from_binary_file(bin_example_file, default_functions_included=True)
    cuda_sampler = PyCUDASampler(function_manager=cuda_function_manager)
    cuda_sampler.init_random(seed=None)

    data_feed = DataFeed()
    data_feed.add_data(name=f"{_ACTIONS}_a", data=[[[0], [0], [0], [0], [0]], [[0], [0], [0], [0], [0]]])
    cuda_data_manager.push_data_to_device(data_feed, torch_accessible=True)
    assert cuda_data_manager.is_data_on_device_via_torch(f"{_ACTIONS}_a")
    cuda_sampler.register_actions(cuda_data_manager, action_name=f"{_ACTIONS}_a", num_actions=3)
    distribution = np.array([
        [[0.333, 0.333, 0.333], [0.2, 0.5, 0.3], [0.95, 0.02, 0.03], [0.02, 0.95, 0.03], [0.02, 0.03, 0.95]],
        [[0.1, 0.7, 0.2], [0.7, 0.2, 0.1], [0.5, 0.5, 0.0], [0.0, 0.5, 0.5], [0.5, 0.0, 0.5]],
    ])
    distribution = torch.from_numpy(distribution).float().to(cuda_data_manager.device)

    draws = 2000  # the tutorial's 10000, fewer
    actions_batch = torch.from_numpy(np.empty((draws, 2, 5), dtype=np.int32)).to(cuda_data_manager.device)
    for i in range(draws):
        cuda_sampler.sample(cuda_data_manager, distribution, action_name=f"{_ACTIONS}_a")
        actions_batch[i] = cuda_data_manager.data_on_device_via_torch(f"{_ACTIONS}_a")[:, :, 0]
    actions_batch_host = actions_batch.cpu().numpy()
    frequencies = np.stack([(actions_batch_host == a).mean(axis=0) for a in range(3)], axis=-1)
    wanted = distribution.cpu().numpy()
    # 6 standard deviations of a frequency at p = 0.5 over `draws` (the tutorial's seed=None: fresh draws)
    np.testing.assert_allclose(frequencies, wanted / wanted.sum(-1, keepdims=True), atol=6 * 0.5 / np.sqrt(draws))
    assert (frequencies[wanted == 0] == 0).all()  # a zero probability is never drawn

    data_feed = DataFeed()
    data_feed.add_data(name=f"{_ACTIONS}_b", data=[[[0], [0], [0], [0], [0]], [[0], [0], [0], [0], [0]]])
    cuda_data_manager.push_data_to_device(data_feed, torch_accessible=True)
    assert cuda_data_manager.is_data_on_device_via_torch(f"{_ACTIONS}_b")
    cuda_sampler.register_actions(cuda_data_manager, action_name=f"{_ACTIONS}_b", num_actions=4)
    distribution = torch.from_numpy(np.full((2, 5, 4), 0.25)).float().to(cuda_data_manager.device)
    actions_batch = torch.from_numpy(np.empty((draws, 2, 5), dtype=np.int32)).to(cuda_data_manager.device)
    for i in range(draws):
        cuda_sampler.sample(cuda_data_manager, distribution, action_name=f"{_ACTIONS}_b")
        actions_batch[i] = cuda_data_manager.data_on_device_via_torch(f"{_ACTIONS}_b")[:, :, 0]
    actions_batch_host = actions_batch.cpu().numpy()
    assert set(np.unique(actions_batch_host)) == {0, 1, 2, 3}
    # agents draw independently: the spread across an env's 5 agents is that of numpy's uniform draws (~1.0)
    spread = actions_batch_host.std(axis=2).mean(axis=0)
    assert spread.shape == (2,) and (np.abs(spread - 1.0) < 0.1).all(), spread

    from torch.distributions import Categorical

    distribution = torch.from_numpy(np.array([
        [[0.333, 0.333, 0.333], [0.2, 0.5, 0.3], [0.95, 0.02, 0.03], [0.02, 0.95, 0.03], [0.02, 0.03, 0.95]],
        [[0.1, 0.7, 0.2], [0.7, 0.2, 0.1], [0.5, 0.5, 0.0], [0.0, 0.5, 0.5], [0.5, 0.0, 0.5]],
    ])).float().to(cuda_data_manager.device)
    start = time.perf_counter()  # the tutorial: torch.cuda.Event timing, GPU-only
    for _ in range(100):
        cuda_sampler.sample(cuda_data_manager, distribution, action_name=f"{_ACTIONS}_a")
    for _ in range(100):
        Categorical(distribution).sample()
    assert time.perf_counter() > start


# --------------------------------------------------------------------------- tutorial 3


def _tutorial_3_managers(num_agents=5, num_envs=2, episode_length=2, backend=None, blocks_per_env=1):
    """Tutorial 3's managers, with its _compile and load of the root's test_build.cu (``backend``,
    ``blocks_per_env``: not the tutorial's, for other launches)."""
    named = {} if backend is None else {"backend": backend}
    from warp_drive.managers.pycuda_managers.pycuda_data_manager import PyCUDADataManager
    from warp_drive.managers.pycuda_managers.pycuda_function_manager import PyCUDAFunctionManager

    _MAIN_FILEPATH, _CUBIN_FILEPATH = _project_paths()
    cuda_data_manager = PyCUDADataManager(num_agents=num_agents, num_envs=num_envs, episode_length=episode_length,
                                          **named)
    cuda_function_manager = PyCUDAFunctionManager(
        num_agents=cuda_data_manager.meta_info("n_agents"),
        num_envs=cuda_data_manager.meta_info("n_envs"),
        **({"blocks_per_env": blocks_per_env} if blocks_per_env != 1 else {}), **named,
    )
    main_example_file = f"{_MAIN_FILEPATH}/test_build.cu"
    bin_example_file = f"{_CUBIN_FILEPATH}/test_build.fatbin"
    cuda_function_manager._compile(main_file=main_example_file, cubin_file=bin_example_file)
    cuda_function_manager.load_cuda_from_binary_file(bin_example_file)
    return cuda_data_manager, cuda_function_manager


def _cuda_dummy_step(function_manager, data_manager, env_resetter, target: int, step: int):
    """Tutorial 3's cuda_dummy_step."""
    from warp_drive.utils.constants import Constants

    env_resetter.reset_when_done(data_manager)
    step = np.int32(step)
    target = np.int32(target)
    test_step = function_manager.get_function("testkernel")
    test_step(
        data_manager.device_data("X"),
        data_manager.device_data("Y"),
        data_manager.device_data("_done_"),
        data_manager.device_data(f"{Constants.ACTIONS}"),
        data_manager.device_data("multiplier"),
        target,
        step,
        data_manager.meta_info("episode_length"),
        block=function_manager.block,
        grid=function_manager.grid,
    )


def test_tutorial_3_as_written():
    from warp_drive.managers.pycuda_managers.pycuda_function_manager import (
        PyCUDAEnvironmentReset,
        PyCUDALogController,
    )
    from warp_drive.utils.constants import Constants
    from warp_drive.utils.data_feed import DataFeed

    _ACTIONS = Constants.ACTIONS
    cuda_data_manager, cuda_function_manager = _tutorial_3_managers()
    cuda_env_resetter = PyCUDAEnvironmentReset(function_manager=cuda_function_manager)
    cuda_env_logger = PyCUDALogController(function_manager=cuda_function_manager)
    cuda_function_manager.initialize_functions(["testkernel"])

    data = DataFeed()
    data.add_data(name="X", data=[[0.1, 0.2, 0.3, 0.4, 0.5], [0.6, 0.7, 0.8, 0.9, 1.0]],
                  save_copy_and_apply_at_reset=True, log_data_across_episode=True)
    data.add_data(name="Y", data=np.array([[6, 7, 8, 9, 10], [1, 2, 3, 4, 5]]),
                  save_copy_and_apply_at_reset=True, log_data_across_episode=True)
    data.add_data(name="multiplier", data=2.0)
    tensor = DataFeed()
    tensor.add_data(name=f"{_ACTIONS}", data=[[[0, 0, 0], [0, 0, 0], [0, 0, 0], [0, 0, 0], [0, 0, 0]],
                                               [[0, 0, 0], [0, 0, 0], [0, 0, 0], [0, 0, 0], [0, 0, 0]]])
    with pytest.warns(UserWarning, match="'Y' is int64"):
        cuda_data_manager.push_data_to_device(data)
    cuda_data_manager.push_data_to_device(tensor, torch_accessible=True)
    assert cuda_data_manager.is_data_on_device("X")
    assert cuda_data_manager.is_data_on_device("Y")
    assert cuda_data_manager.is_data_on_device_via_torch(f"{_ACTIONS}")

    cuda_env_logger.reset_log(data_manager=cuda_data_manager, env_id=0)
    for t in range(1, cuda_data_manager.meta_info("episode_length") + 1):
        _cuda_dummy_step(function_manager=cuda_function_manager, data_manager=cuda_data_manager,
                         env_resetter=cuda_env_resetter, target=100, step=t)
        if t == 1:  # not yet done: the episode has 2 steps and no Y reaches 100
            np.testing.assert_array_equal(cuda_data_manager.pull_data_from_device("_done_"), [0, 0])
        cuda_env_logger.update_log(data_manager=cuda_data_manager, step=t)
    dense_log = cuda_env_logger.fetch_log(data_manager=cuda_data_manager, names=["X", "Y"])
    X_update = dense_log["X_for_log"]
    Y_update = dense_log["Y_for_log"]
    assert abs(X_update[1].mean() - 0.15) < 1e-5
    assert abs(X_update[2].mean() - 0.075) < 1e-5
    assert Y_update[1].mean() == 16
    assert Y_update[2].mean() == 32
    np.testing.assert_array_equal(Y_update[2], [24, 28, 32, 36, 40])  # env 0, each value times 4
    np.testing.assert_array_equal(cuda_data_manager.pull_data_from_device(_ACTIONS), np.tile([0, 1, 2], (2, 5, 1)))
    done = cuda_data_manager.pull_data_from_device("_done_")
    np.testing.assert_array_equal(done, [1, 1])

    cuda_env_resetter.reset_when_done(data_manager=cuda_data_manager)
    done = cuda_data_manager.pull_data_from_device("_done_")
    assert done[0] == 0
    assert done[1] == 0
    X_after_reset = cuda_data_manager.pull_data_from_device("X")
    Y_after_reset = cuda_data_manager.pull_data_from_device("Y")
    assert abs(X_after_reset[0].mean() - 0.3) < 1e-5
    assert abs(X_after_reset[1].mean() - 0.8) < 1e-5
    assert Y_after_reset[0].mean() == 8
    assert Y_after_reset[1].mean() == 3


# --------------------------------------------------------------------------- the root's test build


@pytest.mark.parametrize("backend,num_agents,blocks_per_env", [
    ("cpu", 70, 1),
    # the GPU-shaped cpu executor: one thread per agent, as on a GPU (~1.5 s: its service kernels' build)
    pytest.param("cpu-gpu", 33, 1, marks=pytest.mark.slow),
    pytest.param("pycuda", 9, 2, marks=pytest.mark.gpu),  # several blocks per env: a GPU launch only
])
def test_testkernel_at_other_sizes_and_an_early_target(backend, num_agents, blocks_per_env):
    """test_build.cu fixes no size (WarpDrive's fixed 2 envs of 5 agents): 3 envs of 70 (33) agents (and, on a
    GPU, two blocks per env) build and step; the done flag also rises before the last step when one
    agent's Y reaches the target, in that env only, and stays raised."""
    from warp_drive.managers.pycuda_managers.pycuda_function_manager import PyCUDAEnvironmentReset
    from warp_drive.utils.data_feed import DataFeed

    num_envs = 3
    dm, fm = _tutorial_3_managers(num_agents=num_agents, num_envs=num_envs, episode_length=5,
                                  blocks_per_env=blocks_per_env, backend=backend)
    resetter = PyCUDAEnvironmentReset(function_manager=fm)
    y = np.ones((num_envs, num_agents), np.int32)
    y[1, num_agents - 1] = 30  # env 1's last agent reaches 100 at step 2 (90, then 270)
    x = np.linspace(1, 2, num_envs * num_agents, dtype=np.float32).reshape(num_envs, num_agents)
    data = DataFeed()
    data.add_data(name="X", data=x, save_copy_and_apply_at_reset=True)
    data.add_data(name="Y", data=y, save_copy_and_apply_at_reset=True)
    data.add_data(name="multiplier", data=np.float32(3.0))
    data.add_data(name="sampled_actions", data=np.zeros((num_envs, num_agents, 3), np.int32))
    dm.push_data_to_device(data)

    _cuda_dummy_step(fm, dm, resetter, target=100, step=1)
    np.testing.assert_array_equal(dm.pull_data_from_device("_done_"), [0, 0, 0])
    np.testing.assert_array_equal(dm.pull_data_from_device("X"), x / np.float32(3.0))
    np.testing.assert_array_equal(dm.pull_data_from_device("Y"), y * 3)
    np.testing.assert_array_equal(dm.pull_data_from_device("sampled_actions"),
                                  np.tile([0, 1, 2], (num_envs, num_agents, 1)))
    # the step leaves the flag to the reset: step 2 raises env 1's, step 3 (no reset in between) keeps it
    fm.get_function("testkernel")(dm.device_data("X"), dm.device_data("Y"), dm.device_data("_done_"),
                                  dm.device_data("sampled_actions"), dm.device_data("multiplier"),
                                  np.int32(100), np.int32(2), dm.meta_info("episode_length"),
                                  block=fm.block, grid=fm.grid)
    np.testing.assert_array_equal(dm.pull_data_from_device("_done_"), [0, 1, 0])
    np.testing.assert_array_equal(dm.pull_data_from_device("Y")[1, -1], 270)
    _cuda_dummy_step(fm, dm, resetter, target=10**6, step=5)  # resets env 1, then the last step: all done
    np.testing.assert_array_equal(dm.pull_data_from_device("_done_"), [1, 1, 1])
    np.testing.assert_array_equal(dm.pull_data_from_device("Y")[1], y[1] * 3)  # env 1 restarted from its copy


def test_the_laid_out_root_lists_its_test_build():
    from warp_drive.compat.project_root import TEST_BUILD_SOURCE, not_shipped
    from warp_drive.utils.common import get_project_root

    root = Path(get_project_root())
    main = root / "warp_drive" / "cuda_includes" / "test_build.cu"
    assert main.read_text() == TEST_BUILD_SOURCE
    assert "#include <warp_drive/compat/test_steps.cu>" in TEST_BUILD_SOURCE
    readme = (root / "README.txt").read_text()
    provided, missing = readme.split("Not provided:")
    assert "warp_drive/cuda_includes/test_build.cu" in provided and "testkernel" in provided
    assert "CudaTagGridWorldStep" in provided  # what it does not hold is said
    assert "WarpDrive's other cuda_includes files" in missing
    why = not_shipped(root / "warp_drive" / "cuda_includes" / "core_service.h")
    assert "core kernels are built in" in why and "test_build.cu (this project's, provided)" in why
    why = not_shipped(root / "warp_drive" / "cuda_bin" / "test_build_multiblocks.fatbin")
    assert "_compile(" in why and "warp_drive/cuda_includes/test_build.cu" in why


def test_loading_test_build_fatbin_before_compiling_names_the_compile(tmp_path):
    """WarpDrive's own tests loaded cuda_bin/test_build.fatbin that its test runner had built: here the
    error names the _compile call that makes it."""
    from warp_drive.compat.cuda_build import PrebuiltBinaryError
    from warp_drive.managers.pycuda_managers.pycuda_function_manager import PyCUDAFunctionManager

    fm = PyCUDAFunctionManager(num_agents=5, num_envs=2)
    binary = tmp_path / "cuda_bin" / "test_build.fatbin"
    with pytest.raises(PrebuiltBinaryError, match=r"_compile\(main_file=.*cuda_includes/test_build\.cu"):
        fm.load_cuda_from_binary_file(str(binary))
    binary.parent.mkdir()
    binary.write_bytes(b"\x7fELF" + bytes(60))  # a real prebuilt binary: still refused, naming the fix
    with pytest.raises(PrebuiltBinaryError, match="prebuilt binary"):
        fm.load_cuda_from_binary_file(str(binary))


@pytest.mark.slow
@pytest.mark.skipif(find_nvcc() is None, reason="nvcc not found: the GPU build of test_build.cu is not checked")
def test_the_pycuda_executor_builds_the_same_test_build_with_nvcc():
    """The GPU path: what the compat layer hands the executor for the root's test_build.cu (a backend
    build: sources, include dirs, defines -- the same on every executor) builds with nvcc, the
    pycuda executor's own flags, and testkernel keeps no stack frame and spills nothing."""
    from warp_drive.runtime.backends.cpu import CpuBackend
    from warp_drive.runtime.backends.resources import ptxas_resources
    from warp_drive.managers.pycuda_managers.pycuda_function_manager import PyCUDAFunctionManager

    class Recording(CpuBackend):
        def build(self, sources, include_dirs=(), defines=None):
            self.recorded = (list(sources), list(include_dirs), dict(defines or {}))
            return super().build(sources, include_dirs=include_dirs, defines=defines)

    recording = Recording()
    _MAIN_FILEPATH, _CUBIN_FILEPATH = _project_paths()
    fm = PyCUDAFunctionManager(num_agents=5, num_envs=2, backend=recording)
    fm._compile(main_file=f"{_MAIN_FILEPATH}/test_build.cu", cubin_file=f"{_CUBIN_FILEPATH}/test_build.fatbin")
    fm.load_cuda_from_binary_file(f"{_CUBIN_FILEPATH}/test_build.fatbin")
    sources, include_dirs, defines = recording.recorded
    resources = ptxas_resources(sources, include_dirs, defines, arch="sm_80", debug=False)
    testkernel = resources["testkernel"]
    assert not testkernel.spill_store_bytes and not testkernel.spill_load_bytes
    assert not testkernel.stack_frame_bytes, testkernel.describe()
