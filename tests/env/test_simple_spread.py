"""SimpleSpread (MPE simple_spread as JaxMARL's MPE_simple_spread_v3): kernel against the NumPy
reference, and facts checked by hand.

The consistency checker compares every array bit for bit (``consistency_atol = rtol = 0``): the
reference reproduces the kernel's float32 operations, ``wd_expf`` and ``wd_logf`` included (their
NumPy ports are checked against the core kernel ``wd_math_probe`` here). Hand-checked facts place
agents and landmarks directly in the device arrays, step once or twice with chosen actions and
compare with numbers worked out in float64.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from example_envs.simple_spread import SimpleSpread
from example_envs.simple_spread.simple_spread import expf32, logf32
from warp_drive.env.consistency import check
from warp_drive.env_wrapper import EnvWrapper
from warp_drive.runtime.function_manager import FunctionManager
from warp_drive.env.registry import get_env_class

K = 1e-3  # contact margin
R_SUM = 0.3  # two agent radii


# ---------------------------------------------------------------------------
# helpers
# ---------------------------------------------------------------------------


def place(wrapper: EnvWrapper, agent_pos, landmark_pos) -> None:
    """Start every env from the given positions ((N, 2) for all envs, or (E, N, 2)), zero velocities."""
    env, e = wrapper.env, wrapper.num_envs
    agents = np.broadcast_to(np.asarray(agent_pos, np.float32), (e, env.num_agents, 2)).copy()
    landmarks = np.broadcast_to(np.asarray(landmark_pos, np.float32), (e, env.num_landmarks, 2)).copy()
    dm = wrapper.data_manager
    for name, value in env.start_arrays(agents, landmarks).items():
        dm.data_on_device_via_torch(name).copy_(torch.from_numpy(value))
    dm.data_on_device_via_torch("agent_vel").zero_()


def step(wrapper: EnvWrapper, actions) -> dict:
    wrapper.actions.copy_(torch.as_tensor(np.asarray(actions)).broadcast_to(wrapper.actions.shape))
    wrapper.step_all_envs()
    dm = wrapper.data_manager
    return {name: dm.pull_data_from_device(name) for name in
            ("agent_pos", "agent_vel", "agent_force", "rewards", "observations", "state", "_done_", "_timestep_")}


def wrapper_for(backend: str, num_envs: int = 1, **config) -> EnvWrapper:
    return EnvWrapper(SimpleSpread, num_envs, backend=backend, seed=0, env_config=config, reset_pool_size=8)


def contact_magnitude(d: float) -> float:
    """JaxMARL's contact force between two agents at distance d, in float64."""
    return 100.0 * K * math.log1p(math.exp(-(d - R_SUM) / K))


# ---------------------------------------------------------------------------
# kernel == reference
# ---------------------------------------------------------------------------

CONSISTENCY_CONFIGS = [
    dict(),
    dict(continuous_actions=True),
    dict(num_agents=6, num_landmarks=6),
    dict(num_agents=6, num_landmarks=6, continuous_actions=True),
    # crowded: big agents overlap all the time; a speed cap; MPE's integration order; fewer landmarks
    dict(num_agents=8, num_landmarks=4, agent_radius=0.4, max_speed=1.0, integrator="semi_implicit", episode_length=15),
    # JaxMARL's done step, other constants
    dict(num_agents=4, num_landmarks=2, episode_length=7, jaxmarl_done_step=True, local_ratio=0.2, damping=0.5,
         accel=3.0, contact_force=50.0, contact_margin=0.01, continuous_actions=True),
]


def _config_id(config: dict) -> str:
    return "-".join(f"{k}={v}" for k, v in config.items()) or "default"


@pytest.mark.parametrize("config", CONSISTENCY_CONFIGS, ids=_config_id)
def test_kernel_matches_reference(config, env_backend):
    report = check(SimpleSpread, configs=[config], num_envs=6, num_episodes=2, backend=env_backend, seed=3,
                   reset_pool_size=16)[0]
    env = SimpleSpread(**config)
    assert report.steps == 2 * env.episode_length
    assert report.truncated == 2 * 6 and report.terminated == 0  # every env truncated twice, never terminated
    assert {"agent_pos", "agent_vel", "agent_force", "landmark_dist", "state", "observations", "rewards"} <= set(
        report.arrays)


def test_consistency_run_exercises_contacts():
    """The default configuration under random actions does bring agents into contact (so the
    consistency check above compares non-trivial contact forces)."""
    wrapper = wrapper_for("cpu", num_envs=32)
    rng = np.random.default_rng(0)
    touched = 0
    for _ in range(25):
        out = step(wrapper, rng.integers(0, 5, size=(32, 3)).astype(np.int32))
        action_force = SimpleSpread.action_force(wrapper.actions.numpy(), 5.0, continuous=False)
        touched += int((np.abs(out["agent_force"] - action_force) > 1e-3).any(axis=2).sum())
    assert touched > 10


def test_numpy_ports_of_expf_and_logf_are_bit_exact():
    rng = np.random.default_rng(1)
    x_exp = np.concatenate([rng.uniform(-110.0, 95.0, 20000), -rng.uniform(0.0, 1e-3, 2000),
                            [0.0, -0.0, 88.7, 89.0, 89.5, -87.5, -103.9, -104.0, -104.5, np.inf, -np.inf]])
    x_log = np.concatenate([rng.integers(1, 0x7F800000, 20000, dtype=np.int64).astype(np.uint32).view(np.float32),
                            rng.uniform(1.0, 2.0, 5000), [1.0, 2.0, 1.0000001, 1e-45]])
    fm = FunctionManager(1, 1, backend="cpu")

    def probe(x: np.ndarray) -> np.ndarray:
        xs = torch.from_numpy(np.ascontiguousarray(x, dtype=np.float32))
        out = torch.full((len(x), 6), float("nan"))
        fm.launch_flat("wd_math_probe", [xs, out, len(x)], len(x), 256)
        fm.backend.synchronize()
        return out.numpy()

    np.testing.assert_array_equal(expf32(x_exp.astype(np.float32)).view(np.uint32),
                                  probe(x_exp)[:, 1].view(np.uint32))
    np.testing.assert_array_equal(logf32(x_log.astype(np.float32)).view(np.uint32),
                                  probe(x_log)[:, 0].view(np.uint32))


# ---------------------------------------------------------------------------
# facts checked by hand
# ---------------------------------------------------------------------------


def test_registered_with_spaces_of_jaxmarl():
    assert get_env_class("SimpleSpread") is SimpleSpread
    env = SimpleSpread()
    assert env.observation_space(0).shape == (18,) and env.action_space(0).n == 5
    assert env.state_size == 18 and env.episode_length == 25
    big = SimpleSpread(num_agents=6, num_landmarks=6, continuous_actions=True)
    assert big.observation_space(5).shape == (4 + 12 + 20,)  # JaxMARL: 4 + 4 (N - 1) + 2 L
    assert big.action_space(0).shape == (5,) and big.step_kernel == "SimpleSpreadContinuousStep"


@pytest.mark.parametrize("num_agents", [1, 2, 3, 4, 7])
def test_other_agents_in_id_order_as_jaxmarls_two_rolls(num_agents):
    """JaxMARL orders the others by ``roll(shift=N - i - 1)[:N - 1]`` then ``roll(shift=i)``."""
    n = num_agents
    env = SimpleSpread(num_agents=n)
    for i in range(n):
        jaxmarl = np.roll(np.roll(np.arange(n), n - i - 1)[: n - 1], i)
        assert env._others()[i].tolist() == jaxmarl.tolist()


def test_contact_forces_push_overlapping_agents_apart(env_backend):
    """Agent 0 at the origin, agent 1 at various distances (env by env), agent 2 far away.
    The force on 0 points away from 1 with JaxMARL's soft-contact magnitude, 1 gets the
    opposite force, 2 none; with no-op actions."""
    offsets = [(0.1, 0.0), (0.12, 0.16), (0.2999, 0.0), (0.0, -0.3005), (0.5, 0.0)]
    agents = np.zeros((len(offsets), 3, 2), np.float32)
    agents[:, 1] = offsets
    agents[:, 2] = (0.9, 0.9)
    wrapper = wrapper_for(env_backend, num_envs=len(offsets))
    place(wrapper, agents, np.zeros((3, 2)))
    out = step(wrapper, np.zeros((len(offsets), 3), np.int32))
    for env, (ox, oy) in enumerate(offsets):
        d = math.hypot(ox, oy)
        expected = contact_magnitude(d) * -np.array([ox, oy]) / d
        force = out["agent_force"][env]
        np.testing.assert_allclose(force[0], expected, rtol=2e-3, atol=1e-7, err_msg=f"env {env}")
        np.testing.assert_array_equal(force[1], -force[0])
        assert (force[2] == 0).all()
    assert out["agent_force"][0, 0, 0] == pytest.approx(-20.0, rel=1e-5)  # deep overlap: 100 * (0.3 - 0.1)
    assert out["agent_force"][4, 0, 0] == 0.0  # 0.2 beyond contact: exp underflows
    # JaxMARL's integration: the velocity takes the force, the position moves with the old (zero) velocity.
    np.testing.assert_allclose(out["agent_vel"][:, 0], out["agent_force"][:, 0] * 0.1, rtol=1e-6)
    np.testing.assert_array_equal(out["agent_pos"], agents)


def test_reward_of_a_known_configuration(env_backend):
    """Agents 0 and 1 overlap (distance 0.2), agent 2 is alone. By hand:
    landmark (0, 0.5): nearest agent 0 at 0.5; (1, 0): agent 1 at 0.8; (-1, -1): agent 0 at sqrt 2."""
    agents = [(0.0, 0.0), (0.2, 0.0), (1.0, 1.0)]
    landmarks = [(0.0, 0.5), (1.0, 0.0), (-1.0, -1.0)]
    wrapper = wrapper_for(env_backend)
    place(wrapper, agents, landmarks)
    out = step(wrapper, np.zeros((1, 3), np.int32))  # positions do not move in the first step (zero velocity)
    np.testing.assert_array_equal(out["agent_pos"][0], np.float32(agents))
    shared = -(0.5 + 0.8 + math.sqrt(2.0))
    expected = [0.5 * -1 + 0.5 * shared, 0.5 * -1 + 0.5 * shared, 0.5 * 0 + 0.5 * shared]
    np.testing.assert_allclose(out["rewards"][0], expected, rtol=1e-6)

    other = wrapper_for(env_backend, local_ratio=0.2)
    place(other, agents, landmarks)
    rewards = step(other, np.zeros((1, 3), np.int32))["rewards"][0]
    np.testing.assert_allclose(rewards, [-0.2 + 0.8 * shared, -0.2 + 0.8 * shared, 0.8 * shared], rtol=1e-6)


@pytest.mark.parametrize("continuous", [False, True])
def test_actions_observation_layout_and_integration_order(continuous, env_backend):
    """Agents far apart (no contact). Step 1: the velocities take the action forces, positions
    stay; step 2 (same actions): positions move with step 1's velocities (JaxMARL's order)."""
    agents = np.float32([(0.5, 0.5), (-0.5, 0.2), (0.1, -0.7)])
    landmarks = np.float32([(0.0, 0.0), (1.0, -1.0), (-0.3, 0.9)])
    if continuous:
        # force (a2 - a1, a4 - a3) * 5
        actions = np.float32([[[0.7, 0.0, 0.1, 0.0, 0.0], [0.0, 0.0, 0.0, 0.1, 0.0], [0.3, 0.2, 0.9, 0.5, 0.1]]])
        u = np.float32([(0.5, 0.0), (0.0, -0.5), (3.5, -2.0)])
    else:
        actions = np.int32([[2, 3, 0]])  # +x, -y, no-op
        u = np.float32([(5.0, 0.0), (0.0, -5.0), (0.0, 0.0)])
    wrapper = wrapper_for(env_backend, continuous_actions=continuous)
    place(wrapper, agents, landmarks)
    first = step(wrapper, actions)
    v1 = u * 0.1
    np.testing.assert_allclose(first["agent_force"][0], u, rtol=1e-6)
    np.testing.assert_allclose(first["agent_vel"][0], v1, rtol=1e-6, atol=1e-7)
    np.testing.assert_array_equal(first["agent_pos"][0], agents)

    obs = first["observations"][0]
    assert obs.shape == (3, 18)
    for i in range(3):
        others = [j for j in range(3) if j != i]
        expected = np.concatenate([v1[i], agents[i], (landmarks - agents[i]).ravel(),
                                   (agents[others] - agents[i]).ravel(), np.zeros(4)])
        np.testing.assert_allclose(obs[i], expected, rtol=1e-6, atol=1e-7, err_msg=f"agent {i}")
    state = first["state"][0]
    np.testing.assert_allclose(state[:12].reshape(3, 4), np.concatenate([agents, v1], axis=1), rtol=1e-6, atol=1e-7)
    np.testing.assert_array_equal(state[12:].reshape(3, 2), landmarks)

    second = step(wrapper, actions)
    np.testing.assert_allclose(second["agent_pos"][0], agents + v1 * 0.1, rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(second["agent_vel"][0], v1 * 0.75 + u * 0.1, rtol=1e-6, atol=1e-7)


def test_discrete_action_directions(env_backend):
    """Action a of agent 0 alone (env a): 0 no-op, 1 -x, 2 +x, 3 -y, 4 +y, force 5 each."""
    wrapper = wrapper_for(env_backend, num_envs=5)
    place(wrapper, [(0.0, 0.0), (0.8, 0.8), (-0.8, -0.8)], np.zeros((3, 2)))
    actions = np.zeros((5, 3), np.int32)
    actions[:, 0] = np.arange(5)
    out = step(wrapper, actions)
    expected = np.float32([(0, 0), (-5, 0), (5, 0), (0, -5), (0, 5)])
    np.testing.assert_array_equal(out["agent_force"][:, 0], expected)


def test_semi_implicit_integrator_moves_with_the_new_velocity(env_backend):
    wrapper = wrapper_for(env_backend, integrator="semi_implicit")
    agents = [(0.5, 0.5), (-0.5, 0.2), (0.1, -0.7)]
    place(wrapper, agents, np.zeros((3, 2)))
    out = step(wrapper, np.int32([[2, 0, 0]]))
    np.testing.assert_allclose(out["agent_pos"][0, 0], [0.5 + 0.5 * 0.1, 0.5], rtol=1e-6)


def test_speed_cap(env_backend):
    wrapper = wrapper_for(env_backend, max_speed=0.3)
    place(wrapper, [(0.5, 0.5), (-0.5, 0.2), (0.1, -0.7)], np.zeros((3, 2)))
    out = step(wrapper, np.int32([[2, 3, 0]]))  # 0.5 per step uncapped
    np.testing.assert_allclose(out["agent_vel"][0, :2], [(0.3, 0.0), (0.0, -0.3)], rtol=1e-6)


@pytest.mark.parametrize("episode_length, jaxmarl_done_step, done_step", [(5, False, 5), (5, True, 6), (25, True, 26)])
def test_done_at_the_configured_step(episode_length, jaxmarl_done_step, done_step, env_backend):
    wrapper = wrapper_for(env_backend, num_envs=2, episode_length=episode_length, jaxmarl_done_step=jaxmarl_done_step)
    assert wrapper.episode_length == done_step
    for t in range(1, done_step + 1):
        out = step(wrapper, np.zeros((2, 3), np.int32))
        assert (out["_timestep_"] == t).all()
        assert (out["_done_"] == (2 if t == done_step else 0)).all(), t
    wrapper.reset_only_done_envs()
    dm = wrapper.data_manager
    assert (dm.pull_data_from_device("_done_") == 0).all() and (dm.pull_data_from_device("_timestep_") == 0).all()


def test_resets_draw_start_states_from_the_pools():
    wrapper = EnvWrapper(SimpleSpread, 64, backend="cpu", seed=5)
    dm = wrapper.data_manager
    pos, landmarks = dm.pull_data_from_device("agent_pos"), dm.pull_data_from_device("landmark_pos")
    assert np.abs(pos).max() <= 1.0 and np.abs(landmarks).max() <= 1.0
    assert len({tuple(row) for row in pos.reshape(64, -1)}) > 32  # envs start differently
    env = wrapper.env
    zero = np.zeros_like(pos)
    np.testing.assert_array_equal(dm.pull_data_from_device("agent_vel"), zero)
    np.testing.assert_array_equal(dm.pull_data_from_device("observations"), env.observe(pos, zero, landmarks))
    np.testing.assert_array_equal(dm.pull_data_from_device("state"), env.global_state(pos, zero, landmarks))
    # the same seed, the same start states; another seed, others
    again = EnvWrapper(SimpleSpread, 64, backend="cpu", seed=5)
    np.testing.assert_array_equal(again.data_manager.pull_data_from_device("agent_pos"), pos)
    other = EnvWrapper(SimpleSpread, 64, backend="cpu", seed=6)
    assert not np.array_equal(other.data_manager.pull_data_from_device("agent_pos"), pos)
    # a step then a reset: the envs start over from pool rows, velocities zero again
    step(wrapper, np.full((64, 3), 2, np.int32))
    wrapper.reset_all_envs()
    assert (dm.pull_data_from_device("agent_vel") == 0).all()
    assert not np.array_equal(dm.pull_data_from_device("agent_pos"), pos)


def test_bad_configs_are_refused():
    with pytest.raises(ValueError, match="integrator"):
        SimpleSpread(integrator="rk4")
    with pytest.raises(ValueError, match="local_ratio"):
        SimpleSpread(local_ratio=1.5)
    with pytest.raises(ValueError, match="num_landmarks"):
        SimpleSpread(num_landmarks=0)
