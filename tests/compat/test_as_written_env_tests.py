"""WarpDrive 2.7.1's own env tests as written (issue 30), on the cpu executor.

WarpDrive's ``tests/example_envs/pycuda_tests/``:

* ``test_tag_gridworld.py``: ``EnvironmentCPUvsGPU(cpu_env_class=TagGridWorld,
  cuda_env_class=CUDATagGridWorld, ..., use_gpu_testing_mode=True)`` with the
  checker's default backend, then ``test_env_reset_and_step()``;
* ``test_tag_continuous.py``: ``dual_mode_env_class=TagContinuous``, backend
  ``"pycuda"`` (``"cpu"`` here), ``test_env_reset_and_step(seed=274880)``;
* ``test_tag_gridworld_step_python.py``: ``tag_gridworld.TagGridWorld(...)``,
  ``reset()``, ``step(actions dict)`` -> observation, reward and done dicts,
  ``done["__all__"]``, against values worked out by hand from the rules.

Each test below makes those calls with those arguments in that order. The
Python side is this project's env class through its single-env NumPy reference
(``Environment.reset``/``step``); ``CUDATagGridWorld`` is WarpDrive's name,
kept in ``warp_drive.compat.example_envs``. The tests after them show that the
calls compare something: a wrong Python step, or a different WarpDrive action
table, fails.
"""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from example_envs.tag_continuous.tag_continuous import TagContinuous
from example_envs.tag_gridworld import tag_gridworld
from example_envs.tag_gridworld.tag_gridworld import CUDATagGridWorld, TagGridWorld
from warp_drive.env_cpu_gpu_consistency_checker import EnvironmentCPUvsGPU
from warp_drive.env_wrapper import EnvWrapper

GRIDWORLD_CONFIGS = {
    name: {"num_taggers": 4, "grid_length": 4, "episode_length": 20, "seed": 27, "wall_hit_penalty": 0.1,
           "tag_reward_for_tagger": 10.0, "tag_penalty_for_runner": 2.0, "step_cost_for_tagger": 0.01,
           "use_full_observation": full}
    for name, full in (("test1", True), ("test2", False))
}

CONTINUOUS_CONFIGS = {
    "test1": {"num_taggers": 2, "num_runners": 3, "max_acceleration": 1, "max_turn": np.pi / 4,
              "num_acceleration_levels": 3, "num_turn_levels": 3, "grid_length": 10, "episode_length": 100,
              "seed": 274880, "skill_level_runner": 1, "skill_level_tagger": 1, "use_full_observation": True,
              "runner_exits_game_after_tagged": True, "tagging_distance": 0.0},
    "test2": {"num_taggers": 4, "num_runners": 1, "max_acceleration": 0.05, "max_turn": np.pi / 4,
              "num_acceleration_levels": 3, "num_turn_levels": 3, "grid_length": 10, "episode_length": 100,
              "step_penalty_for_tagger": -0.1, "seed": 428096, "skill_level_runner": 1, "skill_level_tagger": 2,
              "use_full_observation": False, "runner_exits_game_after_tagged": False, "tagging_distance": 0.25},
    "test3": {"num_taggers": 1, "num_runners": 4, "max_acceleration": 2, "max_turn": np.pi / 2,
              "num_acceleration_levels": 3, "num_turn_levels": 3, "grid_length": 10, "episode_length": 100,
              "step_reward_for_runner": 0.1, "seed": 654208, "skill_level_runner": 1, "skill_level_tagger": 0.5,
              "use_full_observation": False, "runner_exits_game_after_tagged": True},
    "test4": {"num_taggers": 3, "num_runners": 2, "max_acceleration": 0.05, "max_turn": np.pi,
              "num_acceleration_levels": 3, "num_turn_levels": 3, "grid_length": 10, "episode_length": 100,
              "seed": 121024, "skill_level_runner": 0.5, "skill_level_tagger": 1, "use_full_observation": True,
              "runner_exits_game_after_tagged": False},
}


# ----------------------------------------------------------------------------- test_tag_gridworld.py
def test_tag_gridworld_consistency_as_written():
    checker = EnvironmentCPUvsGPU(cpu_env_class=TagGridWorld, cuda_env_class=CUDATagGridWorld,
                                  env_configs=GRIDWORLD_CONFIGS, num_envs=2, num_episodes=2,
                                  use_gpu_testing_mode=True)
    checker.test_env_reset_and_step()


# ----------------------------------------------------------------------------- test_tag_continuous.py
def test_tag_continuous_consistency_as_written():
    checker = EnvironmentCPUvsGPU(dual_mode_env_class=TagContinuous, env_configs=CONTINUOUS_CONFIGS,
                                  gpu_env_backend="cpu", num_envs=2, num_episodes=2, use_gpu_testing_mode=True)
    checker.test_env_reset_and_step(seed=274880)


# ----------------------------------------------------------------------------- test_tag_gridworld_step_python.py
def full_observations(x, y, t, episode_length=10, grid_length=4):
    """Every agent's full observation, times grid_length: cells, types (runner last), one-hot self, time."""
    n = len(x)
    types = [0.0] * (n - 1) + [1.0]
    rows = [list(x) + list(y) + types + [float(i == a) for i in range(n)] + [t / episode_length] for a in range(n)]
    return np.array(rows) * np.array([1.0] * (2 * n) + [grid_length] * (2 * n + 1))


def step_as_written(env, actions):
    observations, rewards, done, _ = env.step(actions)
    observations_update = np.array([obs for _, obs in observations.items()])
    rewards_update = np.array([rew for _, rew in rewards.items()])
    return observations_update, rewards_update, done["__all__"]


def test_gridworld_python_step_case_1_as_written():
    env = tag_gridworld.TagGridWorld(num_taggers=4, grid_length=4, episode_length=10,
                                     starting_location_x=np.array([0, 0, 0, 0, 1]),
                                     starting_location_y=np.array([0, 0, 0, 0, 1]), wall_hit_penalty=0.1,
                                     tag_reward_for_tagger=10.0, tag_penalty_for_runner=2.0,
                                     step_cost_for_tagger=0.01)
    env.reset()
    # Tagger 0 and 3 walk into a wall (-x at x=0, -y at y=0); tagger 2 steps onto the runner's new cell (0, 1).
    obs, rew, done = step_as_written(env, {0: 2, 1: 0, 2: 3, 3: 4, 4: 2})
    assert np.abs(rew - np.array([9.9, 10.0, 10.0, 9.9, -2.0])).max() < 1e-5
    assert np.abs(obs.reshape(5, -1) * 4 - full_observations([0, 0, 0, 0, 0], [0, 0, 1, 0, 1], 1)).max() < 1e-5
    assert done == True  # noqa: E712 (WarpDrive's assertEqual(done, True))


def test_gridworld_python_step_case_2_as_written():
    env = tag_gridworld.TagGridWorld(num_taggers=4, grid_length=4, episode_length=10,
                                     starting_location_x=np.array([1, 3, 3, 1, 0]),
                                     starting_location_y=np.array([1, 1, 3, 3, 1]), wall_hit_penalty=0.1,
                                     tag_reward_for_tagger=10.0, tag_penalty_for_runner=2.0,
                                     step_cost_for_tagger=0.01)
    first = env.reset()
    assert np.abs(np.array(list(first.values())) * 4
                  - full_observations([1, 3, 3, 1, 0], [1, 1, 3, 3, 1], 0)).max() < 1e-5
    # No tag: every tagger pays the step cost, the runner earns it.
    obs, rew, done = step_as_written(env, {0: 1, 1: 3, 2: 2, 3: 4, 4: 1})
    assert np.abs(rew - np.array([-0.01, -0.01, -0.01, -0.01, 0.01])).max() < 1e-5
    assert np.abs(obs.reshape(5, -1) * 4 - full_observations([2, 3, 2, 1, 1], [1, 2, 3, 2, 1], 1)).max() < 1e-5
    assert done == False  # noqa: E712
    # Tagger 0 steps onto the runner, who stays: a tag, every tagger +10, the runner -2.
    obs, rew, done = step_as_written(env, {0: 2, 1: 1, 2: 0, 3: 4, 4: 0})
    assert np.abs(rew - np.array([10.0, 10.0, 10.0, 10.0, -2.0])).max() < 1e-5
    assert np.abs(obs.reshape(5, -1) * 4 - full_observations([1, 4, 2, 1, 1], [1, 2, 3, 1, 1], 2)).max() < 1e-5
    assert done == True  # noqa: E712


# ----------------------------------------------------------------------------- the calls compare something
class _GridWorldOffByOne(TagGridWorld):
    """A Python step that pays the runner a wrong reward (the kernel is TagGridWorld's)."""

    def reference_step(self, arrays):
        super().reference_step(arrays)
        arrays["rewards"][:, -1] += 1.0


class _ContinuousWrongObservation(TagContinuous):
    def reference_step(self, arrays):
        super().reference_step(arrays)
        arrays["observations"][:, 0, 0] += 0.5


def test_the_checker_catches_a_wrong_python_step():
    checker = EnvironmentCPUvsGPU(cpu_env_class=_GridWorldOffByOne, cuda_env_class=CUDATagGridWorld,
                                  env_configs={"test1": GRIDWORLD_CONFIGS["test1"]}, num_envs=2, num_episodes=1,
                                  use_gpu_testing_mode=True)
    with pytest.raises(AssertionError, match=r"test1: step 1: array 'rewards', env 0, agent 4"):
        checker.test_env_reset_and_step()


def test_the_checker_catches_a_wrong_python_step_of_an_env_with_random_starts():
    # TagContinuous draws its starts from reset pools on the device: the Python envs start from the kernel's
    # start states, and what is compared is the step.
    config = dict(CONTINUOUS_CONFIGS["test4"], episode_length=5)
    checker = EnvironmentCPUvsGPU(cpu_env_class=_ContinuousWrongObservation, cuda_env_class=TagContinuous,
                                  env_configs={"test4": config}, gpu_env_backend="cpu", num_envs=2, num_episodes=1)
    with pytest.raises(AssertionError, match=r"test4: step 1: array 'observations', env 0, agent 0, feature \(0,\)"):
        checker.test_env_reset_and_step(seed=1)


def test_warpdrives_action_table_is_accepted_when_it_is_the_kernels_and_refused_otherwise():
    env_wrapper = EnvWrapper(CUDATagGridWorld(**GRIDWORLD_CONFIGS["test1"]), num_envs=2, env_backend="cpu")
    # The example training script's lines.
    kIndexToActionArr = env_wrapper.env.step_actions
    env_wrapper.env.cuda_data_manager.add_shared_constants({"kIndexToActionArr": kIndexToActionArr})
    env_wrapper.env.cuda_function_manager.initialize_shared_constants(
        env_wrapper.env.cuda_data_manager, constant_names=["kIndexToActionArr"])
    assert env_wrapper.env.cuda_data_manager is env_wrapper.cuda_data_manager
    assert env_wrapper.env.cuda_function_manager is env_wrapper.cuda_function_manager

    other = EnvWrapper(CUDATagGridWorld(**GRIDWORLD_CONFIGS["test1"]), num_envs=2, env_backend="cpu")
    swapped = np.array([[0, 0], [-1, 0], [1, 0], [0, 1], [0, -1]], np.int32)  # +x and -x exchanged
    other.env.cuda_data_manager.add_shared_constants({"kIndexToActionArr": swapped})
    with pytest.raises(ValueError, match=r"'kIndexToActionArr': kernel TagGridWorldStep holds this table built in"):
        other.env.cuda_function_manager.initialize_shared_constants(other.env.cuda_data_manager,
                                                                    constant_names=["kIndexToActionArr"])


def test_the_checker_refuses_a_step_actions_table_the_kernel_does_not_hold():
    class Swapped(CUDATagGridWorld):
        def __init__(self, **config):
            super().__init__(**config)
            self.step_actions = self.step_actions[[0, 2, 1, 3, 4]]

    checker = EnvironmentCPUvsGPU(cpu_env_class=TagGridWorld, cuda_env_class=Swapped,
                                  env_configs={"test1": GRIDWORLD_CONFIGS["test1"]}, num_envs=2, num_episodes=1)
    with pytest.raises(ValueError, match="kIndexToActionArr"):
        checker.test_env_reset_and_step()


def test_the_kept_name_is_the_compat_subclass_and_loaded_only_when_asked_for():
    from warp_drive.compat.example_envs import CUDATagGridWorld as compat_class

    assert CUDATagGridWorld is compat_class and issubclass(CUDATagGridWorld, TagGridWorld)
    assert tag_gridworld.CUDATagGridWorld is compat_class
    with pytest.raises(AttributeError, match="has no attribute 'CUDATagGridWorldX'"):
        tag_gridworld.CUDATagGridWorldX  # noqa: B018
    code = ("import sys, example_envs.tag_gridworld.tag_gridworld as m; "
            "assert not [k for k in sys.modules if k.startswith('warp_drive.compat')], 'compat imported'; "
            "m.CUDATagGridWorld; assert 'warp_drive.compat.example_envs' in sys.modules")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]


def test_a_warpdrive_style_env_keeps_its_own_reset_and_step_behind_the_wrapper(clean_registrar):
    """Environment's single-env reset/step do not shadow a WarpDrive-style env's own (env_wrapper.env.reset())."""
    from warpdrive_style.line_chase import CUDA_SOURCE, LineChase

    from warp_drive.utils.env_registrar import EnvironmentRegistrar

    registrar = EnvironmentRegistrar()
    registrar.add_cuda_env_src_path(LineChase.name, CUDA_SOURCE, env_backend="pycuda")
    config = dict(num_agents=4, episode_length=12, grid_length=10.0, goal=5.0, tolerance=0.75,
                  speeds=[0.5, 1.0, 0.75, 0.25], starting_locations=[1.0, 9.0, 4.0, 6.0])
    env_wrapper = EnvWrapper(env_obj=LineChase(**config), num_envs=2, env_backend="cpu", env_registrar=registrar)
    own = LineChase(**config).reset()
    again = env_wrapper.env.reset()
    assert sorted(again) == sorted(own) and all(np.array_equal(again[a], own[a]) for a in own)
    assert env_wrapper.env.single_env_arrays is None  # Environment's single-env replica was never built
