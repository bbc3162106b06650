"""EnvWrapper, the consistency checker, and registering environments from outside the package."""

from __future__ import annotations

import importlib.util
import sys
import textwrap

import numpy as np
import pytest

from example_envs.dummy_env.dummy_env import DummyEnv
from warp_drive.env import registry
from warp_drive.runtime.backends import KernelBuildError
from warp_drive.env.consistency import ConsistencyError, check
from warp_drive.env_wrapper import EnvWrapper


def test_wrapper_exposes_the_kernels_tensors(backend_name):
    w = EnvWrapper(DummyEnv, num_envs=6, backend=backend_name, seed=1, env_config={"num_agents": 3})
    dm = w.data_manager
    assert w.obs is dm.data_on_device_via_torch("observations") and w.obs.shape == (6, 3, 2)
    assert w.rewards is dm.data_on_device_via_torch("rewards") and w.rewards.shape == (6, 3)
    assert w.done is dm.data_on_device_via_torch("_done_") and w.done.shape == (6,)
    before = dm.pull_data_from_device("values")
    w.actions.fill_(2)  # "up"
    w.step_all_envs()
    after = dm.pull_data_from_device("values")
    np.testing.assert_allclose(after, before + 0.25, rtol=0, atol=1e-6)
    np.testing.assert_allclose(w.rewards.cpu().numpy(), -np.abs(after - 1.0), atol=1e-6)
    assert (dm.pull_data_from_device("_timestep_") == 1).all()
    assert w.observation_spaces[0].shape == (2,) and w.action_spaces[2].n == 3


def test_terminated_and_truncated_are_distinguished():
    # Fixed start 0, target 1, steps of 0.5: "up" twice terminates; "stay" runs into the time limit.
    w = EnvWrapper(DummyEnv, num_envs=2, backend="cpu", seed=0,
                   env_config={"num_agents": 2, "episode_length": 3, "step_size": 0.5, "random_starts": False})
    w.actions[0] = 2
    w.actions[1] = 1
    for _ in range(3):
        w.step_all_envs()
        if bool(w.done[0]):
            break
    assert w.terminated.tolist() == [True, False]
    w.step_all_envs()
    w.step_all_envs()
    assert w.truncated[1] and int(w.done[1]) == 2


def test_only_done_envs_are_reset_and_random_starts_differ():
    w = EnvWrapper(DummyEnv, num_envs=4, backend="cpu", seed=3, env_config={"num_agents": 5})
    dm = w.data_manager
    start = dm.pull_data_from_device("values")
    assert len({tuple(row) for row in start}) == 4  # each env drew its own start
    w.actions.fill_(2)
    w.step_all_envs()
    stepped = dm.pull_data_from_device("values")
    dm.data_on_device_via_torch("_done_")[[1, 3]] = 2
    w.reset_only_done_envs()
    now = dm.pull_data_from_device("values")
    np.testing.assert_array_equal(now[[0, 2]], stepped[[0, 2]])  # untouched
    assert not np.array_equal(now[[1, 3]], stepped[[1, 3]])
    assert not np.array_equal(now[[1, 3]], start[[1, 3]])  # a new start, not the old one
    assert (dm.pull_data_from_device("_done_") == 0).all()
    obs = dm.pull_data_from_device("observations")
    np.testing.assert_array_equal(obs[[1, 3], :, 0], now[[1, 3]])  # obs paired with the new state


def test_same_seed_same_starts_other_seed_other_starts():
    def starts(seed):
        w = EnvWrapper(DummyEnv, num_envs=3, backend="cpu", seed=seed)
        seq = [w.data_manager.pull_data_from_device("values")]
        for _ in range(3):
            w.reset_all_envs()
            seq.append(w.data_manager.pull_data_from_device("values"))
        return np.stack(seq)

    a, b, c = starts(7), starts(7), starts(8)
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, c)
    assert all(not np.array_equal(a[i], a[i + 1]) for i in range(3))


def test_checker_passes_dummy_env_in_several_configurations(env_backend):
    reports = check(DummyEnv, [{}, {"random_starts": False, "num_agents": 1},
                               {"num_agents": 40, "step_size": 1.0, "target": 0.0, "tolerance": 0.6}],
                    num_envs=4, num_episodes=2, backend=env_backend)
    assert [r.steps for r in reports] == [40, 40, 40]
    assert sum(r.terminated for r in reports) > 0 and sum(r.truncated for r in reports) > 0
    assert {"values", "observations", "rewards", "_done_", "_timestep_"} <= set(reports[0].arrays)


class WrongReward(DummyEnv):
    """A reference with a bug the checker must catch: the reward sign."""

    def reference_step(self, arrays):
        super().reference_step(arrays)
        arrays["rewards"][...] = -arrays["rewards"]


def test_checker_reports_the_first_mismatch():
    with pytest.raises(ConsistencyError) as info:
        check(WrongReward, {"random_starts": False}, num_envs=2)
    message = str(info.value)
    assert "step 0" in message and "'rewards'" in message and "env 0, agent 0" in message
    assert "kernel" in message and "reference" in message


def test_checker_draws_new_actions_every_step():
    seen = []

    class Recording(DummyEnv):
        def reference_step(self, arrays):
            seen.append(arrays["sampled_actions"].copy())
            super().reference_step(arrays)

    check(Recording, {"num_agents": 3}, num_envs=2, num_episodes=1)
    assert len({a.tobytes() for a in seen}) > len(seen) // 2


CUSTOM_KERNEL = """
#include <warp_drive/core.h>
extern "C" __global__ void DoublerStep(float* x, float* observations, const int* actions, float* rewards,
                                       int* done, int* timestep, int num_agents, int episode_length) {
  const int env = wd_env_id(), agent = wd_agent_id();
  if (threadIdx.x == 0) timestep[env] += 1;
  wd_sync_env();
  if (agent < num_agents) {
    const int i = wd_agent_index(num_agents);
    x[i] = x[i] * 2.0f + (float)actions[i];
    observations[i] = x[i];
    rewards[i] = x[i];
  }
  if (threadIdx.x == 0 && timestep[env] >= episode_length) done[env] = 2;
}
"""

CUSTOM_MODULE = """
import numpy as np
from gymnasium import spaces
from warp_drive import Environment
from warp_drive.runtime.data_feed import DataFeed

class Doubler(Environment):
    name = "Doubler"
    cuda_source = "doubler.cu"
    step_kernel = "DoublerStep"

    def __init__(self, num_agents=2, episode_length=4):
        self.num_agents, self.episode_length = num_agents, episode_length

    def observation_space(self, agent_id):
        return spaces.Box(-np.inf, np.inf, (1,), np.float32)

    def action_space(self, agent_id):
        return spaces.Discrete(2)

    def get_data_dictionary(self, num_envs):
        feed = DataFeed()
        ones = np.ones((num_envs, self.num_agents), np.float32)
        feed.add_data("x", ones, save_copy_and_apply_at_reset=True)
        feed.add_data("observations", ones[..., None].copy(), save_copy_and_apply_at_reset=True)
        feed.add_data("sampled_actions", np.zeros((num_envs, self.num_agents), np.int32))
        feed.add_data("rewards", np.zeros((num_envs, self.num_agents), np.float32))
        return feed

    def reference_step(self, a):
        a["_timestep_"] += 1
        a["x"][...] = a["x"] * 2 + a["sampled_actions"]
        a["observations"][..., 0] = a["x"]
        a["rewards"][...] = a["x"]
        a["_done_"][...] = np.where(a["_timestep_"] >= a["episode_length"], 2, 0)
"""


def _import_from(path, module_name):
    spec = importlib.util.spec_from_file_location(module_name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def custom_env(tmp_path):
    (tmp_path / "doubler.cu").write_text(CUSTOM_KERNEL)
    (tmp_path / "doubler_env.py").write_text(textwrap.dedent(CUSTOM_MODULE))
    module = _import_from(tmp_path / "doubler_env.py", "doubler_env_under_test")
    yield module.Doubler
    registry._registered.pop("Doubler", None)
    sys.modules.pop("doubler_env_under_test", None)


def test_custom_env_registered_from_outside_the_package(custom_env):
    registry.register_env("Doubler", custom_env)
    assert "Doubler" in registry.registered_envs()
    w = EnvWrapper("Doubler", num_envs=3, backend="cpu", seed=0)
    w.actions.fill_(1)
    w.step_all_envs()
    assert (w.rewards == 3.0).all()
    check("Doubler", {"num_agents": 5, "episode_length": 3}, num_envs=2)
    with pytest.raises(ValueError, match="already registered"):
        registry.register_env("Doubler", custom_env)


def test_custom_env_build_error_names_the_users_file_and_line(custom_env, tmp_path):
    (tmp_path / "doubler.cu").write_text(CUSTOM_KERNEL.replace("x[i] * 2.0f", "x[i] * two"))
    line = CUSTOM_KERNEL.splitlines().index("    x[i] = x[i] * 2.0f + (float)actions[i];") + 1
    with pytest.raises(KernelBuildError) as info:
        EnvWrapper(custom_env, num_envs=1, backend="cpu")
    assert f"doubler.cu:{line}:" in str(info.value) and "two" in str(info.value)


def test_registry_refuses_what_is_not_an_environment(tmp_path):
    with pytest.raises(TypeError, match="subclass of warp_drive.Environment"):
        registry.register_env("Nope", dict)

    class Missing(DummyEnv):
        cuda_source = str(tmp_path / "absent.cu")

    with pytest.raises(FileNotFoundError, match="absent.cu"):
        registry.register_env("Missing", Missing)
    with pytest.raises(KeyError, match="registered: "):
        registry.get_env_class("NoSuchEnv")


def test_wrapper_refuses_an_env_without_required_arrays():
    class NoRewards(DummyEnv):
        def get_data_dictionary(self, num_envs):
            feed = super().get_data_dictionary(num_envs)
            del feed["rewards"]
            return feed

    with pytest.raises(ValueError, match="must define 'rewards'"):
        EnvWrapper(NoRewards, num_envs=2, backend="cpu")


def test_reseed_equals_a_fresh_wrapper_with_that_seed():
    w = EnvWrapper(DummyEnv, num_envs=3, backend="cpu", seed=1)
    w.actions.fill_(2)
    for _ in range(5):
        w.step_all_envs()
        w.reset_only_done_envs()
    w.reseed(9)
    fresh = EnvWrapper(DummyEnv, num_envs=3, backend="cpu", seed=9)
    for name in ("values", "observations", "values_reset_pool", "_timestep_"):
        np.testing.assert_array_equal(w.data_manager.pull_data_from_device(name),
                                      fresh.data_manager.pull_data_from_device(name))
    w.reset_all_envs()
    fresh.reset_all_envs()
    np.testing.assert_array_equal(w.data_manager.pull_data_from_device("values"),
                                  fresh.data_manager.pull_data_from_device("values"))


def test_consistency_skip_leaves_declared_scratch_out():
    class ScratchRewards(WrongReward):
        consistency_skip = ("rewards",)

    (report,) = check(ScratchRewards, {"random_starts": False}, num_envs=2, num_episodes=1)
    assert "rewards" not in report.arrays and "values" in report.arrays


def test_an_environment_missing_part_of_the_contract_cannot_be_built():
    from warp_drive.env.environment import Environment

    class NoArrays(Environment):  # a reference is optional (tests/env/test_no_reference.py); the arrays are not
        def observation_space(self, agent_id):
            return None

        def action_space(self, agent_id):
            return None

    with pytest.raises(TypeError, match="get_data_dictionary"):
        NoArrays()


def test_a_step_binding_given_to_the_wrapper_builds_the_step_and_chooses_the_first_start():
    """EnvWrapper's one extension point for envs not written to the contract (WarpDrive's passes its own):
    the binding's step is what step_all_envs launches, and with host_first_reset the pushed arrays are the
    first episode's start (no pool draw at construction nor at the first reset_all_envs)."""
    from warp_drive.env.wrapper import EnvWrapper as CoreWrapper
    from warp_drive.env.wrapper import StepBinding

    class CountingHostStart(StepBinding):
        host_first_reset = True
        steps = 0

        def bind(self, wrapper):
            launch, names = super().bind(wrapper)

            def step():
                self.steps += 1
                launch()

            return step, names

    binding = CountingHostStart()
    w = CoreWrapper(DummyEnv, num_envs=3, backend="cpu", seed=3, step_binding=binding)
    assert w.step_binding is binding
    values = lambda: w.data_manager.pull_data_from_device("values")  # noqa: E731
    assert (values() == 0).all()  # as pushed: no pool row drawn
    w.reset_all_envs()
    assert (values() == 0).all()
    w.actions.fill_(2)
    w.step_all_envs()
    assert binding.steps == 1 and np.allclose(values(), 0.25)
    w.reset_all_envs()
    assert not (values() == 0).all()  # later resets draw from the pools
    default = CoreWrapper(DummyEnv, num_envs=3, backend="cpu", seed=3)
    assert type(default.step_binding) is StepBinding and not (default.data_manager.pull_data_from_device("values")
                                                               == 0).all()


def test_reseed_keeps_a_pool_the_env_pushed_itself():
    """reseed redraws the pools of get_reset_pools; one the env pushed in its own data dictionary is its own."""
    from warp_drive.env.wrapper import EnvWrapper as CoreWrapper

    own = np.array([[0.5] * 2, [-0.5] * 2], np.float32)

    class OwnPool(DummyEnv):
        def get_data_dictionary(self, num_envs):
            feed = super().get_data_dictionary(num_envs)
            feed.add_pool_for_reset("values_own_pool", own, "values")
            return feed

    w = CoreWrapper(OwnPool, num_envs=4, backend="cpu", seed=1, env_config={"num_agents": 2,
                                                                          "random_starts": False})
    w.reseed(5)
    np.testing.assert_array_equal(w.data_manager.pull_data_from_device("values_own_pool"), own)
    assert {tuple(row) for row in w.data_manager.pull_data_from_device("values")} <= {(0.5, 0.5), (-0.5, -0.5)}
