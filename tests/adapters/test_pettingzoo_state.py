"""PettingZooParallelEnv.state(): the env's declared ``state_arrays`` (the compact global state of
``critic_input: state``) where it declares them, the restored arrays and the time step otherwise."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("pettingzoo")
from example_envs.dummy_env.dummy_env import DummyEnv  # noqa: E402
from example_envs.simple_spread.simple_spread import SimpleSpread  # noqa: E402
from warp_drive.adapters import PettingZooParallelEnv  # noqa: E402


def test_simple_spread_state_is_the_replicas_row_of_the_wrappers_state():
    env = PettingZooParallelEnv("SimpleSpread", seed=3, env_config={"num_agents": 3, "num_landmarks": 3})
    n, landmarks = 3, 3
    assert env.state_names == list(SimpleSpread.state_arrays)
    assert env.state_space.shape == (4 * n + 2 * landmarks,)  # (px, py, vx, vy) per agent, then the landmarks
    env.reset(seed=3)
    for i, agent in enumerate(env.possible_agents):
        env.action_space(agent).seed(10 + i)
    for _ in range(4):
        env.step({a: env.action_space(a).sample() for a in env.agents})
    state = env.state()
    expected = env.wrapper.state[0].detach().cpu().numpy()
    assert state.dtype == np.float32 and state.shape == env.state_space.shape and state in env.state_space
    np.testing.assert_array_equal(state, expected)
    # and it is the state after those steps: the agents' positions and velocities as the kernel left them
    dm = env.wrapper.data_manager
    pos, vel = dm.pull_data_from_device("agent_pos")[0], dm.pull_data_from_device("agent_vel")[0]
    np.testing.assert_array_equal(state[: 4 * n].reshape(n, 4), np.concatenate([pos, vel], axis=1))
    assert np.any(vel != 0)  # the agents have moved (else the check above would prove little)
    state[:] = 0  # the caller's own copy
    assert np.any(env.state() != 0)


class StatelessDummy(DummyEnv):
    state_arrays = ()  # no declared state: the adapter falls back to what a reset restores


def test_without_declared_state_arrays_the_state_is_the_restored_arrays_and_the_time_step():
    env = PettingZooParallelEnv(StatelessDummy(num_agents=2, random_starts=False, step_size=0.5, episode_length=5),
                                seed=0)
    assert env.state_names == ["values", "_timestep_"] and env.state_space.shape == (3,)
    env.reset()
    np.testing.assert_array_equal(env.state(), [0.0, 0.0, 0.0])
    env.step({"agent_0": 2, "agent_1": 0})  # up, down
    state = env.state()
    assert state.dtype == np.float32 and state in env.state_space
    np.testing.assert_array_equal(state, [0.5, -0.5, 1.0])
