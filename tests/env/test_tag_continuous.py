"""TagContinuous: kernel against the NumPy reference, and the rules the original got wrong.

Everything runs on the cpu executor (the GPU tests at the end are skipped
without one). The consistency checker compares every array bit for bit
(``consistency_atol = rtol = 0``): the reference reproduces the kernel's float32
operations, ``wd_sincosf`` included.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from example_envs.tag_continuous import TagContinuous
from warp_drive.runtime.portable_math import sincos32 as sincosf
from warp_drive.env.consistency import check
from warp_drive.env_wrapper import EnvWrapper

L = 10.0  # default grid_length


# ---------------------------------------------------------------------------
# helpers
# ---------------------------------------------------------------------------


def fixed_env_wrapper(backend, xs, ys, num_taggers_at_front: int, num_envs: int = 2, directions=None, **config):
    """A wrapper whose envs all start from the given positions; the first
    ``num_taggers_at_front`` ids are made the taggers by choosing the seed."""
    n = len(xs)
    config = dict(num_taggers=num_taggers_at_front, num_runners=n - num_taggers_at_front,
                  starting_location_x=np.asarray(xs, np.float32), starting_location_y=np.asarray(ys, np.float32),
                  starting_directions=np.zeros(n, np.float32) if directions is None else directions,
                  random_starts=False, **config)
    env = _env_with_taggers_first(config)
    return EnvWrapper(env, num_envs, backend=backend, seed=0)


def _env_with_taggers_first(config) -> TagContinuous:
    """Taggers are drawn from the env's own generator: find a seed that makes them
    the lowest ids, so tests can place them."""
    wanted = list(range(config["num_taggers"]))
    for seed in range(10_000):
        env = TagContinuous(seed=seed, **config)
        if env.tagger_ids.tolist() == wanted:
            return env
    raise AssertionError("no seed puts the taggers first")


def step_no_op(wrapper: EnvWrapper) -> dict:
    """One step with every agent choosing (no acceleration, no turn): nobody moves."""
    wrapper.actions.zero_()
    wrapper.step_all_envs()
    dm = wrapper.data_manager
    return {name: dm.pull_data_from_device(name) for name in
            ("rewards", "num_runners", "still_in_the_game", "observations", "_done_", "loc_x")}



def reference_after_no_op(wrapper: EnvWrapper, before: dict) -> dict:
    arrays = {k: (v.copy() if isinstance(v, np.ndarray) else v) for k, v in before.items()}
    arrays["sampled_actions"][...] = 0
    wrapper.env.reference_step(arrays)
    return arrays


def host_state(wrapper: EnvWrapper) -> dict:
    dm = wrapper.data_manager
    arrays = {name: dm.pull_data_from_device(name) for name in dm.array_names}
    arrays.update({name: dm.meta_info(name) for name in dm.scalar_data_list})
    return arrays


# ---------------------------------------------------------------------------
# kernel == reference
# ---------------------------------------------------------------------------

CONSISTENCY_CONFIGS = [
    # full observation, runners exit, frequent tags
    dict(num_taggers=3, num_runners=9, episode_length=25, tagging_distance=0.2, seed=1),
    # partial observation (a scan: few agents), runners stay in the game, edge penalty and step rewards
    dict(num_taggers=2, num_runners=10, episode_length=25, use_full_observation=False, num_other_agents_observed=4,
         tagging_distance=0.15, runner_exits_game_after_tagged=False, edge_hit_penalty=-0.5,
         step_penalty_for_tagger=-0.1, step_reward_for_runner=0.05, seed=2),
    # unequal skills, fast agents slamming into the walls, K larger than the others available, turns of up to
    # 3 pi (headings past every branch of the kernel's fmod by 2 pi)
    dict(num_taggers=1, num_runners=4, episode_length=20, use_full_observation=False, num_other_agents_observed=6,
         skill_level_runner=0.5, skill_level_tagger=1.5, max_speed=2.0, max_acceleration=2.0, min_acceleration=-2.0,
         max_turn=3 * np.pi, min_turn=-3 * np.pi, tagging_distance=0.3, seed=3),
    # many agents: the neighbour grid
    dict(num_taggers=8, num_runners=112, episode_length=15, use_full_observation=False, num_other_agents_observed=10,
         tagging_distance=0.05, grid_length=5.0, max_speed=1.5, seed=4),
    # the grid with fewer than K others left in the game: taggers tag most runners out
    dict(num_taggers=10, num_runners=60, episode_length=15, use_full_observation=False, num_other_agents_observed=32,
         tagging_distance=0.6, grid_length=5.0, seed=9),
    # a scan with the largest K, just below the grid's threshold
    dict(num_taggers=5, num_runners=58, episode_length=15, use_full_observation=False, num_other_agents_observed=32,
         tagging_distance=0.08, seed=5),
    # full observation, more agents
    dict(num_taggers=4, num_runners=20, episode_length=15, tagging_distance=0.1, seed=6),
]


def _config_id(config: dict) -> str:
    return f"N{config['num_taggers'] + config['num_runners']}-seed{config['seed']}"


@pytest.mark.parametrize("config", CONSISTENCY_CONFIGS, ids=_config_id)
def test_kernel_matches_reference(config, env_backend):
    reports = check(TagContinuous, configs=[config], num_envs=4, num_episodes=2, backend=env_backend, seed=7,
                    reset_pool_size=16)
    report = reports[0]
    assert report.steps == 2 * config["episode_length"]
    assert report.terminated + report.truncated >= 4  # every env ended at least once


@pytest.mark.parametrize("num_agents", [1000, 1100])
def test_kernel_matches_reference_with_more_agents_than_a_gpu_block(num_agents, env_backend):
    """More agents than the kernel's block may hold on a GPU (its registers cap it at
    512 threads): GPU-shaped, each thread loops over two or three agents; native,
    one host thread steps the whole env."""
    config = dict(num_taggers=20, num_runners=num_agents - 20, episode_length=3, use_full_observation=False,
                  num_other_agents_observed=5, tagging_distance=0.02, seed=8)
    wrapper_check = check(TagContinuous, configs=[config], num_envs=2, num_episodes=1, backend=env_backend, seed=3,
                          reset_pool_size=4)[0]
    assert wrapper_check.steps == 3 and wrapper_check.truncated == 2


@pytest.mark.slow
def test_phase_geometry_follows_the_executor():
    """The same kernel: one thread per env natively, the GPU's block GPU-shaped."""
    config = dict(num_taggers=2, num_runners=698, use_full_observation=False, num_other_agents_observed=4)
    # A small reset pool: its start observations (700 agents' nearest neighbours each) are computed on the host.
    native = EnvWrapper(TagContinuous, 2, backend="cpu", env_config=config, seed=0, reset_pool_size=8)
    assert native._step.grid == (2, 1, 1) and native._step.block == (1, 1, 1)
    shaped = EnvWrapper(TagContinuous, 2, backend="cpu-gpu", env_config=config, seed=0, reset_pool_size=8)
    limit = shaped.function_manager.get_function("TagContinuousStep").resources.max_threads_per_block
    assert shaped._step.grid == (2, 1, 1) and shaped._step.block == (min(700, limit), 1, 1)


def test_tags_actually_happen_in_the_consistency_configs():
    """Guard against a vacuous check: the reference sees tags, exits and terminations."""
    env = TagContinuous(**CONSISTENCY_CONFIGS[0])
    wrapper = EnvWrapper(env, 4, backend="cpu", seed=0)
    rng = np.random.default_rng(0)
    tagged = terminated = 0
    for _ in range(3 * env.episode_length):
        wrapper.actions.copy_(torch.from_numpy(rng.integers(0, 11, size=(4, env.num_agents, 2)).astype(np.int32)))
        wrapper.step_all_envs()
        tagged += int((wrapper.rewards[:, env.runner_ids] < 0).sum())
        terminated += int(wrapper.terminated.sum())
        wrapper.reset_only_done_envs()
    assert tagged > 10 and terminated > 0


def test_sincos_port_is_bit_exact_on_angles():
    """The reference's sincosf gives wd_sincosf's bits (checked through the kernel's moves):
    a known value set plus the identities the port must keep."""
    x = np.linspace(0, 2 * np.pi, 10001, dtype=np.float32)
    s, c = sincosf(x)
    assert np.abs(s - np.sin(x.astype(np.float64))).max() < 2e-7
    assert np.abs(c - np.cos(x.astype(np.float64))).max() < 2e-7
    assert sincosf(np.float32([0.0]))[1][0] == 1.0


# ---------------------------------------------------------------------------
# the rules the original got wrong
# ---------------------------------------------------------------------------


# How the kernel finds a runner's nearest tagger: with full observation it scans
# every tagger; with partial observation it takes the first tagger of the
# runner's k nearest when they cover the tagging distance (k = 32 here: fewer
# agents than k, or the k-th beyond the margin), and scans otherwise (k = 3:
# the runners packed around a tagger are nearer to each other than the margin).
OBSERVATION_MODES = {
    "full": dict(use_full_observation=True),
    "nearest-32": dict(use_full_observation=False, num_other_agents_observed=32),
    "nearest-3": dict(use_full_observation=False, num_other_agents_observed=3),
}


@pytest.mark.parametrize("observation", sorted(OBSERVATION_MODES))
@pytest.mark.parametrize("tag_reward", [1.0, 0.25])
def test_every_runner_tagged_in_the_same_step_counts(tag_reward, observation, env_backend):
    """One tagger surrounded by 40 runners within the tagging distance: the tagger
    earns 40 tag rewards and the runner count drops by 40 (the original's
    non-atomic += lost most of them)."""
    inside, outside = 40, 5
    angles = np.arange(inside) * (2 * np.pi / inside)
    xs = np.concatenate([[5.0], 5.0 + 0.05 * np.cos(angles), np.linspace(1.0, 9.0, outside)])
    ys = np.concatenate([[5.0], 5.0 + 0.05 * np.sin(angles), np.full(outside, 1.0)])
    wrapper = fixed_env_wrapper(env_backend, xs, ys, 1, num_envs=3, tagging_distance=0.01,
                                tag_reward_for_tagger=tag_reward, **OBSERVATION_MODES[observation])
    before = host_state(wrapper)
    out = step_no_op(wrapper)
    assert np.array_equal(out["loc_x"], before["loc_x"])  # nobody moved
    assert (out["rewards"][:, 0] == np.float32(inside * tag_reward)).all()
    assert (out["rewards"][:, 1:1 + inside] == -1.0).all() and (out["rewards"][:, 1 + inside:] == 0.0).all()
    assert (out["num_runners"] == outside).all()
    assert (out["still_in_the_game"][:, 1:1 + inside] == 0).all()
    assert (out["_done_"] == 0).all()
    expected = reference_after_no_op(wrapper, before)
    assert np.array_equal(expected["rewards"], out["rewards"])
    assert np.array_equal(expected["num_runners"], out["num_runners"])


def test_tagging_every_runner_at_once_terminates(env_backend):
    inside = 30
    angles = np.arange(inside) * (2 * np.pi / inside)
    xs = np.concatenate([[5.0, 2.0], 5.0 + 0.05 * np.cos(angles)])
    ys = np.concatenate([[5.0, 2.0], 5.0 + 0.05 * np.sin(angles)])
    wrapper = fixed_env_wrapper(env_backend, xs, ys, 2, num_envs=2, tagging_distance=0.01)
    out = step_no_op(wrapper)
    assert (out["rewards"][:, 0] == inside).all() and (out["rewards"][:, 1] == 0).all()
    assert (out["num_runners"] == 0).all()
    assert (out["_done_"] == 1).all()


@pytest.mark.parametrize("observation", sorted(OBSERVATION_MODES))
def test_nearest_tagger_ties_go_to_the_smaller_id(observation, env_backend):
    # Runner 2 sits exactly halfway between taggers 0 and 1 (differences exact in float).
    xs = [5.0625, 4.9375, 5.0, 1.0]
    ys = [5.0, 5.0, 5.0, 1.0]
    wrapper = fixed_env_wrapper(env_backend, xs, ys, 2, tagging_distance=0.01, **OBSERVATION_MODES[observation])
    out = step_no_op(wrapper)
    assert (out["rewards"][:, 0] == 1.0).all() and (out["rewards"][:, 1] == 0.0).all()
    assert (out["rewards"][:, 2] == -1.0).all()


def _tie_layout(n: int):
    """Agent 5 at the centre; agents 1, 3, 7, 9 at exactly distance 1 from it (on the
    axes), agents 2, 4 at exactly distance 2; everybody else far away in a corner."""
    xs = np.full(n, 0.5, np.float32)
    ys = np.linspace(0.0, 1.0, n).astype(np.float32)
    for agent, (x, y) in {5: (5, 5), 9: (6, 5), 7: (4, 5), 3: (5, 6), 1: (5, 4), 2: (7, 5), 4: (5, 3)}.items():
        xs[agent], ys[agent] = x, y
    return xs, ys


@pytest.mark.parametrize("n", [12, 90])  # a scan; the neighbour grid
def test_neighbour_ties_go_to_the_smaller_id(n, env_backend):
    xs, ys = _tie_layout(n)
    wrapper = fixed_env_wrapper(env_backend, xs, ys, 1, use_full_observation=False, num_other_agents_observed=3,
                                tagging_distance=0.0)
    before = host_state(wrapper)
    out = step_no_op(wrapper)
    obs = out["observations"][:, 5]
    scale = wrapper.env.position_scale
    # slots 0..2 of the dx and dy features: neighbours 1, 3, 7 (the smallest ids of the four at distance 1)
    assert np.array_equal(obs[:, 0:3], np.tile((xs[[1, 3, 7]] - 5.0) / scale, (2, 1)))
    assert np.array_equal(obs[:, 3:6], np.tile((ys[[1, 3, 7]] - 5.0) / scale, (2, 1)))
    assert np.array_equal(reference_after_no_op(wrapper, before)["observations"], out["observations"])


def test_end_of_game_reward_goes_only_to_runners_still_in_the_game(env_backend):
    """At t == episode_length a runner tagged out on that very step gets the tag
    penalty and no end-of-game reward; an untagged runner gets the reward."""
    xs, ys = [5.0, 5.05, 1.0], [5.0, 5.0, 1.0]
    wrapper = fixed_env_wrapper(env_backend, xs, ys, 1, episode_length=1, tagging_distance=0.01,
                                end_of_game_reward_for_runner=2.0)
    out = step_no_op(wrapper)
    assert np.array_equal(out["rewards"], np.tile(np.float32([1.0, -1.0, 2.0]), (2, 1)))
    assert (out["_done_"] == 2).all()  # truncated: a runner is left


def test_end_of_game_reward_when_runners_stay_in_the_game(env_backend):
    xs, ys = [5.0, 5.05, 1.0], [5.0, 5.0, 1.0]
    wrapper = fixed_env_wrapper(env_backend, xs, ys, 1, episode_length=1, tagging_distance=0.01,
                                end_of_game_reward_for_runner=2.0, runner_exits_game_after_tagged=False)
    out = step_no_op(wrapper)
    assert np.array_equal(out["rewards"], np.tile(np.float32([1.0, 1.0, 2.0]), (2, 1)))  # -1 + 2 for the tagged one
    assert (out["_done_"] == 2).all()


def test_last_runner_tagged_on_the_last_step_terminates(env_backend):
    xs, ys = [5.0, 5.05], [5.0, 5.0]
    wrapper = fixed_env_wrapper(env_backend, xs, ys, 1, episode_length=1, tagging_distance=0.01)
    out = step_no_op(wrapper)
    assert np.array_equal(out["rewards"], np.tile(np.float32([1.0, -1.0]), (2, 1)))
    assert (out["_done_"] == 1).all()  # terminated wins over truncated


def test_observation_of_agents_out_of_the_game(env_backend):
    """Partial: an observer out of the game sees zeros; full: zero deltas and time,
    but the others' types and flags."""
    xs, ys = [5.0, 5.05, 1.0, 9.0], [5.0, 5.0, 1.0, 9.0]
    for full in (True, False):
        wrapper = fixed_env_wrapper(env_backend, xs, ys, 1, episode_length=5, tagging_distance=0.01,
                                    use_full_observation=full, num_other_agents_observed=2)
        step_no_op(wrapper)  # runner 1 is tagged out
        obs = step_no_op(wrapper)["observations"][0]
        if full:
            width = 3
            assert (obs[1, :5 * width] == 0).all() and obs[1, -1] == 0.0
            assert np.array_equal(obs[1, 5 * width:6 * width], [1.0, 0.0, 0.0])  # types of 0, 2, 3
            assert np.array_equal(obs[1, 6 * width:7 * width], [1.0, 1.0, 1.0])  # flags of 0, 2, 3
            assert obs[0, 6 * width] == 0.0  # agent 0 sees runner 1 out of the game
        else:
            assert (obs[1] == 0).all()
            assert obs[0, -1] == np.float32(2 / 5)


# ---------------------------------------------------------------------------
# start states
# ---------------------------------------------------------------------------


def test_each_reset_draws_a_new_start_and_a_seed_repeats_them():
    def starts(seed):
        wrapper = EnvWrapper(TagContinuous, 3, backend="cpu", seed=seed, env_config=dict(seed=0), reset_pool_size=50)
        out = []
        for _ in range(3):
            wrapper.reset_all_envs()
            out.append((wrapper.data_manager.pull_data_from_device("loc_x"),
                        wrapper.data_manager.pull_data_from_device("direction"),
                        wrapper.obs.cpu().clone().numpy()))
        return wrapper, out

    wrapper, first = starts(seed=11)
    _, again = starts(seed=11)
    _, other = starts(seed=12)
    assert not np.array_equal(first[0][0], first[1][0])
    for (x, d, o), (x2, d2, o2) in zip(first, again):
        assert np.array_equal(x, x2) and np.array_equal(d, d2) and np.array_equal(o, o2)
    assert not all(np.array_equal(a[0], b[0]) for a, b in zip(first, other))
    # the observations at reset are those of the drawn state at t = 0
    env, dm = wrapper.env, wrapper.data_manager
    x, y, d = (dm.pull_data_from_device(name) for name in ("loc_x", "loc_y", "direction"))
    assert np.array_equal(wrapper.obs.numpy(), env._start_observations(x, y, d))
    assert set(np.unique(d)) <= set(np.float32([0, np.pi / 2, np.pi, 3 * np.pi / 2]))


def test_fixed_starts_repeat_and_do_not_touch_the_global_generator():
    state = np.random.get_state()[1].copy()
    env = TagContinuous(seed=5, random_starts=False)
    assert np.array_equal(np.random.get_state()[1], state)
    wrapper = EnvWrapper(env, 2, backend="cpu", seed=0)
    first = wrapper.data_manager.pull_data_from_device("loc_x")
    wrapper.step_all_envs()
    wrapper.reset_all_envs()
    assert np.array_equal(wrapper.data_manager.pull_data_from_device("loc_x"), first)
    assert np.array_equal(first[0], env.starting_location_x)
    assert TagContinuous(seed=5).tagger_ids.tolist() == env.tagger_ids.tolist()


def test_pools_are_capped_in_bytes():
    env = TagContinuous(num_taggers=2, num_runners=98, use_full_observation=False, num_other_agents_observed=4,
                        pool_max_bytes=200_000)
    pools = env.get_reset_pools(1000, np.random.default_rng(0))
    rows = env.pool_rows(1000)
    assert 1 <= rows < 1000
    assert {name: p.shape[0] for name, p in pools.items()} == dict.fromkeys(pools, rows)
    assert pools["observations"].shape == (rows, 100, 29)


# ---------------------------------------------------------------------------
# spaces and configuration
# ---------------------------------------------------------------------------


def test_spaces_groups_and_defaults():
    env = TagContinuous(seed=0)
    assert env.num_agents == 11 and env.episode_length == 100
    assert env.observation_space(0).shape == (7 * 10 + 1,)
    assert list(env.action_space(3).nvec) == [11, 11]
    assert env.acceleration_actions[0] == 0 and env.turn_actions[0] == 0
    assert np.allclose(env.acceleration_actions[1:], np.linspace(-1, 1, 10))
    groups = env.agent_groups()
    assert len(groups["tagger"]) == 1 and sorted(groups["tagger"] + groups["runner"]) == list(range(11))
    partial = TagContinuous(use_full_observation=False, num_other_agents_observed=5)
    assert partial.observation_space(0).shape == (36,)


def test_too_many_observed_neighbours_is_refused():
    with pytest.raises(ValueError, match="num_other_agents_observed"):
        TagContinuous(use_full_observation=False, num_other_agents_observed=TagContinuous.MAX_NEIGHBORS + 1)
    TagContinuous(use_full_observation=True, num_other_agents_observed=100)  # irrelevant with full observation


def test_invalid_configurations_are_refused():
    for bad in (dict(num_taggers=0), dict(num_runners=0), dict(tagging_distance=1.5), dict(edge_hit_penalty=0.5),
                dict(starting_location_x=[1.0] * 11)):
        with pytest.raises(ValueError):
            TagContinuous(**bad)


# ---------------------------------------------------------------------------
# GPU (skipped without one): the same checks on the device, and envs spanning blocks
# ---------------------------------------------------------------------------


@pytest.mark.gpu
@pytest.mark.parametrize("config", [CONSISTENCY_CONFIGS[0], CONSISTENCY_CONFIGS[3], CONSISTENCY_CONFIGS[4]],
                         ids=["full", "partial-120", "partial-70-k32"])
def test_kernel_matches_reference_on_the_gpu(config):
    check(TagContinuous, configs=[config], num_envs=4, num_episodes=2, backend="pycuda", seed=7, reset_pool_size=16)


@pytest.mark.gpu
def test_env_larger_than_the_kernels_block_on_the_gpu():
    """1101 agents in one block of at most the kernel's own limit: threads loop over agents."""
    config = dict(num_taggers=21, num_runners=1080, episode_length=4, use_full_observation=False,
                  num_other_agents_observed=5, tagging_distance=0.05, seed=8)
    report = check(TagContinuous, configs=[config], num_envs=3, num_episodes=2, backend="pycuda", seed=3,
                   reset_pool_size=4)[0]
    assert report.steps == 8
