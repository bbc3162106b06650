"""The framework owns the clock for envs that say so (``framework_clock``): ``_timestep_`` advanced before the
step kernel, ``_done_ = 2`` at ``episode_length`` after it where the kernel set no done; on the device (the
wrapper and the one-replica host API) and around the NumPy reference (the checker and the host API). Kernels
that keep their own clock (the default) are left alone."""

from __future__ import annotations

import numpy as np
import pytest

from example_envs.dummy_env.dummy_env import DummyEnv
from warp_drive.env.consistency import check
from warp_drive.runtime.data_manager import DataManager
from warp_drive.env.environment import Environment
from warp_drive.services.env_clock import DeviceClock
from warp_drive.runtime.function_manager import FunctionManager
from warp_drive.env.wrapper import EnvWrapper


class KernelOnly(DummyEnv):
    """DummyEnv with no reference: the host API runs its kernel on the cpu executor."""

    name = "KernelOnlyClock"
    reference_step = Environment.reference_step


def test_the_clock_kernels_tick_before_and_truncate_after():
    dm = DataManager(num_envs=4, num_agents=1, episode_length=5, backend="cpu")
    fm = FunctionManager(4, 1, None, dm.backend)
    clock = DeviceClock(fm, dm)
    dm.data_on_device_via_torch("_timestep_").copy_(dm.data_on_device_via_torch("_timestep_").new_tensor([4, 4, 1, 5]))
    dm.data_on_device_via_torch("_done_").copy_(dm.data_on_device_via_torch("_done_").new_tensor([0, 1, 0, 0]))
    clock.tick()
    assert dm.pull_data_from_device("_timestep_").tolist() == [5, 5, 2, 6]
    clock.truncate()
    # env 0 reached the limit: truncated; env 1 terminated on the last step: stays terminated; env 2 runs on
    assert dm.pull_data_from_device("_done_").tolist() == [2, 1, 0, 2]


@pytest.mark.parametrize("tolerance, done", [(-1.0, 2), (10.0, 1)])
def test_dummy_env_kernel_leaves_the_clock_to_the_framework(tolerance, done):
    """DummyEnv's kernel never writes _timestep_ nor truncates: the framework does, and a termination on the
    step that reaches the limit stays a termination."""
    assert DummyEnv.framework_clock
    source = DummyEnv.cuda_source_path().read_text()
    assert "timestep[env] =" not in source and "done[env] = 2" not in source
    wrapper = EnvWrapper(DummyEnv, 3, backend="cpu", seed=0,
                         env_config={"episode_length": 3, "tolerance": tolerance, "random_starts": False})
    seen = []
    for _ in range(3):
        wrapper.actions.fill_(1)  # stay
        wrapper.step_all_envs()
        seen.append((wrapper.data_manager.pull_data_from_device("_timestep_").tolist(), wrapper.done.tolist()))
    if done == 2:
        assert seen == [([1] * 3, [0] * 3), ([2] * 3, [0] * 3), ([3] * 3, [2] * 3)]
    else:  # every value within 10 of the target at once: terminated at the first step
        assert seen[0] == ([1] * 3, [1] * 3)
    np.testing.assert_array_equal(wrapper.obs.numpy()[..., 1], np.float32(1.0))  # the kernel read t = 3 of 3


def test_the_checker_applies_the_clock_around_the_reference():
    """DummyEnv's reference neither counts steps nor truncates; the checker's clock makes it agree with the
    kernel bit for bit, over truncated and terminated episodes."""
    reports = check(DummyEnv, [{"num_agents": 3, "episode_length": 6}, {"num_agents": 2, "tolerance": 2.0, "episode_length": 4}],
                    num_envs=3, num_episodes=3)
    assert sum(r.truncated for r in reports) > 0 and sum(r.terminated for r in reports) > 0


@pytest.mark.parametrize("env_class", [DummyEnv, KernelOnly])
def test_the_host_api_runs_the_clock_with_or_without_a_reference(env_class):
    env = env_class(num_agents=2, episode_length=3, tolerance=-1.0, random_starts=False)
    env.reset(seed=0)
    results = [env.step({0: 2, 1: 2}) for _ in range(3)]
    assert [int(env.single_env_arrays["_timestep_"][0])] == [3]
    assert [r[2]["__all__"] for r in results] == [False, False, True]
    assert results[-1][3] == {"terminated": False, "truncated": True}
    np.testing.assert_array_equal(results[0][0][0], np.float32([0.25, 1 / 3]))


def test_an_env_that_keeps_its_own_clock_is_left_alone():
    """The default: a kernel that advances _timestep_ itself (TagGridWorld, WarpDrive-style kernels) gets no
    second tick."""
    wrapper = EnvWrapper("TagGridWorld", 2, backend="cpu", seed=0, env_config={"num_taggers": 1, "episode_length": 4})
    assert not wrapper.env.framework_clock and wrapper._clock is None
    for t in range(1, 5):
        wrapper.actions.zero_()
        wrapper.step_all_envs()
        assert wrapper.data_manager.pull_data_from_device("_timestep_").tolist() == [t, t]
    assert wrapper.done.tolist() == [2, 2]
