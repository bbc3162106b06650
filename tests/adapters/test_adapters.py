"""PettingZoo and Gymnasium adapters: the ecosystems' own checkers, seeding, autoreset, and
agreement with a directly driven EnvWrapper (cpu executor)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch

gym = pytest.importorskip("gymnasium")
from gymnasium.utils.env_checker import check_env, data_equivalence  # noqa: E402
from gymnasium.vector import AutoresetMode, SyncVectorEnv  # noqa: E402

from example_envs.dummy_env.dummy_env import DummyEnv  # noqa: E402
from warp_drive.adapters import GymnasiumEnv, GymnasiumVectorEnv  # noqa: E402
from warp_drive.env_wrapper import EnvWrapper  # noqa: E402

DOWN, STAY, UP = 0, 1, 2
# Fixed start 0, target 1, steps of 0.5: "up" twice terminates at step 2; "stay" truncates at step 5.
FIXED = {"num_agents": 1, "random_starts": False, "step_size": 0.5, "episode_length": 5}


def f32(values):
    """Expected observations as the kernel computes them (float32 t / episode_length)."""
    return np.array(values, np.float64).astype(np.float32)


def _pz():
    pytest.importorskip("pettingzoo")
    from warp_drive.adapters import PettingZooParallelEnv

    return PettingZooParallelEnv


@pytest.fixture(autouse=True)
def _quiet_space_bound_warnings():
    # DummyEnv's observation Box is unbounded, which gymnasium's checker merely warns about.
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*infinity.*")
        warnings.filterwarnings("ignore", message=".*not having a spec.*")
        yield


# ============================================================================ PettingZoo
@pytest.mark.parametrize("num_agents", [1, 3, 7])
def test_parallel_api_test_passes_on_dummy_env(num_agents):
    from pettingzoo.test import parallel_api_test

    env = _pz()(DummyEnv, seed=0, env_config={"num_agents": num_agents, "episode_length": 12})
    assert env.possible_agents == [f"agent_{i}" for i in range(num_agents)]
    parallel_api_test(env, num_cycles=40)


def test_aec_api_test_passes_on_the_converted_parallel_env():
    """PettingZoo's AEC api_test is stricter (observations inside their spaces, dtypes, ...)."""
    _pz()
    from pettingzoo.test import api_test
    from pettingzoo.utils.conversions import parallel_to_aec

    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*observation space value is.*infinity.*")
        api_test(parallel_to_aec(_pz()(DummyEnv, seed=0, env_config={"num_agents": 3, "episode_length": 10})),
                 num_cycles=30)


def test_parallel_observations_rewards_and_flags_over_episodes():
    env = _pz()(DummyEnv, seed=1, env_config={"num_agents": 3, "episode_length": 8})
    for episode in range(3):
        obs, infos = env.reset(seed=episode if episode else None)
        assert set(obs) == set(infos) == set(env.possible_agents) == set(env.agents)
        steps = 0
        while env.agents:
            for agent, o in obs.items():
                assert isinstance(o, np.ndarray) and o.dtype == np.float32 and o in env.observation_space(agent)
            actions = {agent: env.action_space(agent).sample() for agent in env.agents}
            obs, rewards, terms, truncs, infos = env.step(actions)
            steps += 1
            assert set(rewards) == set(terms) == set(truncs) == set(infos) == set(actions)
            assert all(isinstance(r, float) for r in rewards.values())
            assert len(set(terms.values())) == 1 and len(set(truncs.values())) == 1  # env-level done
        assert steps <= 8 and (any(terms.values()) or (steps == 8 and all(truncs.values())))
        with pytest.raises(RuntimeError, match="reset"):
            env.step({})


def test_parallel_terminated_and_truncated_empty_the_agents():
    env = _pz()(DummyEnv, seed=0, env_config=dict(FIXED, num_agents=2))
    env.reset()
    for step in range(2):
        obs, rew, term, trunc, _ = env.step({"agent_0": UP, "agent_1": UP})
    assert term == {"agent_0": True, "agent_1": True} and not any(trunc.values())
    assert env.agents == [] and rew == {"agent_0": 0.0, "agent_1": 0.0}
    np.testing.assert_array_equal(obs["agent_0"], f32([1.0, 2 / 5]))  # the final observation

    env.reset()
    for step in range(5):
        _, _, term, trunc, _ = env.step({"agent_0": STAY, "agent_1": STAY})
        assert bool(env.agents) == (step < 4)
    assert trunc == {"agent_0": True, "agent_1": True} and not any(term.values())


def test_parallel_refuses_bad_actions():
    env = _pz()(DummyEnv, seed=0, env_config={"num_agents": 2})
    env.reset()
    with pytest.raises(KeyError, match="missing"):
        env.step({"agent_0": 1})
    with pytest.raises(KeyError, match="unknown"):
        env.step({"agent_0": 1, "agent_1": 1, "agent_9": 1})
    with pytest.raises(ValueError, match="outside the action space"):
        env.step({"agent_0": 3, "agent_1": 1})  # would index a kernel table out of bounds


def test_parallel_seeded_reset_is_reproducible():
    from pettingzoo.test import parallel_seed_test

    factory = _pz()
    # Built with different (random) seeds: reset(seed=42) alone must decide the run.
    parallel_seed_test(lambda: factory(DummyEnv, env_config={"num_agents": 3}), num_cycles=30)

    a = factory(DummyEnv, seed=1, env_config={"num_agents": 3})
    b = factory(DummyEnv, seed=2, env_config={"num_agents": 3})

    def starts(env, seed):
        first = env.reset(seed=seed)[0]
        following = [env.reset()[0] for _ in range(3)]  # unseeded resets continue the seeded stream
        return [first, *following]

    sa, sb = starts(a, 5), starts(b, 5)
    assert data_equivalence(sa, sb, exact=True)
    assert not data_equivalence(sa[0], starts(a, 6)[0])
    assert not data_equivalence(sa[0], sa[1])  # a reset draws a new start state


def test_parallel_actions_reach_the_kernel():
    """Same seed, same actions: the adapter and a directly stepped EnvWrapper agree exactly."""
    config = {"num_agents": 4, "episode_length": 10}
    env = _pz()(DummyEnv, seed=123, env_config=config)
    direct = EnvWrapper(DummyEnv, num_envs=1, backend="cpu", seed=11, env_config=config)
    obs, _ = env.reset(seed=11)
    np.testing.assert_array_equal(np.stack([obs[a] for a in env.possible_agents]), direct.obs[0].numpy())
    rng = np.random.default_rng(0)
    while env.agents:
        acts = rng.integers(0, 3, size=4)
        obs, rew, term, trunc, _ = env.step({f"agent_{i}": int(a) for i, a in enumerate(acts)})
        direct.actions[0] = torch.from_numpy(acts.astype(np.int32))
        direct.step_all_envs()
        np.testing.assert_array_equal(np.stack([obs[a] for a in env.possible_agents]), direct.obs[0].numpy())
        np.testing.assert_array_equal([rew[a] for a in env.possible_agents], direct.rewards[0].numpy())
        assert term["agent_0"] == bool(direct.terminated[0]) and trunc["agent_0"] == bool(direct.truncated[0])
    assert int(direct.done[0]) != 0


def test_agent_names_follow_agent_groups():
    from warp_drive.adapters.pettingzoo import agent_names

    class Grouped(DummyEnv):
        def agent_groups(self):
            return {"red": [0, 2], "blue": [1]}

    assert agent_names(DummyEnv(num_agents=2)) == {"agent_0": 0, "agent_1": 1}
    # Numbered within the group, group by group; agents in no group are "agent_<k>".
    names = agent_names(Grouped(num_agents=4))
    assert names == {"red_0": 0, "red_1": 2, "blue_0": 1, "agent_0": 3}
    assert list(names) == ["red_0", "red_1", "blue_0", "agent_0"]

    class Overlapping(DummyEnv):
        def agent_groups(self):
            return {"a": [0, 1], "b": [1]}

    with pytest.raises(ValueError, match="two agent groups"):
        agent_names(Overlapping(num_agents=2))


def test_parallel_api_test_on_tag_gridworld():
    pytest.importorskip("example_envs.tag_gridworld.tag_gridworld")
    from pettingzoo.test import parallel_api_test

    env = _pz()("TagGridWorld", seed=0, env_config={"num_taggers": 3, "grid_length": 6, "episode_length": 25,
                                                    "random_starts": True})
    assert env.possible_agents == ["tagger_0", "tagger_1", "tagger_2", "runner_0"]
    assert env.agent_index == {"tagger_0": 0, "tagger_1": 1, "tagger_2": 2, "runner_0": 3}
    parallel_api_test(env, num_cycles=30)
    obs, _ = env.reset(seed=3)
    for _ in range(25):
        if not env.agents:
            break
        assert all(o in env.observation_space(a) for a, o in obs.items())
        obs, *_ = env.step({a: env.action_space(a).sample() for a in env.agents})


def test_parallel_api_test_on_tag_continuous():
    pytest.importorskip("example_envs.tag_continuous.tag_continuous")
    from pettingzoo.test import parallel_api_test

    env = _pz()("TagContinuous", seed=0)
    groups = env.wrapper.env.agent_groups()
    assert env.possible_agents == ["tagger_0"] + [f"runner_{k}" for k in range(10)]
    assert [env.agent_index[a] for a in env.possible_agents] == groups["tagger"] + groups["runner"]
    parallel_api_test(env, num_cycles=20)
    obs, _ = env.reset(seed=1)
    for _ in range(20):
        assert all(o in env.observation_space(a) for a, o in obs.items())
        obs, *_ = env.step({a: env.action_space(a).sample() for a in env.agents})


def test_adapters_take_an_existing_env_wrapper():
    wrapper = EnvWrapper(DummyEnv, num_envs=1, backend="cpu", seed=0, env_config={"num_agents": 2})
    env = _pz()(wrapper)
    assert env.wrapper is wrapper and env.possible_agents == ["agent_0", "agent_1"]
    with pytest.raises(ValueError, match="1 replicas; expected 3"):
        GymnasiumVectorEnv(EnvWrapper(DummyEnv, 1, backend="cpu", env_config={"num_agents": 1}), num_envs=3)
    with pytest.raises(ValueError, match="env_config"):
        _pz()(wrapper, env_config={"num_agents": 2})


def test_warns_when_observations_are_not_restored_at_reset():
    class StaleObservations(DummyEnv):
        def get_data_dictionary(self, num_envs):
            feed = super().get_data_dictionary(num_envs)
            observations = feed["observations"]
            del feed["observations"]
            feed.add_data("observations", np.array(observations["data"]))
            return feed

    with pytest.warns(UserWarning, match="neither saved for reset"):
        GymnasiumEnv(StaleObservations, seed=0, env_config={"num_agents": 1, "random_starts": False})


# ============================================================================ Gymnasium vector env
def test_vector_spaces_shapes_and_dtypes():
    venv = GymnasiumVectorEnv(DummyEnv, num_envs=5, seed=0, env_config={"num_agents": 1})
    assert isinstance(venv, gym.vector.VectorEnv) and venv.num_envs == 5
    assert venv.metadata["autoreset_mode"] is AutoresetMode.NEXT_STEP  # Gymnasium's default
    assert venv.single_observation_space == gym.spaces.Box(-np.inf, np.inf, (2,), np.float32)
    assert venv.single_action_space == gym.spaces.Discrete(3)
    assert venv.observation_space.shape == (5, 2) and venv.action_space == gym.spaces.MultiDiscrete([3] * 5)
    obs, infos = venv.reset(seed=0)
    assert isinstance(obs, np.ndarray) and obs.dtype == np.float32 and obs in venv.observation_space
    assert infos == {}
    venv.action_space.seed(0)
    for _ in range(30):
        obs, rew, term, trunc, infos = venv.step(venv.action_space.sample())
        assert obs.shape == (5, 2) and obs.dtype == np.float32 and obs in venv.observation_space
        assert rew.shape == (5,) and rew.dtype == np.float64
        assert term.shape == trunc.shape == (5,) and term.dtype == trunc.dtype == np.bool_
        assert isinstance(infos, dict)
    venv.close()
    assert venv.closed


def test_vector_refuses_multi_agent_envs_before_building():
    with pytest.raises(ValueError, match="single-agent.*3 agents.*PettingZooParallelEnv"):
        GymnasiumVectorEnv(DummyEnv, num_envs=2, env_config={"num_agents": 3})
    with pytest.raises(ValueError, match="single-agent"):
        GymnasiumEnv(DummyEnv, env_config={"num_agents": 2})


def test_vector_same_step_autoreset():
    """env 0 terminates at step 2, env 1 truncates at step 5: each step returns the reset
    observation of the finished env, its final observation in infos, and the final reward."""
    venv = GymnasiumVectorEnv(DummyEnv, num_envs=2, seed=0, env_config=FIXED, autoreset_mode=AutoresetMode.SAME_STEP)
    obs, _ = venv.reset()
    np.testing.assert_array_equal(obs, [[0, 0], [0, 0]])
    obs, rew, term, trunc, infos = venv.step([UP, STAY])
    assert infos == {} and not term.any() and not trunc.any()
    obs, rew, term, trunc, infos = venv.step([UP, STAY])
    assert term.tolist() == [True, False] and not trunc.any()
    np.testing.assert_array_equal(obs, f32([[0, 0], [0, 2 / 5]]))  # env 0: already its next episode's start
    np.testing.assert_array_equal(rew, [0.0, -1.0])  # the terminating transition's reward
    assert infos["_final_obs"].tolist() == [True, False] and infos["final_obs"][1] is None
    np.testing.assert_array_equal(infos["final_obs"][0], f32([1.0, 2 / 5]))
    assert infos["final_info"] == {} and infos["_final_info"].tolist() == [True, False]
    for _ in range(3):
        obs, rew, term, trunc, infos = venv.step([STAY, STAY])
    assert trunc.tolist() == [False, True] and not term.any()
    np.testing.assert_array_equal(infos["final_obs"][1], [0.0, 1.0])
    np.testing.assert_array_equal(obs, f32([[0, 3 / 5], [0, 0]]))  # env 0 is 3 steps into episode 2


def test_vector_matches_gymnasium_sync_vector_env_in_same_step_mode():  # every mode: test_gymnasium_conformance
    """Deterministic starts: our vector env equals gymnasium's SyncVectorEnv(SAME_STEP) over
    GymnasiumEnv replicas, value for value, infos layout and dtypes included."""
    config = dict(FIXED, episode_length=6)
    ours = GymnasiumVectorEnv(DummyEnv, num_envs=3, seed=0, env_config=config, autoreset_mode="SameStep")
    theirs = SyncVectorEnv([lambda: GymnasiumEnv(DummyEnv, seed=0, env_config=config)] * 3,
                           autoreset_mode=AutoresetMode.SAME_STEP)
    assert ours.observation_space == theirs.observation_space and ours.action_space == theirs.action_space
    assert data_equivalence(ours.reset(seed=1), theirs.reset(seed=1), exact=True)
    rng = np.random.default_rng(0)
    finished = 0
    for _ in range(20):
        actions = rng.integers(0, 3, size=3)
        a, b = ours.step(actions), theirs.step(actions)
        assert data_equivalence(a, b, exact=True), (a, b)
        finished += int(a[2].sum() + a[3].sum())
    assert finished >= 3


def test_vector_record_episode_statistics_sees_whole_episodes():
    from gymnasium.wrappers.vector import RecordEpisodeStatistics

    venv = RecordEpisodeStatistics(GymnasiumVectorEnv(DummyEnv, num_envs=3, seed=0, env_config=FIXED,
                                                          autoreset_mode="SameStep"))
    venv.reset()
    lengths = []
    for _ in range(12):
        *_, infos = venv.step([UP, STAY, DOWN])
        if "episode" in infos:
            lengths += infos["episode"]["l"][infos["_episode"]].tolist()
    assert sorted(lengths) == [2, 2, 2, 2, 2, 2, 5, 5, 5, 5]


def test_vector_seeded_reset_is_deterministic():
    def run(build_seed, reset_seed):
        venv = GymnasiumVectorEnv(DummyEnv, num_envs=4, seed=build_seed, env_config={"num_agents": 1})
        out = [venv.reset(seed=reset_seed)]
        rng = np.random.default_rng(0)
        out += [venv.step(rng.integers(0, 3, size=4)) for _ in range(45)]  # through autoresets
        return out

    a, b = run(1, 7), run(2, 7)
    assert data_equivalence(a, b, exact=True)
    assert not data_equivalence(a[0], run(1, 8)[0])
    first = a[0][0]
    assert len({tuple(row) for row in first}) == 4  # each replica draws its own start


def test_vector_partial_reset_with_reset_mask():
    venv = GymnasiumVectorEnv(DummyEnv, num_envs=3, seed=0, env_config={"num_agents": 1})
    venv.reset(seed=0)
    stepped, *_ = venv.step([UP, UP, UP])
    obs, _ = venv.reset(options={"reset_mask": np.array([False, True, False])})
    np.testing.assert_array_equal(obs[[0, 2]], stepped[[0, 2]])
    assert obs[1, 1] == 0.0 and obs[1, 0] != stepped[1, 0]
    with pytest.raises(ValueError, match="reset_mask"):
        venv.reset(options={"reset_mask": np.array([1, 0, 1])})


def test_vector_actions_reach_the_kernel():
    venv = GymnasiumVectorEnv(DummyEnv, num_envs=4, seed=0, env_config={"num_agents": 1, "episode_length": 50},
                              autoreset_mode="SameStep")
    direct = EnvWrapper(DummyEnv, num_envs=4, backend="cpu", seed=9, env_config={"num_agents": 1, "episode_length": 50})
    obs, _ = venv.reset(seed=9)
    np.testing.assert_array_equal(obs, direct.obs[:, 0].numpy())
    rng = np.random.default_rng(1)
    for _ in range(10):
        actions = rng.integers(0, 3, size=4)
        obs, rew, term, trunc, infos = venv.step(actions)
        direct.actions[:, 0] = torch.from_numpy(actions.astype(np.int32))
        direct.step_all_envs()
        np.testing.assert_array_equal(rew, direct.rewards[:, 0].numpy())
        np.testing.assert_array_equal(term, direct.terminated.numpy())
        direct.reset_only_done_envs()
        np.testing.assert_array_equal(obs, direct.obs[:, 0].numpy())
    with pytest.raises(ValueError, match="outside the action space"):
        venv.step([0, 1, 2, 3])
    with pytest.raises(ValueError, match="expected 4 values"):
        venv.step([0, 1])


def test_vector_device_tensors_match_numpy_mode():
    config = {"num_agents": 1, "episode_length": 7}
    host = GymnasiumVectorEnv(DummyEnv, num_envs=3, seed=0, env_config=config, autoreset_mode="SameStep")
    dev = GymnasiumVectorEnv(DummyEnv, num_envs=3, seed=0, env_config=config, device_tensors=True,
                             autoreset_mode="SameStep")
    h_obs, _ = host.reset(seed=4)
    d_obs, _ = dev.reset(seed=4)
    assert isinstance(d_obs, torch.Tensor)
    np.testing.assert_array_equal(h_obs, d_obs.numpy())
    rng = np.random.default_rng(2)
    for _ in range(15):
        actions = rng.integers(0, 3, size=3)
        h = host.step(actions)
        d = dev.step(torch.from_numpy(actions))
        np.testing.assert_array_equal(h[0], d[0].numpy())
        np.testing.assert_array_equal(h[1], d[1].numpy())
        np.testing.assert_array_equal(h[2], d[2].numpy())
        np.testing.assert_array_equal(h[3], d[3].numpy())
        mask = d[4]["_final_obs"].numpy()
        np.testing.assert_array_equal(mask, h[4].get("_final_obs", np.zeros(3, bool)))
        for i in np.flatnonzero(mask):
            np.testing.assert_array_equal(h[4]["final_obs"][i], d[4]["final_obs"][i].numpy())
    # the returned tensors are copies: the next step does not rewrite them
    before = d[0].clone()
    dev.step(torch.ones(3, dtype=torch.int32))
    assert torch.equal(before, d[0])


def test_vector_env_on_each_executor_gives_the_cpu_trajectory(backend_name):
    """Observations, rewards and flags are bit-identical on every executor (Philox resets included)."""
    config = {"num_agents": 1, "episode_length": 6}

    def run(backend):
        venv = GymnasiumVectorEnv(DummyEnv, num_envs=8, backend=backend, seed=0, env_config=config)
        out = [venv.reset(seed=5)]
        rng = np.random.default_rng(3)
        out += [venv.step(rng.integers(0, 3, size=8)) for _ in range(15)]
        return out

    assert data_equivalence(run(backend_name), run("cpu"), exact=True)


# ============================================================================ Gymnasium single env
def test_check_env_passes_on_single_env():
    check_env(GymnasiumEnv(DummyEnv, seed=0, env_config={"num_agents": 1}))


def test_check_env_with_a_spec_runs_the_determinism_checks():
    """check_env compares seeded resets only for envs with a spec: register one through gymnasium."""
    env_id = "warp_drive_test/DummyEnvAdapter-v0"
    gym.register(env_id, entry_point=lambda **kw: GymnasiumEnv(DummyEnv, env_config={"num_agents": 1}, **kw))
    try:
        env = gym.make(env_id, disable_env_checker=True)
        assert env.unwrapped.spec is not None
        check_env(env.unwrapped)
    finally:
        gym.registry.pop(env_id, None)


def test_single_env_episode_and_reset_contract():
    env = GymnasiumEnv(DummyEnv, seed=0, env_config=FIXED)
    with pytest.raises(RuntimeError, match="reset"):
        env.step(1)
    obs, info = env.reset()
    np.testing.assert_array_equal(obs, [0, 0])
    assert info == {}
    _, reward, term, trunc, _ = env.step(UP)
    assert (reward, term, trunc) == (-0.5, False, False) and isinstance(reward, float)
    obs, reward, term, trunc, _ = env.step(np.int64(UP))
    assert term is True and trunc is False and reward == 0.0
    np.testing.assert_array_equal(obs, f32([1.0, 2 / 5]))
    with pytest.raises(RuntimeError, match="reset"):
        env.step(UP)
    env.reset()
    for _ in range(5):
        _, _, term, trunc, _ = env.step(STAY)
    assert trunc is True and term is False


# ============================================================================ classic control
def _cartpole():
    pytest.importorskip("example_envs.classic_control.cartpole")
    return "CartPole"


def test_check_env_on_cartpole():
    check_env(GymnasiumEnv(_cartpole(), seed=0))


def test_cartpole_vector_env_autoresets_through_episodes():
    venv = GymnasiumVectorEnv(_cartpole(), num_envs=16, seed=0, autoreset_mode="SameStep")
    assert venv.single_observation_space.shape == (4,) and venv.single_action_space == gym.spaces.Discrete(2)
    obs, _ = venv.reset(seed=0)
    assert obs.shape == (16, 4) and obs.dtype == np.float32 and np.all(np.abs(obs) <= 0.05)
    venv.action_space.seed(0)
    ended = 0
    for _ in range(60):
        obs, rew, term, trunc, infos = venv.step(venv.action_space.sample())
        assert obs in venv.observation_space and np.all(rew == 1.0)
        if term.any():
            ended += int(term.sum())
            assert np.all(np.abs(obs[term]) <= 0.05)  # already the next episode's start
            for i in np.flatnonzero(term):
                final = infos["final_obs"][i]
                assert abs(final[0]) > 2.4 or abs(final[2]) > 12 * 2 * np.pi / 360
    assert ended > 0  # random pushes topple a pole well within 60 steps


def test_cartpole_single_env_tracks_gymnasium_cartpole():
    """The adapter is a drop-in: from the same state, with the same actions, it follows
    gymnasium's CartPole-v1 (float32 vs float64 state, hence the tolerance)."""
    ours = GymnasiumEnv(_cartpole(), seed=0)
    theirs = gym.make("CartPole-v1").unwrapped
    obs, _ = ours.reset(seed=3)
    theirs.reset(seed=0)
    theirs.state = obs.astype(np.float64)
    rng = np.random.default_rng(0)
    for _ in range(200):
        action = int(rng.integers(0, 2))
        o1, r1, t1, tr1, _ = ours.step(action)
        o2, r2, t2, _, _ = theirs.step(action)
        np.testing.assert_allclose(o1, o2, atol=1e-4)
        assert (r1, t1) == (r2, t2)
        if t1 or tr1:
            break
    assert t1


@pytest.mark.parametrize("name, module", [("Acrobot", "acrobot"), ("MountainCar", "mountain_car"),
                                          ("ContinuousMountainCar", "continuous_mountain_car"),
                                          ("Pendulum", "pendulum")])
def test_other_classic_control_envs_through_both_gymnasium_adapters(name, module):
    """Discrete and Box actions ((E, 1) int32 and (E, 1, 1) float32 device arrays) alike."""
    pytest.importorskip(f"example_envs.classic_control.{module}")
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*symmetric and normalized space.*")
        check_env(GymnasiumEnv(name, seed=0))
    venv = GymnasiumVectorEnv(name, num_envs=4, seed=0)
    obs, _ = venv.reset(seed=0)
    venv.action_space.seed(0)
    for _ in range(20):
        assert obs in venv.observation_space
        obs, rew, term, trunc, infos = venv.step(venv.action_space.sample())
        assert rew.shape == (4,) and np.all(np.isfinite(rew))


@pytest.mark.parametrize("bad", [[1.7, 0, 1, 2], [float("nan"), 0, 1, 2], ["1", "0", "1", "2"], [True, False, True, False]])
def test_vector_refuses_non_integer_discrete_actions_as_the_torch_path_does(bad):
    """1.7 was truncated to 1, NaN became -2147483648 in the device array, strings hit a NumPy error."""
    venv = GymnasiumVectorEnv(DummyEnv, num_envs=4, seed=0, env_config={"num_agents": 1})
    venv.reset(seed=0)
    with pytest.raises(ValueError, match="step\\(\\): agent 0: discrete actions must be integers"):
        venv.step(np.asarray(bad, dtype=object if isinstance(bad[0], str) else None))
    venv.step([0, 1, 2, 0])  # integers still step, floats that are whole numbers too
    venv.step(np.array([0.0, 1.0, 2.0, 0.0]))


def test_parallel_refuses_a_non_integer_discrete_action():
    env = _pz()(DummyEnv, seed=0, env_config={"num_agents": 2})
    env.reset()
    with pytest.raises(ValueError, match="agent_0: discrete actions must be integers"):
        env.step({"agent_0": 1.5, "agent_1": 1})
