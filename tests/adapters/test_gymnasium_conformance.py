"""The Gymnasium adapters against Gymnasium itself: the three autoreset modes of
``SyncVectorEnv``, its vector wrappers, its checkers, ``gymnasium.make`` /
``make_vec`` of the registered ``warp_drive/<id>`` ids, and TorchRL's GymWrapper
(cpu executor)."""

from __future__ import annotations

import subprocess
import sys
import warnings

import numpy as np
import pytest
import torch

gym = pytest.importorskip("gymnasium")
from gymnasium.utils.env_checker import check_env, data_equivalence  # noqa: E402
from gymnasium.vector import AutoresetMode, SyncVectorEnv  # noqa: E402

from example_envs.dummy_env.dummy_env import DummyEnv  # noqa: E402
from warp_drive.env.gymnasium_ids import GYMNASIUM_IDS  # noqa: E402
from warp_drive.adapters import GymnasiumEnv, GymnasiumVectorEnv  # noqa: E402

MODES = list(AutoresetMode)
# Deterministic starts (0, 0); "up" (2) twice terminates, the time limit truncates at step 6.
FIXED = {"num_agents": 1, "random_starts": False, "step_size": 0.5, "episode_length": 6}
CARTPOLE_START = 0.05  # CartPole starts every state variable in (-0.05, 0.05)


@pytest.fixture(autouse=True)
def _quiet_known_warnings():
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*infinity.*")  # DummyEnv's unbounded Box
        warnings.filterwarnings("ignore", message=".*symmetric and normalized space.*")
        yield


def _ours(env, num_envs, mode, **kwargs):
    return GymnasiumVectorEnv(env, num_envs=num_envs, backend="cpu", autoreset_mode=mode, **kwargs)


# ============================================================================ autoreset modes
def test_autoreset_mode_argument_and_metadata():
    assert _ours(DummyEnv, 2, AutoresetMode.NEXT_STEP, env_config=FIXED).metadata["autoreset_mode"] \
        is AutoresetMode.NEXT_STEP
    venv = GymnasiumVectorEnv(DummyEnv, num_envs=2, env_config=FIXED)
    assert venv.metadata["autoreset_mode"] is AutoresetMode.NEXT_STEP  # Gymnasium's default
    for given in ("SameStep", "same_step", "SAME_STEP"):
        assert _ours(DummyEnv, 2, given, env_config=FIXED).metadata["autoreset_mode"] is AutoresetMode.SAME_STEP
    with pytest.raises(ValueError, match="autoreset_mode='later'.*'NextStep', 'SameStep', 'Disabled'"):
        _ours(DummyEnv, 2, "later", env_config=FIXED)


@pytest.mark.parametrize("mode", MODES, ids=lambda m: m.value)
def test_every_mode_matches_sync_vector_env_value_for_value(mode):
    """Deterministic starts make the two comparable exactly: ours against Gymnasium's
    SyncVectorEnv over single-replica GymnasiumEnv, with random actions and random
    partial resets (which must keep the other replicas' pending autoresets)."""
    ours = _ours(DummyEnv, 4, mode, seed=0, env_config=FIXED)
    theirs = SyncVectorEnv([lambda: GymnasiumEnv(DummyEnv, seed=0, env_config=FIXED)] * 4, autoreset_mode=mode)
    assert data_equivalence(ours.reset(seed=1), theirs.reset(seed=1), exact=True)
    rng = np.random.default_rng(0)
    ended = np.zeros(4, bool)
    counts = {"ended": 0, "partial resets": 0}
    for t in range(60):
        if mode is AutoresetMode.DISABLED and ended.any():
            mask = ended.copy()  # DISABLED: the ended replicas must be reset before stepping
        elif rng.random() < 0.15:
            mask = rng.random(4) < 0.5
            mask[rng.integers(4)] = True  # Gymnasium wants at least one
        else:
            mask = None
        if mask is not None:
            counts["partial resets"] += 1
            a, b = ours.reset(options={"reset_mask": mask}), theirs.reset(options={"reset_mask": mask.copy()})
            assert data_equivalence(a, b, exact=True), (t, a, b)
        actions = rng.integers(0, 3, size=4)
        a, b = ours.step(actions), theirs.step(actions)
        assert data_equivalence(a, b, exact=True), (t, a, b)
        ended = a[2] | a[3]
        counts["ended"] += int(ended.sum())
    assert counts["ended"] >= 10 and counts["partial resets"] >= 5, counts


def test_disabled_mode_refuses_to_step_an_ended_replica():
    venv = _ours(DummyEnv, 2, "Disabled", seed=0, env_config=FIXED)
    venv.reset()
    venv.step([2, 1])
    _, _, term, _, _ = venv.step([2, 1])
    assert term.tolist() == [True, False]
    with pytest.raises(RuntimeError, match=r"env\(s\) \[0\] ended.*reset_mask"):
        venv.step([1, 1])
    obs, _ = venv.reset(options={"reset_mask": np.array([True, False])})
    np.testing.assert_array_equal(obs[0], [0, 0])
    venv.step([1, 1])  # accepted again


@pytest.mark.parametrize("mode", MODES, ids=lambda m: m.value)
def test_a_seeded_masked_reset_restarts_the_masked_replicas_alone(mode):
    """``reset(seed=s, options={"reset_mask": m})``: the masked replicas start from states drawn from ``s``
    alone (whatever came before), the others keep theirs, as Gymnasium's SyncVectorEnv does."""
    mask = np.array([True, False, True, False])
    restarted = []
    for actions in ([0, 1, 0, 1], [1, 1, 0, 0]):  # two histories before the seeded reset
        venv = _warp_cartpole(4, mode)
        venv.reset(seed=1)
        for _ in range(3):
            before, *_ = venv.step(np.array(actions))
        after, _ = venv.reset(seed=7, options={"reset_mask": mask})
        np.testing.assert_array_equal(after[~mask], before[~mask])  # untouched
        assert not np.array_equal(after[mask], before[mask])
        assert np.all(np.abs(after[mask]) <= CARTPOLE_START)
        restarted.append(after[mask])
    np.testing.assert_array_equal(restarted[0], restarted[1])  # drawn from the seed, not from the history
    fresh, _ = _warp_cartpole(4, mode).reset(seed=7)
    np.testing.assert_array_equal(restarted[0], fresh[mask])  # the same starts as a full reset with that seed


# ---------------------------------------------------------------- CartPole: ours vs Gymnasium's
def _gymnasium_cartpole(num_envs, mode):
    return gym.make_vec("CartPole-v1", num_envs=num_envs, vectorization_mode="sync",
                        vector_kwargs={"autoreset_mode": mode})


def _warp_cartpole(num_envs, mode):
    return _ours("CartPole", num_envs, mode, seed=0)


def _record(venv, actions_of, steps, seed):
    """Step ``venv``, resetting the ended replicas with a mask in DISABLED mode; returns per step
    (obs, reward, terminated, truncated, infos, previous step's ended mask, reset mask or None)."""
    mode = venv.metadata["autoreset_mode"]
    obs, _ = venv.reset(seed=seed)
    ended = np.zeros(venv.num_envs, bool)
    out = []
    for t in range(steps):
        reset_mask = None
        if mode is AutoresetMode.DISABLED and ended.any():
            reset_mask = ended.copy()
            obs, _ = venv.reset(options={"reset_mask": reset_mask.copy()})
        o, r, te, tr, info = venv.step(actions_of(t))
        out.append((np.array(o), np.array(r), np.array(te), np.array(tr), info, ended, reset_mask, obs))
        ended, obs = te | tr, o
    return out


def _check_pattern(records, mode):
    """The autoreset contract of ``mode`` on a CartPole vector env, as Gymnasium documents it.
    Returns how many episodes ended."""
    ended_total = 0
    for obs, rew, term, trunc, infos, prev_ended, reset_mask, prev_obs in records:
        ended = term | trunc
        ended_total += int(ended.sum())
        starts = np.all(np.abs(obs) <= CARTPOLE_START, axis=1)
        if mode is AutoresetMode.NEXT_STEP:
            # the step after an episode ended is its reset: start obs, reward 0, not done
            assert np.all(starts[prev_ended]) and np.all(rew[prev_ended] == 0.0)
            assert not np.any(ended[prev_ended])
            assert np.all(rew[~prev_ended] == 1.0)
            assert infos == {}
        elif mode is AutoresetMode.SAME_STEP:
            assert np.all(rew == 1.0)  # no step is spent on a reset
            assert np.all(starts[ended])  # the returned obs already starts the next episode
            if ended.any():
                assert infos["_final_obs"].tolist() == ended.tolist()
                assert infos["_final_info"].tolist() == ended.tolist()
                for i in np.flatnonzero(term):
                    final = infos["final_obs"][i]
                    assert abs(final[0]) > 2.4 or abs(final[2]) > 12 * 2 * np.pi / 360
            else:
                assert "final_obs" not in infos
        else:  # DISABLED
            assert np.all(rew == 1.0) and "final_obs" not in infos
            if reset_mask is not None:  # the masked reset returned start states for them alone
                assert np.all(np.abs(prev_obs[reset_mask]) <= CARTPOLE_START)
        for i in np.flatnonzero(term):  # a terminal observation is out of bounds in every mode
            if mode is not AutoresetMode.SAME_STEP:
                assert abs(obs[i][0]) > 2.4 or abs(obs[i][2]) > 12 * 2 * np.pi / 360
    return ended_total


@pytest.mark.parametrize("mode", MODES, ids=lambda m: m.value)
def test_cartpole_autoreset_pattern_is_gymnasiums(mode):
    """The states differ (float32 kernel vs float64 Python, different start draws), so the two
    are compared by pattern: one checker of the mode's contract passes on Gymnasium's
    SyncVectorEnv over its CartPole-v1 and on ours."""
    n, steps = 4, 120
    rng = np.random.default_rng(0)
    actions = rng.integers(0, 2, size=(steps, n))
    theirs = _check_pattern(_record(_gymnasium_cartpole(n, mode), lambda t: actions[t], steps, seed=0), mode)
    ours = _check_pattern(_record(_warp_cartpole(n, mode), lambda t: actions[t], steps, seed=0), mode)
    assert theirs >= 8 and ours >= 8  # random pushes topple poles within ~20 steps


@pytest.mark.parametrize("make", [_gymnasium_cartpole, _warp_cartpole], ids=["gymnasium", "warp_drive"])
def test_next_step_ignores_the_action_of_a_resetting_replica(make):
    """Two runs with the same seed whose actions differ only on reset steps are identical."""
    steps, n = 80, 3
    rng = np.random.default_rng(1)
    base = rng.integers(0, 2, size=(steps, n))
    first = _record(make(n, AutoresetMode.NEXT_STEP), lambda t: base[t], steps, seed=3)
    resets = np.array([r[5] for r in first])  # the steps where a replica restarts
    assert resets.sum() >= 3
    other = np.where(resets, 1 - base, base)
    second = _record(make(n, AutoresetMode.NEXT_STEP), lambda t: other[t], steps, seed=3)
    for a, b in zip(first, second):
        assert data_equivalence(a[:4], b[:4], exact=True)


@pytest.mark.parametrize("mode", [AutoresetMode.NEXT_STEP, AutoresetMode.DISABLED], ids=lambda m: m.value)
def test_device_tensors_match_numpy_mode(mode):
    """NEXT_STEP and DISABLED with torch tensors (actions, masks) give the NumPy run, step for step."""
    config = {"num_agents": 1, "episode_length": 7}
    host = _ours(DummyEnv, 3, mode, seed=0, env_config=config)
    dev = _ours(DummyEnv, 3, mode, seed=0, env_config=config, device_tensors=True)
    h, d = host.reset(seed=4), dev.reset(seed=4)
    assert isinstance(d[0], torch.Tensor) and np.array_equal(h[0], d[0].numpy())
    rng = np.random.default_rng(2)
    ended = np.zeros(3, bool)
    for _ in range(30):
        if mode is AutoresetMode.DISABLED and ended.any():
            h = host.reset(options={"reset_mask": ended})
            d = dev.reset(options={"reset_mask": torch.from_numpy(ended)})
            np.testing.assert_array_equal(h[0], d[0].numpy())
        actions = rng.integers(0, 3, size=3)
        h, d = host.step(actions), dev.step(torch.from_numpy(actions))
        for x, y in zip(h[:4], d[:4]):
            np.testing.assert_array_equal(x, y.numpy())
        assert h[4] == {} and d[4] == {} and d[1].dtype == torch.float32
        ended = h[2] | h[3]


# ============================================================================ Gymnasium's vector wrappers
@pytest.mark.parametrize("mode", MODES, ids=lambda m: m.value)
def test_gymnasium_vector_wrappers_run_on_cartpole(mode):
    from gymnasium.wrappers import vector as vw

    wrapped = vw.RecordEpisodeStatistics(_warp_cartpole(4, mode))
    # Gymnasium's own limits: observation wrappers refuse SAME_STEP envs, NormalizeObservation all but NEXT_STEP
    if mode is not AutoresetMode.SAME_STEP:
        wrapped = vw.FlattenObservation(wrapped)
    if mode is AutoresetMode.NEXT_STEP:
        wrapped = vw.NormalizeObservation(wrapped)
    wrapped = vw.DictInfoToList(vw.ClipReward(vw.NormalizeReward(wrapped), -5.0, 5.0))
    obs, _ = wrapped.reset(seed=0)
    wrapped.action_space.seed(0)
    episodes = []
    ended = np.zeros(4, bool)
    for _ in range(300):
        if mode is AutoresetMode.DISABLED and ended.any():
            obs, _ = wrapped.reset(options={"reset_mask": ended})
        obs, rew, term, trunc, infos = wrapped.step(wrapped.action_space.sample())
        assert obs.shape == (4, 4) and np.all(np.isfinite(obs)) and np.all(np.abs(rew) <= 5.0)
        episodes += [info["episode"] for info in infos if "episode" in info]
        ended = term | trunc
    # CartPole pays 1 per step: a recorded return equals its length (NEXT_STEP's reset steps excluded)
    assert len(episodes) >= 20
    assert all(float(e["r"]) == float(e["l"]) for e in episodes)


def test_gymnasium_action_wrappers_on_pendulum():
    from gymnasium.wrappers import vector as vw

    pendulum = _ours("Pendulum", 3, AutoresetMode.NEXT_STEP, seed=0)
    venv = vw.ClipAction(vw.RescaleAction(pendulum, np.float32(-1), np.float32(1)))
    venv.reset(seed=0)
    rng = np.random.default_rng(0)
    for _ in range(200):
        _, rew, *_ = venv.step(rng.uniform(-1.5, 1.5, size=(3, 1)).astype(np.float32))
        assert np.all(rew <= 0.0) and np.all(np.isfinite(rew))


# ============================================================================ registration
def test_import_registers_ids_cheaply_and_in_either_order():
    code = ("import sys, warp_drive; assert 'torch' not in sys.modules; "  # Gymnasium is imported, to register
            "import gymnasium; print(sorted(k for k in gymnasium.registry if k.startswith('warp_drive/')))")
    after = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    code = "import gymnasium, warp_drive; print(sorted(k for k in gymnasium.registry if k.startswith('warp_drive/')))"
    before = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    expected = sorted(f"warp_drive/{gym_id}" for gym_id in GYMNASIUM_IDS)
    assert after.strip() == before.strip() == str(expected)
    assert set(GYMNASIUM_IDS) <= set(gym.registry)  # the same ids as Gymnasium's own envs


@pytest.mark.parametrize("gym_id", list(GYMNASIUM_IDS))
def test_make_and_make_vec_build_the_adapters_and_pass_check_env(gym_id):
    env = gym.make(f"warp_drive/{gym_id}", backend="cpu")
    assert isinstance(env.unwrapped, GymnasiumEnv) and env.unwrapped.spec.id == f"warp_drive/{gym_id}"
    assert env.observation_space == gym.make(gym_id).observation_space
    check_env(env.unwrapped)  # with a spec: the seeded determinism checks run too

    venv = gym.make_vec(f"warp_drive/{gym_id}", num_envs=3, backend="cpu")
    assert isinstance(venv, GymnasiumVectorEnv) and venv.num_envs == 3
    assert venv.metadata["autoreset_mode"] is AutoresetMode.NEXT_STEP
    assert venv.spec.kwargs["vectorization_mode"] == "vector_entry_point"
    assert venv.single_action_space == gym.make(gym_id).action_space
    obs, _ = venv.reset(seed=0)
    venv.action_space.seed(0)
    for _ in range(5):
        assert obs in venv.observation_space
        obs, *_ = venv.step(venv.action_space.sample())


def test_make_vec_passes_the_adapters_arguments():
    venv = gym.make_vec("warp_drive/CartPole-v1", num_envs=2, backend="cpu", seed=0, autoreset_mode="SameStep",
                        max_episode_steps=5, env_config={"sutton_barto_reward": 1})
    assert venv.metadata["autoreset_mode"] is AutoresetMode.SAME_STEP and venv.wrapper.episode_length == 5
    venv.reset(seed=0)
    for step in range(5):
        _, rew, term, trunc, _ = venv.step(np.array([0, 1]))
    assert np.all(trunc | term) and set(rew.tolist()) <= {0.0, -1.0}  # truncated by the env's own limit


# ============================================================================ TorchRL
@pytest.mark.parametrize("mode", [AutoresetMode.SAME_STEP, AutoresetMode.DISABLED], ids=lambda m: m.value)
def test_torchrl_gym_wrapper_over_the_vector_env(mode):
    """TorchRL takes SAME_STEP and DISABLED vector envs (it refuses NEXT_STEP for every vector env)."""
    pytest.importorskip("torchrl")
    from torchrl.envs import GymWrapper
    from torchrl.envs.utils import check_env_specs

    env = GymWrapper(_warp_cartpole(4, mode))
    check_env_specs(env)
    rollout = env.rollout(100, break_when_any_done=False)  # through many episode ends
    assert rollout.batch_size == torch.Size([4, 100])
    assert int(rollout["next", "done"].sum()) >= 10


def test_torchrl_gym_wrapper_over_the_single_env():
    pytest.importorskip("torchrl")
    from torchrl.envs import GymWrapper
    from torchrl.envs.utils import check_env_specs

    env = GymWrapper(gym.make("warp_drive/CartPole-v1", backend="cpu"))
    check_env_specs(env)
    rollout = env.rollout(600)
    assert bool(rollout["next", "done"][-1])
