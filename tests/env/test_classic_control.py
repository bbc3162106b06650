"""The five classic-control environments (cpu executor).

* the consistency checker: each kernel against its NumPy reference, which
  reproduces it bit for bit (zero tolerance), in two configurations;
* the same, one step from states spread over the whole state space (including
  the Acrobot's fastest spins and Pendulum angles far beyond 2 pi) with
  out-of-range actions, and more envs than one 256-thread block holds;
* Gymnasium's own environments, step by step: each Gymnasium env is set to the
  kernel's state (and its TimeLimit to the kernel's time step), both take the
  same action, and observations, rewards, terminated and truncated must agree;
* random starts: reset pools drawn from Gymnasium's reset distributions.
"""

from __future__ import annotations

import warnings

import gymnasium as gym
import numpy as np
import pytest
import torch
from gymnasium.wrappers import TimeLimit

from example_envs.classic_control import Acrobot, CartPole, ContinuousMountainCar, MountainCar, Pendulum
from warp_drive.runtime.portable_math import sincos32
from warp_drive.env.consistency import check, host_arrays
from warp_drive.env_wrapper import EnvWrapper
from warp_drive.env.environment import THREADS_PER_ENV
from warp_drive.env.registry import get_env_class
from warp_drive.services.sampler import Sampler

F32 = np.float32
PI = np.pi

ENVS = {
    "CartPole": CartPole,
    "Acrobot": Acrobot,
    "MountainCar": MountainCar,
    "ContinuousMountainCar": ContinuousMountainCar,
    "Pendulum": Pendulum,
}
GYM_IDS = {
    "CartPole": "CartPole-v1",
    "Acrobot": "Acrobot-v1",
    "MountainCar": "MountainCar-v0",
    "ContinuousMountainCar": "MountainCarContinuous-v0",
    "Pendulum": "Pendulum-v1",
}
DEFAULT_EPISODE_LENGTHS = {"CartPole": 500, "Acrobot": 500, "MountainCar": 200, "ContinuousMountainCar": 999,
                           "Pendulum": 200}

# A second configuration per env: a short time limit plus a Gymnasium option
# that changes the dynamics or reward. The MountainCar goals are moved next to
# the start so that random actions terminate episodes too.
SECOND_CONFIG = {
    "CartPole": {"episode_length": 40, "sutton_barto_reward": 1},
    "Acrobot": {"episode_length": 40, "seed": 3},
    "MountainCar": {"episode_length": 40, "goal_position": -0.45},
    "ContinuousMountainCar": {"episode_length": 40, "goal_position": -0.45},
    "Pendulum": {"episode_length": 40, "g": 9.81},
}

# Gymnasium's reset ranges of each state variable (low, high).
RESET_RANGES = {
    "CartPole": ([-0.05] * 4, [0.05] * 4),
    "Acrobot": ([-0.1] * 4, [0.1] * 4),
    "MountainCar": ([-0.6, 0.0], [-0.4, 0.0]),
    "ContinuousMountainCar": ([-0.6, 0.0], [-0.4, 0.0]),
    "Pendulum": ([-PI, -1.0], [PI, 1.0]),
}


def wide_states(name: str, n: int, rng: np.random.Generator, full: bool) -> np.ndarray:
    """States all over the state space, past the termination bounds.

    ``full`` adds the extremes where comparing float32 with float64 means
    nothing: the Acrobot near its speed limits (its one-step map amplifies a
    1e-7 relative change of the state by up to ~5e4 there, measured), and
    Pendulum angles up to 1e5 rad (wd_sincosf's Payne-Hanek range).
    """
    if name == "CartPole":
        low, high = [-2.6, -3.0, -0.25, -3.0], [2.6, 3.0, 0.25, 3.0]
    elif name == "Acrobot":
        v1, v2 = (4 * PI, 9 * PI) if full else (2 * PI, 4 * PI)
        low, high = [-PI, -PI, -v1, -v2], [PI, PI, v1, v2]
    elif name in ("MountainCar", "ContinuousMountainCar"):
        low, high = [-1.2, -0.07], [0.6, 0.07]
    else:
        theta = 1e5 if full else 3 * PI
        low, high = [-theta, -8.0], [theta, 8.0]
    states = rng.uniform(low, high, size=(n, len(low))).astype(F32)
    if name in ("MountainCar", "ContinuousMountainCar"):
        states[: n // 8, 0] = F32(-1.2)  # at the left wall, where leftward speed is lost
    return states


def random_actions(env, n: int, rng: np.random.Generator, overshoot: float = 1.0) -> np.ndarray:
    """Actions for the wrapper's ``sampled_actions``; Box actions up to ``overshoot`` x the bounds."""
    space = env.action_space(0)
    if isinstance(space, gym.spaces.Discrete):
        return rng.integers(0, space.n, size=(n, 1)).astype(np.int32)
    high = float(space.high[0]) * overshoot
    return rng.uniform(-high, high, size=(n, 1, 1)).astype(F32)


# ---------------------------------------------------------------------------
# The environments as the framework sees them
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("name", ENVS)
def test_declaration(name):
    cls = ENVS[name]
    assert get_env_class(name) is cls
    env = cls()
    assert env.name == name and env.num_agents == 1 and cls.thread_layout == THREADS_PER_ENV
    assert env.episode_length == DEFAULT_EPISODE_LENGTHS[name]
    assert cls.step_kernel == f"{name}Step"
    assert cls.cuda_source_path().is_file()
    reference = gym.make(GYM_IDS[name]).unwrapped
    assert env.observation_space(0) == reference.observation_space
    assert env.action_space(0) == reference.action_space
    with pytest.raises(TypeError, match="unknown parameter"):
        cls(gravityy=1.0)


# ---------------------------------------------------------------------------
# Kernel against reference
# ---------------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("name", ENVS)
def test_consistency_checker(name, env_backend):
    """Two configurations, two episode lengths each, fresh random actions every step."""
    reports = check(ENVS[name], configs=[{}, SECOND_CONFIG[name]], num_envs=3, num_episodes=2,
                    backend=env_backend, seed=0)
    assert [r.steps for r in reports] == [2 * DEFAULT_EPISODE_LENGTHS[name], 80]
    assert all(r.terminated + r.truncated > 0 for r in reports)  # resets were checked too
    if name not in ("Acrobot", "Pendulum"):  # random actions do not lift the Acrobot in 40 steps
        assert reports[1].terminated > 0


def test_consistency_checker_fixed_starts():
    """Without a pool, envs restart from the start states saved in their reset twins."""
    check(CartPole, configs={"episode_length": 30}, num_envs=4, num_episodes=2, backend="cpu", seed=1,
          reset_pool_size=0)


@pytest.mark.parametrize("name,env_config", [(name, {}) for name in ENVS] + [("CartPole", {"sutton_barto_reward": 1})],
                         ids=list(ENVS) + ["CartPole-sutton_barto_reward"])
def test_reference_is_bit_exact_over_the_state_space(name, env_config):
    """One step from 300 states across the whole state space: 300 envs are two
    flat blocks, the second one partly past ``n_envs`` (the guard)."""
    num_envs = 300
    wrapper = EnvWrapper(ENVS[name], num_envs, backend="cpu", seed=0, env_config=env_config)
    env = wrapper.env
    state = wrapper.data_manager.data_on_device_via_torch("state")
    rng = np.random.default_rng(1)
    for _ in range(3):
        state.copy_(torch.from_numpy(wide_states(name, num_envs, rng, full=True)[:, None, :]))
        wrapper.actions.copy_(torch.from_numpy(random_actions(env, num_envs, rng, overshoot=1.5)))
        reference = host_arrays(wrapper)
        env.run_reference_step(reference)
        wrapper.step_all_envs()
        kernel = host_arrays(wrapper)
        for key in ("state", "observations", "rewards", "_done_", "_timestep_"):
            np.testing.assert_array_equal(kernel[key], reference[key], err_msg=f"{name}: {key}")
        wrapper.reset_all_envs()


def test_sincos32_is_wd_sincosf():
    """The references' sin/cos (a NumPy port of wd_sincosf) return the kernels' bits.

    Pendulum's observation is (cos, sin) of its new angle, computed in the
    kernel by wd_sincosf: set angles from tiny to 1e35 (Cody-Waite and
    Payne-Hanek reductions), step, and compare with sincos32 of the new angle.
    """
    num_envs = 4096
    wrapper = EnvWrapper(Pendulum, num_envs, backend="cpu", seed=0)
    rng = np.random.default_rng(2)
    theta = np.concatenate([rng.uniform(-10, 10, 2048), rng.uniform(-1e4, 1e4, 1024),
                            np.exp(rng.uniform(-15, 80, 1024)) * rng.choice([-1, 1], 1024)]).astype(F32)
    state = np.stack([theta, np.zeros_like(theta)], axis=1)[:, None, :]
    wrapper.data_manager.data_on_device_via_torch("state").copy_(torch.from_numpy(state))
    wrapper.actions.zero_()
    wrapper.step_all_envs()
    new_theta = wrapper.data_manager.pull_data_from_device("state")[:, 0, 0]
    obs = wrapper.data_manager.pull_data_from_device("observations")[:, 0]
    sin, cos = sincos32(new_theta)
    np.testing.assert_array_equal(obs[:, 0], cos)
    np.testing.assert_array_equal(obs[:, 1], sin)


# ---------------------------------------------------------------------------
# Kernel against Gymnasium
# ---------------------------------------------------------------------------

# Gymnasium computes in float64 (CartPole, Acrobot, MountainCar, Pendulum keep
# a float64 state; ContinuousMountainCar a float32 one but float64 cos), the
# kernels in float32. One step carries float32 rounding (relative 6e-8 per
# operation) amplified by the step's conditioning: measured at most 5e-6
# absolute over these states (the Acrobot's at |speeds| <= 2 pi / 4 pi, where
# its step is tame), and half an ulp of 100 in the ContinuousMountainCar's goal
# reward. 1e-4 relative and absolute keeps a 20x margin, while any slip in a
# formula or a constant shows up at 1e-3 or far above.
GYM_RTOL = GYM_ATOL = 1e-4


def _time_limit(env) -> TimeLimit:
    while not isinstance(env, TimeLimit):
        env = env.env
    return env


@pytest.mark.parametrize("name", ENVS)
def test_matches_gymnasium_step_by_step(name):
    num_envs, steps, episode_length = 32, 200, 50
    wrapper = EnvWrapper(ENVS[name], num_envs, backend="cpu", seed=3, env_config={"episode_length": episode_length})
    env = wrapper.env
    state = wrapper.data_manager.data_on_device_via_torch("state")
    timestep = wrapper.data_manager.data_on_device_via_torch("_timestep_")
    reference = gym.make(GYM_IDS[name], max_episode_steps=episode_length, disable_env_checker=True)
    reference.reset(seed=0)
    time_limit, core = _time_limit(reference), reference.unwrapped
    rng = np.random.default_rng(4)
    terminated_seen = truncated_seen = 0
    for step in range(steps):
        # Half the envs jump to a state anywhere in the state space (past the
        # termination bounds too) and to any time step (so that time limits
        # fall due); the others go on from where they are.
        jump = rng.random(num_envs) < 0.5
        if jump.any():
            state.numpy()[jump, 0, :] = wide_states(name, int(jump.sum()), rng, full=False)
            timestep.numpy()[jump] = rng.integers(0, episode_length, size=int(jump.sum()))
        actions = random_actions(env, num_envs, rng, overshoot=1.5)  # Box actions past the bounds: clipping
        wrapper.actions.copy_(torch.from_numpy(actions))
        before = host_arrays(wrapper)

        expected = {"obs": [], "reward": [], "terminated": [], "truncated": [], "state": []}
        for e in range(num_envs):
            s = before["state"][e, 0]
            core.state = s.copy() if name == "ContinuousMountainCar" else s.astype(np.float64)
            if name == "CartPole":
                core.steps_beyond_terminated = None
            time_limit._elapsed_steps = int(before["_timestep_"][e])
            action = actions[e, 0] if env.continuous_actions else int(actions[e, 0])
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                obs, reward, terminated, truncated, _ = reference.step(action)
            for key, value in zip(expected, (obs, reward, terminated, truncated, np.asarray(core.state, np.float64))):
                expected[key].append(value)
        expected = {key: np.array(value) for key, value in expected.items()}

        wrapper.step_all_envs()
        after = host_arrays(wrapper)
        where = f"{name}, step {step}"
        np.testing.assert_allclose(after["observations"][:, 0], expected["obs"], rtol=GYM_RTOL, atol=GYM_ATOL,
                                   err_msg=f"{where}: observations")
        np.testing.assert_allclose(after["rewards"][:, 0], expected["reward"], rtol=GYM_RTOL, atol=GYM_ATOL,
                                   err_msg=f"{where}: rewards")
        new_state = after["state"][:, 0].astype(np.float64)
        if name == "Acrobot":  # angles wrap at +-pi: compare them modulo 2 pi
            diff = new_state[:, :2] - expected["state"][:, :2]
            new_state[:, :2] = expected["state"][:, :2] + (diff + PI) % (2 * PI) - PI
        np.testing.assert_allclose(new_state, expected["state"], rtol=GYM_RTOL, atol=GYM_ATOL,
                                   err_msg=f"{where}: state")
        done = after["_done_"]
        np.testing.assert_array_equal(done == 1, expected["terminated"], err_msg=f"{where}: terminated")
        # Gymnasium may report both on the last step; warp_drive's done says
        # 1 then (termination wins, so returns do not bootstrap).
        np.testing.assert_array_equal(done == 2, expected["truncated"] & ~expected["terminated"],
                                      err_msg=f"{where}: truncated")
        terminated_seen += int((done == 1).sum())
        truncated_seen += int((done == 2).sum())
        wrapper.reset_only_done_envs()
    assert truncated_seen > 0
    assert (terminated_seen > 0) == (name != "Pendulum")


# ---------------------------------------------------------------------------
# Random starts
# ---------------------------------------------------------------------------


def _starts(name: str, seed: int, resets: int = 4, num_envs: int = 64, pool: int = 500):
    wrapper = EnvWrapper(ENVS[name], num_envs, backend="cpu", seed=seed, reset_pool_size=pool)
    dm = wrapper.data_manager
    states, observations = [], []
    for _ in range(resets):
        wrapper.reset_all_envs()
        states.append(dm.pull_data_from_device("state")[:, 0])
        observations.append(dm.pull_data_from_device("observations")[:, 0])
    return wrapper, np.array(states), np.array(observations)


@pytest.mark.parametrize("name", ENVS)
def test_random_starts(name):
    wrapper, states, observations = _starts(name, seed=7)
    env = wrapper.env
    low, high = (np.array(bound, F32) for bound in RESET_RANGES[name])
    # In Gymnasium's reset ranges, with observations paired to their states.
    assert ((states >= low) & (states <= high)).all()
    for s, o in zip(states, observations):
        np.testing.assert_array_equal(o, env.observe(s))
    # Different across envs and across resets.
    moving = high > low
    for s in states:
        assert len(np.unique(s[:, moving], axis=0)) > 0.8 * len(s)
    for a, b in zip(states[:-1], states[1:]):
        assert (a != b).any(axis=1).mean() > 0.8
    # The pool spans the reset distribution.
    pool = wrapper.data_manager.pull_data_from_device("state_reset_pool")[:, 0]
    span = high - low
    assert (pool.min(axis=0) <= low + 0.05 * span).all() and (pool.max(axis=0) >= high - 0.05 * span).all()
    # The same seed replays the same starts; another seed gives others.
    _, again, _ = _starts(name, seed=7)
    np.testing.assert_array_equal(again, states)
    _, other, _ = _starts(name, seed=8)
    assert not np.array_equal(other, states)


def test_reset_only_done_envs_draws_new_starts_for_done_envs_only():
    wrapper, _, _ = _starts("CartPole", seed=5, resets=1)
    dm = wrapper.data_manager
    before = dm.pull_data_from_device("state")
    done = wrapper.done
    done[::2] = 1
    wrapper.reset_only_done_envs()
    after = dm.pull_data_from_device("state")
    np.testing.assert_array_equal(after[1::2], before[1::2])
    assert (after[::2] != before[::2]).any(axis=(1, 2)).mean() > 0.8


@pytest.mark.parametrize("name", ["MountainCar", "Pendulum"])
def test_fixed_starts_without_a_pool(name):
    """reset_pool_size=0: each env restarts from its own start, the same every time."""
    _, states, observations = _starts(name, seed=7, resets=3, num_envs=16, pool=0)
    low, high = (np.array(bound, F32) for bound in RESET_RANGES[name])
    assert ((states >= low) & (states <= high)).all()
    np.testing.assert_array_equal(states[0], states[1])
    np.testing.assert_array_equal(states[0], states[2])
    assert len(np.unique(states[0][:, 0])) == 16
    np.testing.assert_array_equal(observations[0], observations[2])


# ---------------------------------------------------------------------------
# Continuous actions through the sampler
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["ContinuousMountainCar", "Pendulum"])
def test_sampler_drives_box_actions(name):
    num_envs = 40
    wrapper = EnvWrapper(ENVS[name], num_envs, backend="cpu", seed=0)
    env, dm = wrapper.env, wrapper.data_manager
    space = env.action_space(0)
    sampler = Sampler(wrapper.function_manager, seed=0)
    sampler.register_continuous_actions(dm, "sampled_actions", space.low, space.high, stddev=0.3)
    mean = torch.zeros(num_envs, 1, 1)
    for _ in range(5):
        sampler.sample(dm, mean, "sampled_actions")
        actions = wrapper.actions.numpy()
        assert actions.shape == (num_envs, 1, 1)
        assert (actions >= space.low[0]).all() and (actions <= space.high[0]).all()
        assert len(np.unique(actions)) > num_envs // 2
        reference = host_arrays(wrapper)
        env.run_reference_step(reference)
        wrapper.step_all_envs()
        kernel = host_arrays(wrapper)
        for key in ("state", "observations", "rewards"):
            np.testing.assert_array_equal(kernel[key], reference[key])
