"""TagGridWorld: hand-computed golden episodes, kernel-vs-reference consistency,
the nearest-tagger search across threads, random starts, and a wrapper that
needs no host-uploaded constant table.

The golden episodes are run through the CUDA C kernel (EnvWrapper on the cpu
executor, native and GPU-shaped) and through ``reference_step``, and every side
must reproduce the values written out by hand below. The kernel is written as
phases over agents, so it must give the same bits with one thread per env
(native ``cpu``) as with one thread per agent, or fewer threads than agents
(``cpu-gpu`` past 1024 agents).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from gymnasium import spaces

from example_envs.tag_gridworld.tag_gridworld import TagGridWorld
from warp_drive.env.consistency import ConsistencyError, check
from warp_drive.env_wrapper import EnvWrapper
from warp_drive.env.environment import AGENT_PHASES
from warp_drive.env.registry import get_env_class

f32 = np.float32
STAY, EAST, WEST, NORTH, SOUTH = 0, 1, 2, 3, 4  # +x = EAST, +y = NORTH

# Two taggers (ids 0, 1) and the runner (id 2) on a 5 x 5 grid (cells 0..4).
SMALL = dict(num_taggers=2, grid_length=4, episode_length=5)
# Taggers start at (L//2, L//2) = (2, 2), the runner at (0, 0).
#   step 1: T0 W -> (1,2); T1 S -> (2,1); R W -> (-1,0) clipped to (0,0): wall hit
#   step 2: T0 W -> (0,2); T1 S -> (2,0); R S -> (0,-1) clipped to (0,0): wall hit
#   step 3: T0 stays (0,2); T1 W -> (1,0); R stays
#   step 4: T0 W -> (-1,2) clipped to (0,2): wall hit; T1 W -> (0,0): TAG; R stays
TAG_EPISODE = [[WEST, SOUTH, WEST], [WEST, SOUTH, SOUTH], [STAY, WEST, STAY], [WEST, WEST, STAY]]
TAG_POSITIONS = [  # (x, y) of T0, T1, R after each step
    [(1, 2), (2, 1), (0, 0)],
    [(0, 2), (2, 0), (0, 0)],
    [(0, 2), (1, 0), (0, 0)],
    [(0, 2), (0, 0), (0, 0)],
]
WALL, STEP_COST, TAG_REWARD, TAG_PENALTY = f32(0.1), f32(0.01), f32(10.0), f32(2.0)
TAG_REWARDS = [  # float32, in the kernel's order: wall penalties first, then the bonus
    [-STEP_COST, -STEP_COST, (f32(0) - WALL) + STEP_COST],
    [-STEP_COST, -STEP_COST, (f32(0) - WALL) + STEP_COST],
    [-STEP_COST, -STEP_COST, STEP_COST],
    [(f32(0) - WALL) + TAG_REWARD, TAG_REWARD, -TAG_PENALTY],
]
TAG_DONE = [0, 0, 0, 1]
# Decimal values of the same rewards, to show what the float32 expressions mean.
TAG_REWARDS_DECIMAL = [[-0.01, -0.01, -0.09], [-0.01, -0.01, -0.09], [-0.01, -0.01, 0.01], [9.9, 10.0, -2.0]]

# Full observation of agent i: [x/4 of T0,T1,R, y/4 of T0,T1,R, types 0,0,1, one-hot(i), t/5].
TAG_FULL_OBS = [
    [[0.25, 0.5, 0.0, 0.5, 0.25, 0.0, 0, 0, 1, 1, 0, 0, 0.2],
     [0.25, 0.5, 0.0, 0.5, 0.25, 0.0, 0, 0, 1, 0, 1, 0, 0.2],
     [0.25, 0.5, 0.0, 0.5, 0.25, 0.0, 0, 0, 1, 0, 0, 1, 0.2]],
    [[0.0, 0.5, 0.0, 0.5, 0.0, 0.0, 0, 0, 1, 1, 0, 0, 0.4],
     [0.0, 0.5, 0.0, 0.5, 0.0, 0.0, 0, 0, 1, 0, 1, 0, 0.4],
     [0.0, 0.5, 0.0, 0.5, 0.0, 0.0, 0, 0, 1, 0, 0, 1, 0.4]],
    [[0.0, 0.25, 0.0, 0.5, 0.0, 0.0, 0, 0, 1, 1, 0, 0, 0.6],
     [0.0, 0.25, 0.0, 0.5, 0.0, 0.0, 0, 0, 1, 0, 1, 0, 0.6],
     [0.0, 0.25, 0.0, 0.5, 0.0, 0.0, 0, 0, 1, 0, 0, 1, 0.6]],
    [[0.0, 0.0, 0.0, 0.5, 0.0, 0.0, 0, 0, 1, 1, 0, 0, 0.8],
     [0.0, 0.0, 0.0, 0.5, 0.0, 0.0, 0, 0, 1, 0, 1, 0, 0.8],
     [0.0, 0.0, 0.0, 0.5, 0.0, 0.0, 0, 0, 1, 0, 0, 1, 0.8]],
]
# Partial observation: [own x/4, own y/4, target x/4, target y/4, own type, t/5].
# Taggers target the runner. The runner targets its nearest tagger: step 1 is a
# tie (squared distances 5 and 5) and step 2 too (4 and 4): the lowest id, T0,
# wins; at step 3 T1 (1) is nearer than T0 (4); at step 4 T1 shares its cell.
TAG_PARTIAL_OBS = [
    [[0.25, 0.5, 0.0, 0.0, 0, 0.2], [0.5, 0.25, 0.0, 0.0, 0, 0.2], [0.0, 0.0, 0.25, 0.5, 1, 0.2]],
    [[0.0, 0.5, 0.0, 0.0, 0, 0.4], [0.5, 0.0, 0.0, 0.0, 0, 0.4], [0.0, 0.0, 0.0, 0.5, 1, 0.4]],
    [[0.0, 0.5, 0.0, 0.0, 0, 0.6], [0.25, 0.0, 0.0, 0.0, 0, 0.6], [0.0, 0.0, 0.25, 0.0, 1, 0.6]],
    [[0.0, 0.5, 0.0, 0.0, 0, 0.8], [0.0, 0.0, 0.0, 0.0, 0, 0.8], [0.0, 0.0, 0.0, 0.0, 1, 0.8]],
]


# ------------------------------------------------------------------ drivers
def run_kernel(config: dict, actions_per_step: list, num_envs: int = 1, backend: str = "cpu") -> list[dict]:
    """Step the kernel through EnvWrapper; snapshot after each step.

    ``actions_per_step[t]`` is (num_envs, N) or (N,) (the same for every env).
    """
    wrapper = EnvWrapper(TagGridWorld, num_envs, backend=backend, seed=0, env_config=config)
    dm = wrapper.data_manager
    snapshots = []
    for actions in actions_per_step:
        actions = np.broadcast_to(np.asarray(actions, np.int32), tuple(wrapper.actions.shape))
        wrapper.actions.copy_(torch.from_numpy(np.array(actions, np.int32)))
        wrapper.step_all_envs()
        snapshots.append({name: dm.pull_data_from_device(name) for name in
                          ("loc_x", "loc_y", "rewards", "observations", "_done_", "_timestep_")})
    return snapshots


def reference_arrays(env: TagGridWorld, num_envs: int) -> dict:
    """The host arrays ``reference_step`` works on, built from the env's own feed."""
    feed = env.data_dictionary(num_envs)
    arrays = {name: (np.array(entry["data"]) if isinstance(entry["data"], np.ndarray) else entry["data"])
              for name, entry in feed.items()}
    arrays.update(_done_=np.zeros(num_envs, np.int32), _timestep_=np.zeros(num_envs, np.int32),
                  n_agents=env.num_agents, episode_length=env.episode_length)
    return arrays


def run_reference(config: dict, actions_per_step: list, num_envs: int = 1) -> list[dict]:
    env = TagGridWorld(**config)
    arrays = reference_arrays(env, num_envs)
    snapshots = []
    for actions in actions_per_step:
        arrays["sampled_actions"][...] = np.asarray(actions, np.int32)
        env.reference_step(arrays)
        snapshots.append({name: arrays[name].copy() for name in
                          ("loc_x", "loc_y", "rewards", "observations", "_done_", "_timestep_")})
    return snapshots


RUNNERS = {
    "kernel": run_kernel,
    "kernel_cpu_gpu": lambda *args, **kwargs: run_kernel(*args, **kwargs, backend="cpu-gpu"),
    "kernel_gpu": lambda *args, **kwargs: run_kernel(*args, **kwargs, backend="pycuda"),
    "reference": run_reference,
}
SIDES = ["kernel", "kernel_cpu_gpu", pytest.param("kernel_gpu", marks=pytest.mark.gpu), "reference"]
# Executors of the kernel: the cpu one in both shapes (one thread per env; the
# GPU's block of one thread per agent up to the kernel's limit) and a real GPU.
EXECUTORS = ["cpu", "cpu-gpu", pytest.param("pycuda", marks=pytest.mark.gpu)]


# ------------------------------------------------------------------ golden episodes
@pytest.mark.parametrize("side", SIDES)
@pytest.mark.parametrize("full", [True, False], ids=["full_obs", "partial_obs"])
def test_golden_tag_episode(side, full):
    """Wall hits, a nearest-tagger tie, and a tag with exact rewards and done == 1.

    Env 1 runs beside env 0 with every agent staying put: it must not be
    affected by env 0 (and earns plain step costs, no wall hits, no tag).
    """
    config = dict(SMALL, use_full_observation=full)
    actions = [np.array([step, [STAY] * 3], np.int32) for step in TAG_EPISODE]
    snapshots = RUNNERS[side](config, actions, num_envs=2)
    expected_obs = TAG_FULL_OBS if full else TAG_PARTIAL_OBS
    for t, snap in enumerate(snapshots):
        msg = f"{side}, step {t + 1}"
        np.testing.assert_array_equal(snap["loc_x"][0], [p[0] for p in TAG_POSITIONS[t]], err_msg=msg)
        np.testing.assert_array_equal(snap["loc_y"][0], [p[1] for p in TAG_POSITIONS[t]], err_msg=msg)
        np.testing.assert_array_equal(snap["rewards"][0], np.array(TAG_REWARDS[t], f32), err_msg=msg)
        np.testing.assert_allclose(snap["rewards"][0], TAG_REWARDS_DECIMAL[t], atol=1e-6, err_msg=msg)
        # Every observation value here is k/4 or t/5: k/4 is exact, t/5 is the rounded float32.
        np.testing.assert_array_equal(snap["observations"][0], np.array(expected_obs[t], f32), err_msg=msg)
        assert snap["_done_"][0] == TAG_DONE[t], msg
        assert snap["_timestep_"][0] == t + 1, msg
        # The idle env: fixed positions, step costs only, never done before the limit.
        np.testing.assert_array_equal(snap["loc_x"][1], [2, 2, 0], err_msg=msg)
        np.testing.assert_array_equal(snap["loc_y"][1], [2, 2, 0], err_msg=msg)
        np.testing.assert_array_equal(snap["rewards"][1], [-STEP_COST, -STEP_COST, STEP_COST], err_msg=msg)
        assert snap["_done_"][1] == 0 and snap["_timestep_"][1] == t + 1, msg
    assert snapshots[1]["observations"].shape == (2, 3, 13 if full else 6)


@pytest.mark.parametrize("side", SIDES)
def test_golden_truncation(side):
    """Nobody moves: no tag, so the episode is truncated at t == episode_length (done == 2)."""
    config = dict(num_taggers=2, grid_length=4, episode_length=3, use_full_observation=False)
    snapshots = RUNNERS[side](config, [[STAY] * 3] * 3)
    assert [int(s["_done_"][0]) for s in snapshots] == [0, 0, 2]
    third = f32(1) / f32(3)
    for t, snap in enumerate(snapshots):
        np.testing.assert_array_equal(snap["rewards"][0], [-STEP_COST, -STEP_COST, STEP_COST])
        time_feature = [third, f32(2) / f32(3), f32(1)][t]
        assert abs(float(time_feature) - (t + 1) / 3) < 1e-7
        np.testing.assert_array_equal(
            snap["observations"][0],
            np.array([[0.5, 0.5, 0.0, 0.0, 0, time_feature],
                      [0.5, 0.5, 0.0, 0.0, 0, time_feature],
                      [0.0, 0.0, 0.5, 0.5, 1, time_feature]], f32))


@pytest.mark.parametrize("side", SIDES)
def test_golden_tag_on_the_last_step_terminates(side):
    """A tag at t == episode_length is a termination (1), not a truncation (2).

    One tagger at (1, 0), the runner at (0, 0) on a 3 x 3 grid; the tagger waits
    one step, then steps west onto the runner at t == 2 == episode_length.
    """
    config = dict(num_taggers=1, grid_length=2, episode_length=2, starting_location_x=[1, 0],
                  starting_location_y=[0, 0])
    snapshots = RUNNERS[side](config, [[STAY, STAY], [WEST, STAY]])
    assert [int(s["_done_"][0]) for s in snapshots] == [0, 1]
    np.testing.assert_array_equal(snapshots[1]["rewards"][0], [TAG_REWARD, -TAG_PENALTY])
    # Full obs, 4N + 1 = 9: [x/2, y/2, types, one-hot, t/2].
    np.testing.assert_array_equal(snapshots[1]["observations"][0],
                                  np.array([[0, 0, 0, 0, 0, 1, 1, 0, 1],
                                            [0, 0, 0, 0, 0, 1, 0, 1, 1]], f32))


@pytest.mark.parametrize("side", SIDES)
def test_golden_corner_wall_hit_counts_per_axis(side):
    """The penalty is per clipped axis; a single move clips one axis, and
    clipping never lets an agent leave the grid from any side."""
    config = dict(num_taggers=2, grid_length=3, episode_length=10, starting_location_x=[3, 3, 0],
                  starting_location_y=[3, 0, 3])
    # T0 at the (3,3) corner pushes east, T1 at (3,0) pushes south, R at (0,3) pushes north.
    snapshots = RUNNERS[side](config, [[EAST, SOUTH, NORTH], [NORTH, EAST, WEST]])
    np.testing.assert_array_equal(snapshots[0]["loc_x"][0], [3, 3, 0])
    np.testing.assert_array_equal(snapshots[0]["loc_y"][0], [3, 0, 3])
    wall_then_cost = (f32(0) - WALL) - STEP_COST
    np.testing.assert_array_equal(snapshots[0]["rewards"][0],
                                  [wall_then_cost, wall_then_cost, (f32(0) - WALL) + STEP_COST])
    np.testing.assert_array_equal(snapshots[1]["rewards"][0],
                                  [wall_then_cost, wall_then_cost, (f32(0) - WALL) + STEP_COST])


# ------------------------------------------------------------------ consistency
CONSISTENCY_CONFIGS = [
    dict(num_taggers=2, grid_length=4, episode_length=12),
    dict(num_taggers=2, grid_length=4, episode_length=12, use_full_observation=False),
    dict(num_taggers=5, grid_length=7, episode_length=15, random_starts=True),
    dict(num_taggers=6, grid_length=3, episode_length=15, random_starts=True, use_full_observation=False),
    dict(num_taggers=1, grid_length=1, episode_length=6, use_full_observation=False, random_starts=True),
    dict(num_taggers=33, grid_length=20, episode_length=10, use_full_observation=False),
    dict(),  # the defaults: 10 taggers, L = 10, 100 steps
]


@pytest.mark.parametrize("backend", EXECUTORS)
def test_kernel_matches_reference(backend):
    """Random actions every step, several configs, >= 2 episodes each, exact agreement
    (also checks that resets restore twins or one common pool row)."""
    reports = check(TagGridWorld, CONSISTENCY_CONFIGS, num_envs=4, num_episodes=2, backend=backend, seed=0)
    assert len(reports) == len(CONSISTENCY_CONFIGS)
    for report in reports:
        assert report.steps == 2 * TagGridWorld(**report.config).episode_length
        assert {"loc_x", "loc_y", "observations", "rewards", "_done_", "_timestep_"} <= set(report.arrays)
    # The runs did end episodes both ways somewhere, so both done codes were compared.
    assert sum(r.terminated for r in reports) > 0
    assert sum(r.truncated for r in reports) > 0


# Many agents: 1000 fit one GPU-shaped block of one thread per agent; 1100 do not,
# so there threads 0..75 each run two agents (i and i + 1024). Small grids make
# ties for the nearest tagger, and tags, common.
LARGE_CONFIGS = [
    dict(num_taggers=999, grid_length=40, episode_length=4, use_full_observation=False, random_starts=True),
    dict(num_taggers=1099, grid_length=12, episode_length=3, use_full_observation=False, random_starts=True),
    dict(num_taggers=1099, grid_length=30, episode_length=2),
]


@pytest.mark.parametrize("backend", EXECUTORS)
def test_kernel_matches_reference_with_many_agents(backend):
    reports = check(TagGridWorld, LARGE_CONFIGS, num_envs=2, num_episodes=1, backend=backend, seed=5,
                    reset_pool_size=8)
    assert [r.steps for r in reports] == [c["episode_length"] for c in LARGE_CONFIGS]
    assert sum(r.terminated for r in reports) > 0


def _one_step_on_fixed_cells(backend, cells, actions, grid_length=20):
    """One step of one env whose agents start on ``cells`` [(x, y), ...] (the
    runner last) and take ``actions``; returns the wrapper after the step."""
    xs, ys = zip(*cells)
    config = dict(num_taggers=len(cells) - 1, grid_length=grid_length, episode_length=5,
                  use_full_observation=False, starting_location_x=list(xs), starting_location_y=list(ys))
    wrapper = EnvWrapper(TagGridWorld, 1, backend=backend, seed=0, env_config=config)
    wrapper.actions.copy_(torch.tensor([actions], dtype=torch.int32))
    wrapper.step_all_envs()
    return wrapper


def _threads_per_env(wrapper):
    _, block, _ = wrapper.function_manager.env_geometry(TagGridWorld.step_kernel, AGENT_PHASES)
    return block[0]


@pytest.mark.parametrize("backend", EXECUTORS)
@pytest.mark.parametrize("num_agents, near", [
    (5, [3, 1]),  # one thread per agent on a GPU: the winner is neither thread 0's nor the last one's
    (1100, [1030, 7]),  # 1030 runs in thread 6, before agent 7's thread: the lower id still wins
    (1100, [1050, 1025, 1098]),  # each the second agent of its thread (26, 1, 74): 1025 wins
], ids=["5_agents", "1100_agents_second_agent_vs_first", "1100_agents_second_agents"])
def test_nearest_tagger_ties_go_to_the_lowest_id_across_threads(backend, num_agents, near):
    """Taggers ``near`` stand at the same distance from the runner, nearer than
    every other tagger; whichever threads hold them, the runner observes the
    lowest id. Each tie is at a different cell, so the observation tells which won."""
    runner = (10, 10)
    around = [(10, 12), (8, 10), (12, 10), (10, 8)]  # squared distance 4 each
    cells = [(0, 0)] * (num_agents - 1) + [runner]  # far taggers: squared distance 200
    for tagger, cell in zip(near, around):
        cells[tagger] = cell
    wrapper = _one_step_on_fixed_cells(backend, cells, [STAY] * num_agents)
    winner = cells[min(near)]
    obs = wrapper.data_manager.pull_data_from_device("observations")[0, -1]
    np.testing.assert_array_equal(obs[:4], np.array([10, 10, *winner], f32) / f32(20))
    assert int(wrapper.data_manager.pull_data_from_device("_done_")[0]) == 0
    if backend == "cpu-gpu":  # the GPU's shape: one thread per agent up to 1024
        assert _threads_per_env(wrapper) == min(num_agents, 1024)
    elif backend == "cpu":  # one thread per env runs every agent
        assert _threads_per_env(wrapper) == 1


@pytest.mark.parametrize("backend", EXECUTORS)
def test_nearest_tagger_on_the_largest_grid(backend):
    """At L = MAX_GRID_LENGTH squared distances are exact integers: tagger 1
    (L^2) beats tagger 0 (L^2 + 1, the same float32) and tagger 2 in the far
    corner (2 L^2 >= 2^31, negative as a signed 32-bit int)."""
    L = 46340
    wrapper = _one_step_on_fixed_cells(backend, [(0, L - 1), (0, L), (0, 0), (L, L)], [STAY] * 4, grid_length=L)
    obs = wrapper.data_manager.pull_data_from_device("observations")[0, -1]
    np.testing.assert_array_equal(obs[:4], [1, 1, 0, 1])


@pytest.mark.parametrize("backend", EXECUTORS)
def test_a_tag_by_a_threads_second_agent_counts(backend):
    """1100 agents: tagger 1050 (the second agent of its GPU-shaped thread) steps
    onto the runner's cell; everyone learns of the tag."""
    cells = [(0, 0)] * 1099 + [(10, 10)]
    cells[1050] = (9, 10)
    actions = [STAY] * 1100
    actions[1050] = EAST
    wrapper = _one_step_on_fixed_cells(backend, cells, actions)
    dm = wrapper.data_manager
    assert int(dm.pull_data_from_device("_done_")[0]) == 1
    np.testing.assert_array_equal(dm.pull_data_from_device("rewards")[0], [TAG_REWARD] * 1099 + [-TAG_PENALTY])
    assert dm.pull_data_from_device("loc_x")[0, 1050] == 10
    np.testing.assert_array_equal(dm.pull_data_from_device("observations")[0, -1, :4], [0.5, 0.5, 0.5, 0.5])


def test_checker_catches_a_wrong_reference():
    """The consistency check is not vacuous: a reference that breaks nearest-tagger
    ties towards the highest id is caught."""

    class HighestIdTies(TagGridWorld):
        def compute_observations(self, loc_x, loc_y, timestep, *args, **kwargs):
            obs = super().compute_observations(loc_x, loc_y, timestep, *args, **kwargs)
            if obs.shape[-1] == 6:  # partial: re-pick the runner's target with the last minimum
                n = loc_x.shape[1]
                d2 = (loc_x[:, :-1] - loc_x[:, -1:]) ** 2 + (loc_y[:, :-1] - loc_y[:, -1:]) ** 2
                target = n - 2 - np.argmin(d2[:, ::-1], axis=1)
                length = f32(self.grid_length)
                rows = np.arange(len(target))
                obs[:, -1, 2] = loc_x[rows, target].astype(f32) / length
                obs[:, -1, 3] = loc_y[rows, target].astype(f32) / length
            return obs

    config = dict(num_taggers=4, grid_length=2, episode_length=20, use_full_observation=False)
    with pytest.raises(ConsistencyError, match="observations"):
        check(HighestIdTies, [config], num_envs=4, num_episodes=2, backend="cpu", seed=1)


# ------------------------------------------------------------------ random starts
def _starts(wrapper: EnvWrapper) -> np.ndarray:
    dm = wrapper.data_manager
    return np.stack([dm.pull_data_from_device("loc_x"), dm.pull_data_from_device("loc_y")], axis=-1)


def _start_sequence(seed: int, resets: int = 6, num_envs: int = 1, **config) -> list[np.ndarray]:
    wrapper = EnvWrapper(TagGridWorld, num_envs, backend="cpu", seed=seed,
                         env_config=dict(random_starts=True, **config))
    sequence = [_starts(wrapper)]  # the constructor's reset already drew a start
    for _ in range(resets - 1):
        wrapper.reset_all_envs()
        sequence.append(_starts(wrapper))
    return sequence


def test_random_starts_differ_between_resets_and_match_observations():
    config = dict(num_taggers=3, grid_length=6, episode_length=10, use_full_observation=False)
    wrapper = EnvWrapper(TagGridWorld, 2, backend="cpu", seed=3, env_config=dict(random_starts=True, **config))
    env, dm = wrapper.env, wrapper.data_manager
    seen = []
    for _ in range(5):
        starts = _starts(wrapper)
        seen.append(starts[0].tobytes())
        # The observations describe the drawn positions at t = 0.
        expected = env.compute_observations(starts[..., 0], starts[..., 1], np.zeros(2, np.int32))
        np.testing.assert_array_equal(dm.pull_data_from_device("observations"), expected)
        # No tagger starts on the runner's cell; every start is on the grid.
        assert not (starts[:, :-1] == starts[:, -1:]).all(axis=-1).any()
        assert starts.min() >= 0 and starts.max() <= env.grid_length
        wrapper.reset_all_envs()
    assert len(set(seen)) >= 4, "env 0 got (nearly) the same start at every reset"

    # A done env is reset to a new random start by reset_only_done_envs, the other is untouched.
    before = _starts(wrapper)
    wrapper.done.copy_(torch.tensor([1, 0], dtype=torch.int32))
    wrapper.reset_only_done_envs()
    after = _starts(wrapper)
    np.testing.assert_array_equal(after[1], before[1])
    assert not np.array_equal(after[0], before[0])


def test_random_starts_are_reproducible_from_the_seed():
    config = dict(num_taggers=4, grid_length=8)
    first = _start_sequence(11, num_envs=3, **config)
    again = _start_sequence(11, num_envs=3, **config)
    other = _start_sequence(12, num_envs=3, **config)
    for a, b in zip(first, again):
        np.testing.assert_array_equal(a, b)
    assert any(not np.array_equal(a, c) for a, c in zip(first, other))
    # The envs of one wrapper do not all start alike.
    assert any(not np.array_equal(s[0], s[1]) for s in first)


def test_reset_pools():
    env = TagGridWorld(num_taggers=3, grid_length=5, random_starts=True)
    pools = env.get_reset_pools(50, np.random.default_rng(0))
    assert set(pools) == {"loc_x", "loc_y", "observations"}
    assert pools["loc_x"].shape == pools["loc_y"].shape == (50, 4) and pools["loc_x"].dtype == np.int32
    assert pools["observations"].shape == (50, 4, 17) and pools["observations"].dtype == np.float32
    again = env.get_reset_pools(50, np.random.default_rng(0))
    for name in pools:
        np.testing.assert_array_equal(pools[name], again[name])
    cells = pools["loc_x"] * 6 + pools["loc_y"]
    assert len(np.unique(cells[:, -1])) > 10  # the runner's start varies too
    assert TagGridWorld(num_taggers=3, grid_length=5).get_reset_pools(50, np.random.default_rng(0)) == {}


def test_fixed_starts_reset_to_the_default_cells():
    wrapper = EnvWrapper(TagGridWorld, 2, backend="cpu", seed=0, env_config=dict(SMALL))
    wrapper.actions.fill_(EAST)
    for _ in range(3):
        wrapper.step_all_envs()
    wrapper.reset_all_envs()
    starts = _starts(wrapper)
    np.testing.assert_array_equal(starts[..., 0], [[2, 2, 0]] * 2)
    np.testing.assert_array_equal(starts[..., 1], [[2, 2, 0]] * 2)
    expected = wrapper.env.compute_observations(starts[..., 0], starts[..., 1], np.zeros(2, np.int32))
    np.testing.assert_array_equal(wrapper.data_manager.pull_data_from_device("observations"), expected)
    assert int(wrapper.data_manager.pull_data_from_device("_timestep_").max()) == 0


# ------------------------------------------------------------------ no constant table
def test_fresh_wrapper_moves_agents_without_any_constant_upload():
    """The original kept the move table in a __constant__ symbol the host had to
    upload, or every action was a silent no-op. Here a fresh wrapper's first step moves."""
    source = Path(TagGridWorld.cuda_source_path()).read_text()
    code = "\n".join(line.split("//", 1)[0] for line in source.splitlines())
    assert "__constant__" not in code
    wrapper = EnvWrapper("TagGridWorld", 3, backend="cpu", seed=0)  # the defaults, by registered name
    assert wrapper.data_manager.shared_constant_names == []
    wrapper.actions.fill_(EAST)
    wrapper.step_all_envs()
    loc_x = wrapper.data_manager.pull_data_from_device("loc_x")
    np.testing.assert_array_equal(loc_x, [[6] * 10 + [1]] * 3)
    wrapper.actions.fill_(NORTH)
    wrapper.step_all_envs()
    np.testing.assert_array_equal(wrapper.data_manager.pull_data_from_device("loc_y"), [[6] * 10 + [1]] * 3)


# ------------------------------------------------------------------ class surface
def test_spaces_groups_and_data_layout():
    assert get_env_class("TagGridWorld") is TagGridWorld
    env = TagGridWorld()
    assert (env.num_agents, env.grid_length, env.episode_length) == (11, 10, 100)
    assert env.agent_groups() == {"tagger": list(range(10)), "runner": [10]}
    assert env.action_space(0) == spaces.Discrete(5)
    box = env.observation_space(10)
    assert box.shape == (45,) and box.dtype == np.float32 and box.low.min() == 0 and box.high.max() == 1
    assert TagGridWorld(use_full_observation=False).observation_space(3).shape == (6,)

    feed = env.data_dictionary(4)
    for name in ("loc_x", "loc_y"):
        assert feed[name]["data"].shape == (4, 11) and feed[name]["data"].dtype == np.int32
        assert feed[name]["attributes"]["save_copy_and_apply_at_reset"]
    assert feed["observations"]["data"].shape == (4, 11, 45)
    assert feed["observations"]["attributes"]["save_copy_and_apply_at_reset"]
    assert feed["sampled_actions"]["data"].dtype == np.int32 and feed["rewards"]["data"].dtype == np.float32
    np.testing.assert_array_equal(feed["agent_types"]["data"], [0] * 10 + [1])
    assert feed["world_boundary"]["data"] == 10 and feed["use_full_observation"]["data"] == 1
    # Every observation lies in its Box, at the start and after random play.
    assert box.contains(feed["observations"]["data"][0, 10])

    with pytest.raises(ValueError):
        TagGridWorld(num_taggers=0)
    with pytest.raises(ValueError):
        TagGridWorld(num_taggers=1, starting_location_x=[0, 11])
    with pytest.raises(ValueError):
        TagGridWorld(wall_hit_penalty=-0.1)
    with pytest.raises(ValueError, match=r"grid_length=46341: must be <= 46340"):
        TagGridWorld(grid_length=46341)
    assert TagGridWorld(grid_length=46340).grid_length == 46340
    # No limit on agents: an env is one block, however many agents it has.
    assert TagGridWorld(num_taggers=5000).num_agents == 5001


def test_observations_stay_in_their_box_during_play():
    rng = np.random.default_rng(0)
    for full in (True, False):
        wrapper = EnvWrapper(TagGridWorld, 8, backend="cpu", seed=0,
                             env_config=dict(num_taggers=3, grid_length=5, episode_length=20,
                                             random_starts=True, use_full_observation=full))
        box = wrapper.env.observation_space(0)
        for _ in range(45):
            wrapper.actions.copy_(torch.from_numpy(rng.integers(0, 5, size=(8, 4), dtype=np.int32)))
            wrapper.step_all_envs()
            obs = wrapper.obs.numpy()
            assert all(box.contains(obs[e, a]) for e in range(8) for a in range(4))
            wrapper.reset_only_done_envs()
