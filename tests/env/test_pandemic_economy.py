"""PandemicEconomy (example_envs/pandemic_economy): kernel == NumPy reference bit for bit on both cpu
executors, the model's invariants and rules, the masks honoured by the trainer's sampler, and a PPO smoke
run of the two policies (``regions`` and ``planner``)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from example_envs.pandemic_economy import PandemicEconomy
from warp_drive.env.consistency import check, host_arrays, random_action_arrays
from warp_drive.env.registry import get_env_class
from warp_drive.training.config import RunConfig
from warp_drive.training.run import build
from warp_drive.env.wrapper import EnvWrapper

# A short, small configuration that still crosses every rule: cooldowns, planner decisions, the delay ring
# wrapping, the filter ring wrapping (memory < episode; 15 taps: the filter's eight lanes and seven left
# over), vaccination starting mid-episode.
SMALL = {"num_regions": 5, "episode_length": 30, "filter_memory": 15, "num_filters": 3, "delay": 3, "cooldown": 4,
         "subsidy_period": 7, "vaccination_start": 10, "vaccination_rate": 0.02, "seed": 3}


def test_registered_with_two_groups_of_their_own_spaces():
    assert get_env_class("PandemicEconomy") is PandemicEconomy
    env = PandemicEconomy()
    assert env.num_agents == 52 and env.episode_length == 540
    assert env.agent_groups() == {"regions": list(range(51)), "planner": [51]}
    assert env.observation_space(0).shape == (64,) and env.observation_space(51).shape == (513,)
    assert env.action_space(50).n == 11 and env.action_space(51).n == 21
    assert env.filter_table.shape == (5, 600) and env.filter_weights.shape == (51, 5)
    # the calibration orders the bounds as documented: closing saves lives and costs output
    assert np.all(env.calibration["health_closed"] > env.calibration["health_open"])
    assert np.all(env.calibration["econ_open"] > env.calibration["econ_closed"])


def test_the_parameters_are_seeded_and_a_user_file_replaces_draws(tmp_path):
    a, b, c = PandemicEconomy(**SMALL), PandemicEconomy(**SMALL), PandemicEconomy(**{**SMALL, "seed": 4})
    assert np.array_equal(a.beta_table, b.beta_table) and not np.array_equal(a.beta_table, c.beta_table)
    path = tmp_path / "params.npz"
    np.savez(path, R0=np.full(5, 2.0), alpha=np.full(5, 0.25))
    d = PandemicEconomy(**SMALL, params_file=path)
    np.testing.assert_allclose(d.beta_table[:, 1], np.float32(2.0 / 14.0))
    np.testing.assert_allclose(d.region_params[:, 4], 0.25)
    np.savez(path, R0=np.full(4, 2.0))
    with pytest.raises(ValueError, match=r"'R0' has shape \(4,\), expected \(5,\)"):
        PandemicEconomy(**SMALL, params_file=path)


def test_a_reused_calibration_is_the_one_its_configuration_computes():
    """Calibration episodes are reused within a process (keyed by every array they start from): a
    configuration that differs in any parameter -- here one the episodes read late -- gets its own."""
    from example_envs.pandemic_economy import pandemic_economy

    small = dict(num_regions=3, episode_length=30, vaccination_start=10)
    first = PandemicEconomy(**small)
    other = PandemicEconomy(**small, vaccination_rate=0.05)  # after a PandemicEconomy(**small) in this process
    pandemic_economy._CALIBRATION_EPISODES.clear()
    fresh = PandemicEconomy(**small, vaccination_rate=0.05)  # computed anew
    for name in ("region_params", "national_params"):
        assert not np.array_equal(getattr(first, name), getattr(other, name)), name
        np.testing.assert_array_equal(getattr(other, name), getattr(fresh, name), err_msg=name)


def test_the_top_subsidy_is_max_subsidy_of_a_workers_day():
    """The planner's top level pays max_subsidy x A / 365 per person: a share of what closing costs a region,
    not a multiple of its whole output (which made the regions' return follow the planner's subsidy)."""
    env = PandemicEconomy(**{**SMALL, "max_subsidy": 0.04, "output_per_worker": 2.0})
    arrays = {**env.initial_arrays(2), **env.constants(), "_timestep_": np.zeros(2, np.int32),
              "_done_": np.zeros(2, np.int32), "episode_length": np.int32(30), "n_agents": np.int32(6)}
    arrays["sampled_actions_planner"][:, 0] = [env.num_subsidy_levels, env.num_subsidy_levels // 2]
    env.reference_step(arrays)  # step 1: a planner decision
    np.testing.assert_array_equal(arrays["subsidy"][0], np.float32(0.04 * 2.0 / 365.0))
    np.testing.assert_array_equal(arrays["subsidy"][1], np.float32(0.5) * np.float32(0.04 * 2.0 / 365.0))
    # at the defaults (eta = 2: econ = 1 - 1 / c, c = consumption / open output) the top subsidy is a fraction
    # (a fifth to a half) of the consumption a fully closed region loses against a fully open one
    default = PandemicEconomy()
    c_open, c_closed = (1.0 / (1.0 - default.calibration[k]) for k in ("econ_open", "econ_closed"))
    top = default.subsidy_top_day / default.region_params[:, 6]  # the top subsidy / open output, per region
    assert 0.2 < top.mean() / (c_open - c_closed).mean() < 0.5
    with pytest.raises(ValueError, match="max_subsidy >= 0"):
        PandemicEconomy(**{**SMALL, "max_subsidy": -0.1})


# eta = 1 (log utility), one region with no cooldown, and a filter memory longer than the episode.
EDGE = {**SMALL, "num_regions": 1, "eta": 1.0, "cooldown": 1, "filter_memory": 70, "num_levels": 2,
        "borrow_rate": 0.0}


# Fewer taps than the filter's eight lanes: one lane per tap.
FEW_TAPS = {**SMALL, "filter_memory": 5}


def test_the_kernel_matches_its_reference_bit_for_bit(env_backend):
    small, edge, few = check(PandemicEconomy, [SMALL, EDGE, FEW_TAPS], num_envs=3, num_episodes=2,
                             backend=env_backend)
    assert small.steps == edge.steps == few.steps == 60 and small.truncated == edge.truncated == 6
    assert {"observations_regions", "observations_planner", "action_mask_regions", "change_ring"} <= set(small.arrays)


@pytest.mark.slow  # 540 steps of the reference's dense filter: the small configurations above run in the fast tier
@pytest.mark.parametrize("backend", ["cpu", "cpu-gpu", pytest.param("pycuda", marks=pytest.mark.gpu)])
def test_the_kernel_matches_its_reference_at_the_defaults(backend):
    """51 regions, 540 days, the dense 5 x 600 filter: two episodes of three envs (10-30 s per executor)."""
    report, = check(PandemicEconomy, {}, num_envs=3, num_episodes=2, backend=backend)
    assert report.steps == 1080 and report.truncated == 6


def _run(wrapper: EnvWrapper, steps: int, rng: np.random.Generator, legal_only: bool):
    """Step ``wrapper`` with random actions (legal ones, or any in range), yielding (actions, arrays after)."""
    dm = wrapper.data_manager
    env = wrapper.env
    for _ in range(steps):
        if legal_only:
            actions = random_action_arrays(wrapper, rng)
        else:
            E = wrapper.num_envs
            actions = {"sampled_actions_regions": rng.integers(0, env.num_levels + 1, (E, env.num_regions)),
                       "sampled_actions_planner": rng.integers(0, env.num_subsidy_levels + 1, (E, 1))}
        for name, value in actions.items():
            dm.data_on_device_via_torch(name).copy_(torch.from_numpy(np.asarray(value, np.int32)))
        before = host_arrays(wrapper)
        wrapper.step_all_envs()
        after = host_arrays(wrapper)
        yield actions, before, after
        if (after["_done_"] != 0).any():
            wrapper.reset_only_done_envs()


@pytest.mark.parametrize("legal_only", [True, False])
def test_invariants_and_rules(legal_only):
    """S + I + R = 1 (to float rounding), V <= R and D <= R, cumulative counts never fall within an episode, a
    region changes level at most once per C steps and only when its mask allowed it, the planner only on
    decision steps -- also when the actions ignore the masks (the kernel ignores masked actions)."""
    env_config = {**SMALL, "vaccination_rate": 0.05}
    wrapper = EnvWrapper(PandemicEconomy, 4, backend="cpu", seed=0, env_config=env_config)
    env = wrapper.env
    C, P = env.cooldown, env.subsidy_period
    last_change = np.full((4, env.num_regions), -10 ** 6)
    changes = planner_changes = 0
    for step, (actions, before, after) in enumerate(_run(wrapper, 2 * env.episode_length, np.random.default_rng(1),
                                                        legal_only)):
        t = after["_timestep_"]
        su, inf_, re = after["susceptible"], after["infected"], after["removed"]
        assert np.abs(su.astype(np.float64) + inf_ + re - 1.0).max() < 1e-5
        assert (su >= 0).all() and (inf_ >= 0).all() and (after["vaccinated"] <= re).all()
        assert (after["deaths"] <= re).all()
        for name in ("removed", "vaccinated", "deaths", "cum_infected"):
            assert (after[name] >= before[name]).all(), name
        changed = after["level"] != before["level"]
        allowed = before["action_mask_regions"][..., 1:].all(axis=2)  # the mask in force at this step
        assert not (changed & ~allowed).any()
        since = np.where(t[:, None] == 1, 10 ** 6, t[:, None] - last_change)  # a new episode starts afresh
        assert (since[changed] >= C).all()
        last_change = np.where(t[:, None] == 1, -10 ** 6, last_change)
        last_change[changed] = t[np.nonzero(changed)[0]]
        changes += int(changed.sum())
        moved = after["subsidy_level"] != np.where(t == 1, 0, before["subsidy_level"])
        assert ((t[moved] - 1) % P == 0).all()
        planner_changes += int(moved.sum())
        # the masks for the next step: regions in cooldown may only keep; the planner only before a decision
        np.testing.assert_array_equal(after["action_mask_regions"][..., 1:].all(axis=2), after["cooldown"] == 0)
        np.testing.assert_array_equal(after["action_mask_planner"][:, 0, 1:].all(axis=1), t % P == 0)
        assert (after["action_mask_regions"][..., 0] == 1).all() and (after["action_mask_planner"][..., 0] == 1).all()
        assert np.isfinite(after["rewards_regions"]).all() and np.isfinite(after["rewards_planner"]).all()
    assert changes > 20 and planner_changes >= 8


def small_config(backend: str, total_steps: int = 4 * 8 * 16) -> RunConfig:
    ppo = {"algorithm": "PPO", "lr": 1e-3, "num_epochs": 1, "num_minibatches": 2, "model": {"fc_dims": [16, 16]}}
    return RunConfig.from_dict({
        "name": "pandemic_economy_smoke", "env": {"name": "PandemicEconomy", "config": dict(SMALL)},
        "trainer": {"num_envs": 8, "rollout_length": 16, "total_steps": total_steps, "seed": 1, "backend": backend},
        "policy": {"regions": dict(ppo), "planner": dict(ppo)},
    })


def test_the_trainer_never_samples_a_masked_action():
    """Replay the first rollout's actions (from reset) through the rules: a region in cooldown only ever
    chose 0 and the planner chose 0 on every non-decision step."""
    trainer = build(small_config("cpu"))
    trainer.collect_rollout()
    regions = trainer.rollout.buffers["regions"]["actions"].cpu().numpy().reshape(16, 8, -1)
    planner = trainer.rollout.buffers["planner"]["actions"].cpu().numpy().reshape(16, 8)
    env = trainer.env.env
    level = np.ones((8, env.num_regions), np.int64)
    cooldown = np.zeros_like(level)
    cooled = 0
    for row in range(16):
        a = regions[row]
        assert (a[cooldown > 0] == 0).all(), row
        cooled += int((cooldown > 0).sum())
        change = (cooldown == 0) & (a > 0) & (a != level)
        cooldown = np.where(cooldown > 0, cooldown - 1, np.where(change, env.cooldown - 1, 0))
        level = np.where(change, a, level)
        if row % env.subsidy_period != 0:  # step row + 1 decides when row % P == 0
            assert (planner[row] == 0).all(), row
    assert cooled > 50 and planner[0].any()


@pytest.mark.parametrize("backend", ["cpu", "cpu-gpu", pytest.param("pycuda", marks=pytest.mark.gpu)])
def test_ppo_trains_both_groups(backend):
    trainer = build(small_config(backend))
    regions, planner = trainer.policies["regions"], trainer.policies["planner"]
    assert (regions.obs_dim, planner.obs_dim) == (18, 53) and regions.discrete and planner.discrete
    before = {tag: [q.detach().clone() for q in p.model.parameters()] for tag, p in trainer.policies.items()}
    metrics = [trainer.iterate() for _ in range(trainer.num_iterations)]
    assert len(metrics) == 4
    for tag, policy in trainer.policies.items():
        assert all(math.isfinite(m[f"losses/policy_loss/{tag}"]) for m in metrics), tag
        assert any(not torch.equal(a, b) for a, b in zip(before[tag], policy.model.parameters())), tag
