"""WarpDrive 2.7.1's ``tests/example_envs/pycuda_tests/test_tag_gridworld_step_cuda.py`` as written
(issue 30), on the cpu executor.

WarpDrive's test loads ``{get_project_root()}/warp_drive/cuda_bin/test_build.fatbin`` (which its test
runner had built from ``warp_drive/cuda_includes/test_build.cu``), uploads ``kIndexToActionArr``,
samples actions from one-hot distributions and launches ``CudaTagGridWorldStep`` with WarpDrive's
parameter list, then compares rewards, observations, actions and ``_done_`` after a step, and again
after the resetter restarted both envs. Here the root's ``test_build.cu`` is this project's; its
``CudaTagGridWorldStep`` (``<warp_drive/compat/tag_gridworld_step.cu>``) is a translator over the
example env's own step (``tag_gridworld_step`` in ``example_envs/tag_gridworld/tag_gridworld.cu``),
so the values below are this project's TagGridWorld rules, worked out by hand below from the starts
and the actions. The test after it steps both kernels side by side.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

L = 4  # world_boundary
N = 5  # agents: taggers 0..3, the runner 4
TYPES = np.array([0, 0, 0, 0, 1])


def _managers(num_agents=5, num_envs=2, episode_length=1, backend=None):
    """WarpDrive's test runner built the test binary first; then the test's __init__: managers, the
    load of cuda_bin/test_build.fatbin, a resetter and a sampler (``backend``: not the test's, which
    names none, for the other executors)."""
    named = {} if backend is None else {"backend": backend}
    from warp_drive.managers.pycuda_managers.pycuda_data_manager import PyCUDADataManager
    from warp_drive.managers.pycuda_managers.pycuda_function_manager import (
        PyCUDAEnvironmentReset,
        PyCUDAFunctionManager,
        PyCUDASampler,
    )
    from warp_drive.utils.common import get_project_root

    builder = PyCUDAFunctionManager(num_agents=num_agents, num_envs=num_envs)
    builder._compile(main_file=f"{get_project_root()}/warp_drive/cuda_includes/test_build.cu",
                     cubin_file=f"{get_project_root()}/warp_drive/cuda_bin/test_build.fatbin")

    dm = PyCUDADataManager(num_agents=num_agents, num_envs=num_envs, episode_length=episode_length, **named)
    fm = PyCUDAFunctionManager(num_agents=int(dm.meta_info("n_agents")), num_envs=int(dm.meta_info("n_envs")),
                               **named)
    fm.load_cuda_from_binary_file(f"{get_project_root()}/warp_drive/cuda_bin/test_build.fatbin")
    resetter = PyCUDAEnvironmentReset(function_manager=fm)
    sampler = PyCUDASampler(function_manager=fm)
    sampler.init_random(seed=None)
    return dm, fm, resetter, sampler


def _int_step(dm, fm, loc_x, loc_y, use_full_observation=True, move_table=None):
    """The test's int_step: the kernel, the move table upload, the env's data and the rollout tensors."""
    from warp_drive.utils.constants import Constants
    from warp_drive.utils.data_feed import DataFeed

    num_envs, num_agents = np.shape(loc_x)
    kIndexToActionArr = [[0, 0], [1, 0], [-1, 0], [0, 1], [0, -1]] if move_table is None else move_table
    fm.initialize_functions(["CudaTagGridWorldStep"])
    dm.add_shared_constants({"kIndexToActionArr": kIndexToActionArr})
    fm.initialize_shared_constants(dm, constant_names=["kIndexToActionArr"])

    data = DataFeed()
    data.add_data(name="wall_hit_penalty", data=0.1)
    data.add_data(name="tag_reward_for_tagger", data=10.0)
    data.add_data(name="tag_penalty_for_runner", data=2.0)
    data.add_data(name="step_cost_for_tagger", data=0.01)
    data.add_data(name="world_boundary", data=L)
    data.add_data(name="use_full_observation", data=use_full_observation)
    data.add_data(name="loc_x", data=np.array(loc_x), save_copy_and_apply_at_reset=True)
    data.add_data(name="loc_y", data=np.array(loc_y), save_copy_and_apply_at_reset=True)
    dm.push_data_to_device(data)
    obs_size = 4 * num_agents + 1 if use_full_observation else 6
    tensor = DataFeed()
    tensor.add_data(name=Constants.REWARDS, data=np.zeros((num_envs, num_agents)))
    tensor.add_data(name=Constants.OBSERVATIONS, data=np.zeros((num_envs, num_agents, obs_size), dtype=np.float32))
    tensor.add_data(name=Constants.ACTIONS, data=np.zeros((num_envs, num_agents), dtype=np.int64))
    dm.push_data_to_device(tensor, torch_accessible=True)


def _cuda_tag_gridworld_step(fm, dm, resetter):
    """The test's cuda_tag_gridworld_step: reset done envs, then WarpDrive's launch of the step."""
    from warp_drive.utils.constants import Constants

    resetter.reset_when_done(dm)
    step = fm.get_function("CudaTagGridWorldStep")
    step(dm.device_data("loc_x"), dm.device_data("loc_y"), dm.device_data(Constants.ACTIONS),
         dm.device_data("_done_"), dm.device_data(Constants.REWARDS), dm.device_data(Constants.OBSERVATIONS),
         dm.device_data("wall_hit_penalty"), dm.device_data("tag_reward_for_tagger"),
         dm.device_data("tag_penalty_for_runner"), dm.device_data("step_cost_for_tagger"),
         dm.device_data("use_full_observation"), dm.device_data("world_boundary"), dm.device_data("_timestep_"),
         dm.meta_info("episode_length"), block=fm.block, grid=fm.grid)


def _sample(dm, sampler, chosen):
    """Sample from one-hot distributions (each agent's action is certain), as the test does."""
    from warp_drive.utils.constants import Constants

    device = dm.data_on_device_via_torch(Constants.ACTIONS).device  # the test's .cuda() on a GPU
    distribution = torch.from_numpy(np.eye(5)[np.array(chosen)]).float().to(device)
    sampler.sample(dm, distribution, action_name=Constants.ACTIONS)


def _pulled(dm):
    from warp_drive.utils.constants import Constants

    return (dm.pull_data_from_device(Constants.REWARDS), dm.pull_data_from_device(Constants.OBSERVATIONS),
            dm.pull_data_from_device(Constants.ACTIONS), dm.pull_data_from_device("_done_"))


def full_observations_times_l(x, y, t_over_T=1.0):
    """Each env's full observations times L (the test multiplies by 4): for agent a, the cells of all
    agents, their types (runner last), a one-hot of a, and t / episode_length."""
    x, y = np.asarray(x, float), np.asarray(y, float)
    rows = []
    for xe, ye in zip(x, y):
        rows.append([np.concatenate([xe, ye, L * TYPES, L * np.eye(N)[a], [L * t_over_T]]) for a in range(N)])
    return np.array(rows)


# The starts (env, agent), the actions of the two steps, and where they lead by TagGridWorld's rules:
# move by (stay, +x, -x, +y, -y), clip to [0, 4] paying 0.1 per clipped axis; a tagger on the runner's
# cell tags it (taggers +10, the runner -2), otherwise taggers pay 0.01 and the runner earns it.
START_X = [[0, 0, 0, 0, 1], [1, 3, 3, 1, 0]]
START_Y = [[0, 0, 0, 0, 1], [1, 1, 3, 3, 1]]
ACTIONS_1 = [[2, 0, 3, 4, 2], [1, 3, 2, 4, 1]]
# env 0: taggers 0 and 3 hit a wall; tagger 2 moves up onto the runner's new cell (0, 1): a tag.
# env 1: nobody meets; the episode (1 step) ends at the time limit.
X_1, Y_1 = [[0, 0, 0, 0, 0], [2, 3, 2, 1, 1]], [[0, 0, 1, 0, 1], [1, 2, 3, 2, 1]]
REWARDS_1 = [[9.9, 10.0, 10.0, 9.9, -2.0], [-0.01, -0.01, -0.01, -0.01, 0.01]]
ACTIONS_2 = [[1, 2, 3, 4, 3], [2, 1, 0, 4, 0]]
# Both envs restarted from their starts. env 0: taggers 1 and 3 hit a wall, no tag.
# env 1: tagger 0 steps left onto the runner, who stays at (0, 1): a tag.
X_2, Y_2 = [[1, 0, 0, 0, 1], [0, 4, 3, 1, 0]], [[0, 0, 1, 0, 2], [1, 1, 3, 2, 1]]
REWARDS_2 = [[-0.01, -0.11, -0.01, -0.11, 0.01], [10.0, 10.0, 10.0, 10.0, -2.0]]


def test_tag_gridworld_step_cuda_as_written():
    from warp_drive.utils.constants import Constants

    dm, fm, resetter, sampler = _managers()
    _int_step(dm, fm, START_X, START_Y)

    sampler.register_actions(dm, action_name=Constants.ACTIONS, num_actions=5)
    _sample(dm, sampler, ACTIONS_1)
    _cuda_tag_gridworld_step(fm, dm, resetter)
    rewards, observations, actions, done = _pulled(dm)
    assert np.absolute(rewards - REWARDS_1).max() < 1e-5
    assert np.absolute(observations.reshape(*observations.shape[:2], -1) * 4
                       - full_observations_times_l(X_1, Y_1)).max() < 1e-5
    assert np.absolute(actions - ACTIONS_1).max() < 1e-5
    assert list(done) == [1, 1]  # env 0 tagged, env 1 at the time limit: WarpDrive's 1 for both

    _sample(dm, sampler, ACTIONS_2)
    _cuda_tag_gridworld_step(fm, dm, resetter)  # resets both envs first
    rewards, observations, actions, done = _pulled(dm)
    assert np.absolute(rewards - REWARDS_2).max() < 1e-5
    assert np.absolute(observations.reshape(*observations.shape[:2], -1) * 4
                       - full_observations_times_l(X_2, Y_2)).max() < 1e-5
    assert np.absolute(actions - ACTIONS_2).max() < 1e-5
    assert list(done) == [1, 1]


@pytest.mark.parametrize("backend", [
    None,
    # the GPU-shaped cpu executor: one thread per agent and real barriers, as on a GPU (its own build)
    pytest.param("cpu-gpu", marks=pytest.mark.slow),
    pytest.param("pycuda", marks=pytest.mark.gpu),
])
@pytest.mark.parametrize("use_full_observation", [True, False])
def test_the_warpdrive_kernel_steps_as_the_envs_own_kernel(use_full_observation, backend):
    """CudaTagGridWorldStep and TagGridWorldStep (the env's kernel, with its agent types and count),
    from the same state with the same actions: the same bits in every array, partial observations
    (nearest tagger) included; done differs only where the env truncates (2 here, 1 in WarpDrive's)."""
    from warp_drive.utils.constants import Constants

    num_envs, episode_length, steps = 2, 3, 12
    rng = np.random.default_rng(7)
    start_x, start_y = rng.integers(0, L + 1, (2, num_envs, N))
    dm, fm, resetter, sampler = _managers(num_envs=num_envs, episode_length=episode_length, backend=backend)
    _int_step(dm, fm, start_x, start_y, use_full_observation=use_full_observation)
    sampler.register_actions(dm, action_name=Constants.ACTIONS, num_actions=5)
    ours = fm.get_function("TagGridWorldStep")  # in the same build: the included env's kernel
    device = dm.data_on_device_via_torch(Constants.ACTIONS).device
    loc_x, loc_y = start_x.astype(np.int32), start_y.astype(np.int32)
    timestep, done_ours = np.zeros(num_envs, np.int32), np.zeros(num_envs, np.int32)
    seen = set()
    for _ in range(steps):
        chosen = rng.integers(0, 5, (num_envs, N))
        _sample(dm, sampler, chosen)
        # the env's own kernel on copies of the state
        x, y, t, done, actions, types = (torch.from_numpy(a.astype(np.int32)).to(device) for a in (
            loc_x, loc_y, timestep, done_ours, chosen, TYPES))
        rewards = torch.zeros(num_envs, N, device=device)
        observations = torch.zeros(dm.pull_data_from_device(Constants.OBSERVATIONS).shape, device=device)
        ours(x, y, actions, types, rewards, observations, np.float32(0.1), np.float32(10.0), np.float32(2.0),
             np.float32(0.01), np.int32(use_full_observation), np.int32(L), done, t, np.int32(N),
             np.int32(episode_length), block=fm.block, grid=fm.grid)
        x, y, t, done, rewards, observations = (a.cpu() for a in (x, y, t, done, rewards, observations))
        before = dm.pull_data_from_device("_done_")
        assert not before.any()
        _cuda_tag_gridworld_step(fm, dm, resetter)
        np.testing.assert_array_equal(dm.pull_data_from_device("loc_x"), x.numpy())
        np.testing.assert_array_equal(dm.pull_data_from_device("loc_y"), y.numpy())
        np.testing.assert_array_equal(dm.pull_data_from_device(Constants.REWARDS), rewards.numpy())
        np.testing.assert_array_equal(dm.pull_data_from_device(Constants.OBSERVATIONS), observations.numpy())
        np.testing.assert_array_equal(dm.pull_data_from_device("_timestep_"), t.numpy())
        np.testing.assert_array_equal(dm.pull_data_from_device("_done_"), np.minimum(done.numpy(), 1))
        seen.update(done.numpy().tolist())
        # carry on from the kernel's state; envs that ended restart from their starts in both
        ended = done.numpy() > 0
        resetter.reset_when_done(dm)
        loc_x = np.where(ended[:, None], start_x, x.numpy()).astype(np.int32)
        loc_y = np.where(ended[:, None], start_y, y.numpy()).astype(np.int32)
        timestep = np.where(ended, 0, t.numpy()).astype(np.int32)
        done_ours = np.zeros(num_envs, np.int32)
    assert seen == {0, 1, 2}, seen  # steps that went on, tags, and time limits (translated to 1)


def test_the_upload_of_another_move_table_is_refused_naming_the_kernel():
    dm, fm, _, _ = _managers()
    with pytest.raises(ValueError, match=r"'kIndexToActionArr': kernel .*CudaTagGridWorldStep holds this table"):
        _int_step(dm, fm, START_X, START_Y, move_table=[[0, 0], [0, 1], [0, -1], [1, 0], [-1, 0]])


def test_more_agents_than_the_types_array_holds_stop_with_the_limit_and_the_fix():
    from warp_drive.runtime.backends.errors import KernelLaunchError

    n = 4097
    dm, fm, resetter, _ = _managers(num_agents=n, num_envs=1)
    _int_step(dm, fm, np.zeros((1, n), np.int32), np.zeros((1, n), np.int32))
    with pytest.raises(KernelLaunchError, match=r"CudaTagGridWorldStep: more agents than WD_COMPAT_TAG_GRIDWORLD_MAX"
                                                r"_AGENTS \(4096\); run TagGridWorld .*through EnvWrapper"):
        _cuda_tag_gridworld_step(fm, dm, resetter)
