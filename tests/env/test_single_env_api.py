"""One env on the host: ``Environment.reset()`` / ``step(actions)``, the single-env NumPy reference.

Every example env runs as a gym-style multi-agent env through its own
``get_data_dictionary(1)`` and ``reference_step``; stepped from the same state
with the same actions, it agrees with the env's kernel on the cpu executor;
bad calls are refused naming the fix.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from warp_drive.env.registry import BUILTIN_ENVS, get_env_class
from warp_drive.env.wrapper import EnvWrapper

QUICK = [name for name in BUILTIN_ENVS if name != "PandemicEconomy"]  # its default episode is 540 steps of 52 agents


def random_actions(env, rng: np.random.Generator) -> dict:
    actions = {}
    for agent in range(env.num_agents):
        space = env.action_space(agent)
        space.seed(int(rng.integers(1 << 30)))
        actions[agent] = space.sample()
    return actions


@pytest.mark.parametrize("name", QUICK)
def test_an_episode_of_every_example_env_on_the_host(name):
    env = get_env_class(name)()
    obs = env.reset(seed=3)
    assert list(obs) == list(range(env.num_agents))
    for agent, o in obs.items():
        assert o.shape == env.observation_space(agent).shape
    rng = np.random.default_rng(0)
    for t in range(1, env.episode_length + 1):
        obs, rewards, done, info = env.step(random_actions(env, rng))
        assert list(obs) == list(rewards) == list(range(env.num_agents))
        assert all(isinstance(r, float) and np.isfinite(r) for r in rewards.values())
        assert env.single_env_arrays["_timestep_"][0] == t
        if done["__all__"]:
            break
    assert done["__all__"] and info["terminated"] != info["truncated"]
    assert info["truncated"] == (t == env.episode_length and not info["terminated"])
    with pytest.raises(RuntimeError, match=r"the episode is over \(done\); call reset\(\)"):
        env.step(random_actions(env, rng))
    assert env.reset(seed=3).keys() == obs.keys()  # a new episode


def test_an_env_with_group_arrays_steps_on_the_host():
    env = get_env_class("PandemicEconomy")()
    obs = env.reset()
    groups = env.agent_groups()
    assert len(obs) == env.num_agents
    rng = np.random.default_rng(1)
    for _ in range(3):
        obs, rewards, done, _ = env.step(random_actions(env, rng))
    for agents in groups.values():  # each agent's observation has its own group's width
        assert {obs[a].shape for a in agents} == {env.observation_space(agents[0]).shape}
    assert len(rewards) == env.num_agents and not done["__all__"]


@pytest.mark.parametrize("name", ["TagGridWorld", "TagContinuous", "CartPole", "SimpleSpread"])
def test_the_host_step_is_the_kernels_step(name):
    """From the kernel's start state (pool draws included), one env on the host and the kernel's env
    step alike, array for array, for a whole episode of random actions."""
    host = get_env_class(name)()
    wrapper = EnvWrapper(host, num_envs=1, backend="cpu", seed=5)  # the same env object on both sides
    dm = wrapper.data_manager
    host.reset()
    arrays = host.single_env_arrays
    shared = [n for n, v in arrays.items() if isinstance(v, np.ndarray) and dm.is_data_on_device(n)
              and tuple(dm.get_shape(n)) == v.shape and n not in host.consistency_skip]
    assert {"observations", "rewards", "_done_", "_timestep_"} <= set(shared)
    for n in shared:
        arrays[n][...] = dm.pull_data_from_device(n)
    rng = np.random.default_rng(2)
    for _ in range(host.episode_length):
        actions = random_actions(host, rng)
        _, rewards, done, _ = host.step(actions)
        wrapper.actions.copy_(torch.from_numpy(np.asarray(host.single_env_arrays["sampled_actions"])))
        wrapper.step_all_envs()
        for n in shared:
            np.testing.assert_array_equal(arrays[n], dm.pull_data_from_device(n), err_msg=n)
        if done["__all__"]:
            break


def test_bad_calls_are_refused_naming_the_fix():
    env = get_env_class("TagGridWorld")(num_taggers=2, grid_length=4, episode_length=5)
    with pytest.raises(RuntimeError, match=r"step\(\) before reset\(\): call reset\(\) first"):
        env.step({0: 0, 1: 0, 2: 0})
    env.reset()
    with pytest.raises(ValueError, match=r"one action per agent id 0..2 is needed; missing \[2\], unknown \[7\]"):
        env.step({0: 0, 1: 0, 7: 0})
    with pytest.raises(ValueError, match=r"agent 1's action 9 is not in its action space Discrete\(5\)"):
        env.step({0: 0, 1: 9, 2: 0})
    with pytest.raises(ValueError, match=r"needs the agents first \(3 rows\), got shape \(2,\)"):
        env.step(np.zeros(2, np.int32))
    obs, *_ = env.step(np.array([1, 3, 0]))  # one array over the agents works too
    assert env.single_env_arrays["sampled_actions"].tolist() == [[1, 3, 0]]
    assert len(obs) == 3
