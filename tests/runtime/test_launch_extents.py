"""Launches refuse arrays that cannot hold what the kernel touches: empty tensors,
arrays smaller than the env's declared spaces, tensors resized or re-pointed
after bind(), and out-of-range actions (real kernels on the cpu executor)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from example_envs.dummy_env.dummy_env import DummyEnv
from warp_drive.adapters import GymnasiumVectorEnv
from warp_drive.runtime.backends import get_backend
from warp_drive.runtime.backends.arguments import VERIFY_EVERY, StaleArgumentError
from warp_drive.runtime.backends.base import KernelLaunchError
from warp_drive.env_wrapper import EnvWrapper

KERNELS = Path(__file__).parents[1] / "kernels"


@pytest.fixture(scope="module")
def backend():
    return get_backend("cpu")


def add_step(backend):
    return backend.build([KERNELS / "arguments.cu"]).get_function("add_step")


def test_zero_size_tensor_is_refused_at_bind_naming_the_parameter(backend):
    fn = add_step(backend)
    with pytest.raises(KernelLaunchError, match=r"add_step: parameter 0 'int \* out'.*empty tensor.*at least one"):
        fn.bind(torch.zeros(0, dtype=torch.int32), 1)


@pytest.mark.parametrize("change", ["resize", "set"])
def test_tensor_resized_or_replaced_after_bind_fails_the_next_launch(backend, change):
    fn = add_step(backend)
    out = torch.zeros(32, dtype=torch.int32)
    bound = fn.bind(out, 1)
    if change == "resize":
        out.resize_(1 << 20)  # grows: the storage is reallocated, the bound pointer is freed memory
    else:
        out.set_(torch.zeros(64, dtype=torch.int32))
    with pytest.raises(StaleArgumentError, match=r"add_step: parameter 0 'int \* out'.*(resized|other memory).*bind"):
        bound.launch(1, 32)


def test_a_later_resize_is_caught_within_verify_every_launches(backend):
    fn = add_step(backend)
    out = torch.zeros(32, dtype=torch.int32)
    bound = fn.bind(out, 1)
    bound.launch(1, 32)
    out.resize_(16)  # shrinks: same memory, but torch's view of it no longer matches the kernel's
    with pytest.raises(StaleArgumentError, match="resized from 32 to 16 elements"):
        for _ in range(VERIFY_EVERY):
            bound.launch(1, 16)


class SmallObservationsEnv(DummyEnv):
    """DummyEnv declaring 2 observation values per agent but allocating 1: its kernel writes 2."""

    def get_data_dictionary(self, num_envs):
        feed = super().get_data_dictionary(num_envs)
        feed["observations"]["data"] = np.zeros((num_envs, self.num_agents, 1), np.float32)
        return feed

    def get_reset_pools(self, pool_size, rng):
        return {}


def test_array_smaller_than_the_declared_space_is_refused_before_any_launch():
    with pytest.raises(ValueError, match=r"'observations' has shape \(4, 3, 1\).*agent 0 .*space.* of 2: wider than the array.*Fix"):
        EnvWrapper(SmallObservationsEnv(num_agents=3), 4, backend="cpu", seed=0)


@pytest.mark.parametrize("change", ["resize", "set"])
def test_env_array_resized_or_replaced_after_bind_fails_the_next_step(change):
    wrapper = EnvWrapper(DummyEnv(num_agents=3), 4, backend="cpu", seed=0)
    wrapper.step_all_envs()
    if change == "resize":
        wrapper.rewards.resize_(4, 3, 1000)
    else:
        wrapper.rewards.set_(torch.zeros(4, 3))
    with pytest.raises(StaleArgumentError, match=r"DummyEnvStep: parameter 3 .*array 'rewards'"):
        wrapper.step_all_envs()


def test_out_of_range_action_through_env_wrapper_on_tag_continuous():
    wrapper = EnvWrapper("TagContinuous", 2, backend="cpu", seed=0,
                         env_config={"num_taggers": 1, "num_runners": 2, "episode_length": 10})
    wrapper.step_all_envs()
    wrapper.actions[1, 2, 0] = 100000
    with pytest.raises(ValueError, match=r"env 1, agent 2, head 0\) is outside agent 2's action space.*valid actions "
                                         r"are 0\.\.\d+"):
        wrapper.step_all_envs()
    wrapper.actions[1, 2, 0] = -1
    with pytest.raises(ValueError, match="= -1"):
        wrapper.step_all_envs()
    wrapper.actions.zero_()
    wrapper.step_all_envs()


def test_out_of_range_torch_action_through_the_gymnasium_adapter():
    env = GymnasiumVectorEnv("CartPole", 4, backend="cpu", seed=0, device_tensors=True)
    env.reset(seed=0)
    env.step(torch.tensor([0, 1, 1, 0], dtype=torch.int32))
    with pytest.raises(ValueError, match=r"agent 0, env 2: action \[2\] is outside the action space Discrete\(2\) "
                                         r"\(valid values: 0\.\.1\)"):
        env.step(torch.tensor([0, 1, 2, 0], dtype=torch.int32))
    with pytest.raises(ValueError, match=r"env 0: action \[-3\].*0\.\.1"):
        env.step(torch.tensor([-3, 1, 1, 0]))
    host = GymnasiumVectorEnv("CartPole", 4, backend="cpu", seed=0)
    host.reset(seed=0)
    with pytest.raises(ValueError, match=r"agent 0, env 3: action \[7\].*valid values: 0\.\.1"):
        host.step(np.array([0, 1, 1, 7]))
