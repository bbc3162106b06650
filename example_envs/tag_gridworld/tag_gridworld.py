"""TagGridWorld: ``num_taggers`` taggers chase one runner on a square grid of cells.

The game (WarpDrive's gridworld Tag, kept as it was):

* ``N = num_taggers + 1`` agents; ids ``0 .. N-2`` are taggers (``agent_types``
  0) and id ``N-1`` is the runner (type 1).
* Positions are integer cells ``0 .. L`` per axis (``L = grid_length``, so
  ``L + 1`` cells per axis). By default every tagger starts at
  ``(L // 2, L // 2)`` and the runner at ``(0, 0)``.
* Actions are ``Discrete(5)``: stay, +x, -x, +y, -y. A move that leaves the grid
  is clipped back, and each clipped axis costs ``wall_hit_penalty``.
* After the moves, if any tagger stands on the runner's cell the runner is
  tagged: every tagger gets ``+tag_reward_for_tagger``, the runner
  ``-tag_penalty_for_runner``, and the episode *terminates* (``_done_ = 1``).
  Otherwise taggers pay ``step_cost_for_tagger`` and the runner earns it, and at
  ``t == episode_length`` the episode is *truncated* (``_done_ = 2``).

Observations (every feature is in [0, 1]):

* full (``use_full_observation=True``), ``4N + 1`` floats:
  ``[x_j / L for all j, y_j / L for all j, type_j for all j, is_self one-hot, t / episode_length]``;
* partial, 6 floats: ``[own x / L, own y / L, target x / L, target y / L, own type,
  t / episode_length]``; a tagger's target is the runner, the runner's target is
  its nearest tagger (squared Euclidean distance; ties go to the lowest id).

Beyond the original: the move table lives inside the kernel (the original kept
it in a ``__constant__`` symbol that the host had to upload, or every action
silently became a no-op); ``random_starts=True`` gives every reset a fresh random
start (through reset pools, with observations that match the drawn positions)
instead of replaying one fixed snapshot; terminated and truncated episodes are
told apart; an env may have any number of agents (the original stopped at one
block of threads); and the NumPy reference below reproduces the kernel bit for
bit.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from gymnasium import spaces

from warp_drive.runtime.data_feed import DataFeed
from warp_drive.env.environment import AGENT_PHASES, TERMINATED, TRUNCATED, Environment, Parameter
from warp_drive.env.registry import module_extension

TAGGER, RUNNER = 0, 1
# Discrete(5) action -> (dx, dy); the kernel holds the same table as local constants.
MOVES = np.array([[0, 0], [1, 0], [-1, 0], [0, 1], [0, -1]], dtype=np.int32)
PARTIAL_OBSERVATION_SIZE = 6
# The kernel ranks taggers by squared distance in 32-bit unsigned integers
# (2 L^2 < 2^32), exactly as the reference does in int64.
MAX_GRID_LENGTH = 46340

_F32 = np.float32


class TagGridWorld(Environment):
    """Discrete Tag on an ``(L+1) x (L+1)`` grid; see the module docstring for the rules."""

    name = "TagGridWorld"
    cuda_source = "tag_gridworld.cu"
    step_kernel = "TagGridWorldStep"
    # The step is written as phases over agents (WD_FOR_EACH_AGENT), so an env
    # may have any number of agents, however many threads run it.
    thread_layout = AGENT_PHASES
    state_arrays = ("loc_x", "loc_y")  # every agent's cell: the global state of a centralised critic
    # The kernel and the reference do the same correctly rounded float32
    # operations in the same order, so they must agree exactly.
    consistency_atol = 0.0
    consistency_rtol = 0.0

    parameters = (
        Parameter("num_taggers", 10, ge=1, kernel=False, doc="taggers: agents 0..N-2 (the runner is agent N-1)"),
        Parameter("grid_length", 10, ge=1, le=MAX_GRID_LENGTH, kernel=False,
                  doc="the last cell per axis, L (L+1 cells); the kernel compares 2 L^2 in 32 bits"),
        Parameter("episode_length", 100, ge=1, doc="steps before an episode without a tag is truncated"),
        Parameter("wall_hit_penalty", 0.1, ge=0, doc="paid for each axis a move clips at the wall"),
        Parameter("tag_reward_for_tagger", 10.0, ge=0, doc="every tagger's reward when the runner is tagged"),
        Parameter("tag_penalty_for_runner", 2.0, ge=0, doc="the runner's penalty when tagged"),
        Parameter("step_cost_for_tagger", 0.01, ge=0, doc="paid by each tagger (earned by the runner) per step"),
        Parameter("use_full_observation", True, doc="every agent's cell (4N+1 floats) or the nearest target's (6)"),
        Parameter("random_starts", False, kernel=False, doc="a fresh random start at every reset (reset pools)"),
        Parameter("seed", None, type=int, kernel=False, doc="accepted for WarpDrive's configs; starts use the "
                  "wrapper's seed"),
    )

    def __init__(self, starting_location_x: Any = None, starting_location_y: Any = None, **config: Any):
        """The parameters (the table above) and optional per-agent start cells ``starting_location_x/y``
        (length N), replacing the default starts. ``random_starts``: draw a new random start for every agent
        at every reset (see :meth:`get_reset_pools`)."""
        super().__init__(**config)
        self.num_agents = self.num_taggers + 1
        self.runner_id = self.num_agents - 1
        # WarpDrive's names: dicts whose keys are the ids (``list(env.taggers)``).
        self.taggers = dict.fromkeys(range(self.num_taggers), True)
        self.runners = {self.runner_id: True}

        self.agent_types = np.full(self.num_agents, TAGGER, dtype=np.int32)
        self.agent_types[self.runner_id] = RUNNER
        self.starting_location_x = self._start_locations(starting_location_x, "starting_location_x")
        self.starting_location_y = self._start_locations(starting_location_y, "starting_location_y")

    # ---------------------------------------------------------------- sizes and spaces
    @property
    def observation_size(self) -> int:
        return 4 * self.num_agents + 1 if self.use_full_observation else PARTIAL_OBSERVATION_SIZE

    def observation_space(self, agent_id: int) -> spaces.Box:
        self._check_agent(agent_id)
        return spaces.Box(low=0.0, high=1.0, shape=(self.observation_size,), dtype=np.float32)

    def action_space(self, agent_id: int) -> spaces.Discrete:
        self._check_agent(agent_id)
        return spaces.Discrete(len(MOVES))

    def agent_groups(self) -> dict[str, list[int]]:
        """Taggers share spaces and a role; the runner is on its own."""
        return {"tagger": list(range(self.num_taggers)), "runner": [self.runner_id]}

    # ---------------------------------------------------------------- data
    def get_data_dictionary(self, num_envs: int) -> DataFeed:
        """Every env starts at the fixed starts (with ``random_starts`` the
        framework's first reset replaces them by pool draws)."""
        num_envs = _int_at_least(num_envs, 1, "num_envs")
        loc_x = np.tile(self.starting_location_x, (num_envs, 1))
        loc_y = np.tile(self.starting_location_y, (num_envs, 1))
        obs = self.compute_observations(loc_x, loc_y, np.zeros(num_envs, dtype=np.int32))
        feed = DataFeed()
        feed.add_data("loc_x", loc_x, save_copy_and_apply_at_reset=True, log_data_across_episode=True)
        feed.add_data("loc_y", loc_y, save_copy_and_apply_at_reset=True, log_data_across_episode=True)
        feed.add_data("observations", obs, save_copy_and_apply_at_reset=True)
        feed.add_data("sampled_actions", np.zeros((num_envs, self.num_agents), dtype=np.int32))
        feed.add_data("rewards", np.zeros((num_envs, self.num_agents), dtype=np.float32))
        feed.add_data("agent_types", self.agent_types.copy())
        feed.add_data("world_boundary", int(self.grid_length))  # the rewards and use_full_observation: the table's
        return feed

    def get_reset_pools(self, pool_size: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
        """With ``random_starts``: ``pool_size`` random starts for ``loc_x``,
        ``loc_y`` and the matching ``observations`` (at t = 0).

        The runner's cell is uniform over the grid; each tagger's is uniform over
        the other cells, so no episode starts with a tagger on the runner. The
        three pools have the same size, so a reset draws the same row from each
        and the observations always describe the positions.
        """
        if not self.random_starts:
            return {}
        pool_size = _int_at_least(pool_size, 1, "pool_size")
        side = self.grid_length + 1
        cells = side * side
        runner_cell = rng.integers(0, cells, size=(pool_size, 1))
        tagger_cell = rng.integers(0, cells - 1, size=(pool_size, self.num_taggers))
        tagger_cell = tagger_cell + (tagger_cell >= runner_cell)  # skip the runner's cell
        cell = np.concatenate([tagger_cell, runner_cell], axis=1)
        loc_x = (cell % side).astype(np.int32)
        loc_y = (cell // side).astype(np.int32)
        obs = self.compute_observations(loc_x, loc_y, np.zeros(pool_size, dtype=np.int32))
        return {"loc_x": loc_x, "loc_y": loc_y, "observations": obs}

    # ---------------------------------------------------------------- observations
    def compute_observations(
        self,
        loc_x: np.ndarray,
        loc_y: np.ndarray,
        timestep: np.ndarray,
        agent_types: np.ndarray | None = None,
        grid_length: int | None = None,
        episode_length: int | None = None,
        use_full_observation: bool | None = None,
    ) -> np.ndarray:
        """Observations ``(B, N, obs_size)`` float32 of positions ``(B, N)`` at times ``(B,)``.

        Uses the very float32 operations of the kernel (int -> float, one
        correctly rounded division), so the results are bit-identical.
        """
        types = self.agent_types if agent_types is None else np.asarray(agent_types)
        length = _F32(self.grid_length if grid_length is None else grid_length)
        horizon = _F32(self.episode_length if episode_length is None else episode_length)
        full = self.use_full_observation if use_full_observation is None else bool(use_full_observation)
        loc_x, loc_y = np.asarray(loc_x), np.asarray(loc_y)
        batch, n = loc_x.shape
        fx = loc_x.astype(_F32) / length
        fy = loc_y.astype(_F32) / length
        ft = np.asarray(timestep).astype(_F32) / horizon
        if full:
            obs = np.zeros((batch, n, 4 * n + 1), dtype=_F32)
            obs[:, :, 0:n] = fx[:, None, :]
            obs[:, :, n : 2 * n] = fy[:, None, :]
            obs[:, :, 2 * n : 3 * n] = types.astype(_F32)[None, None, :]
            obs[:, :, 3 * n : 4 * n] = np.eye(n, dtype=_F32)[None]
            obs[:, :, 4 * n] = ft[:, None]
            return obs
        runner = n - 1
        target = np.full((batch, n), runner, dtype=np.int64)
        if runner > 0:
            dx = loc_x[:, :runner].astype(np.int64) - loc_x[:, runner : runner + 1]
            dy = loc_y[:, :runner].astype(np.int64) - loc_y[:, runner : runner + 1]
            target[:, runner] = np.argmin(dx * dx + dy * dy, axis=1)  # first minimum = lowest id
        rows = np.arange(batch)[:, None]
        obs = np.empty((batch, n, PARTIAL_OBSERVATION_SIZE), dtype=_F32)
        obs[:, :, 0] = fx
        obs[:, :, 1] = fy
        obs[:, :, 2] = fx[rows, target]
        obs[:, :, 3] = fy[rows, target]
        obs[:, :, 4] = types.astype(_F32)[None, :]
        obs[:, :, 5] = ft[:, None]
        return obs

    # ---------------------------------------------------------------- rendering
    render_arrays = ("loc_x", "loc_y")

    def render(self, frames: dict[str, np.ndarray], out_path):
        """GIF of one episode on the grid (agents sharing a cell fanned out around it)."""
        from warp_drive.env.rendering import render_gridworld_episode

        return render_gridworld_episode(out_path, frames["loc_x"], frames["loc_y"], self.agent_types == TAGGER,
                                        int(self.grid_length), title=self.name)

    # ---------------------------------------------------------------- reference
    def reference_step(self, arrays: dict[str, np.ndarray]) -> None:
        """One step of every env in NumPy, in place on ``arrays`` (see the kernel).

        Scalars are read from ``arrays`` when present (they are what the kernel
        received), else from this instance.
        """

        def scalar(name: str, default: Any) -> Any:
            value = arrays.get(name, default)
            return np.asarray(value).item() if value is not None else default

        loc_x, loc_y = arrays["loc_x"], arrays["loc_y"]
        actions = arrays["sampled_actions"]
        rewards, observations = arrays["rewards"], arrays["observations"]
        done, timestep = arrays["_done_"], arrays["_timestep_"]
        types = np.asarray(arrays.get("agent_types", self.agent_types))
        length = int(scalar("world_boundary", self.grid_length))
        horizon = int(scalar("episode_length", self.episode_length))
        full = bool(scalar("use_full_observation", int(self.use_full_observation)))
        penalty = _F32(scalar("wall_hit_penalty", self.wall_hit_penalty))
        tag_reward = _F32(scalar("tag_reward_for_tagger", self.tag_reward_for_tagger))
        tag_penalty = _F32(scalar("tag_penalty_for_runner", self.tag_penalty_for_runner))
        step_cost = _F32(scalar("step_cost_for_tagger", self.step_cost_for_tagger))
        n = loc_x.shape[1]
        runner = n - 1

        timestep += 1
        # Move (actions outside the table stay put, as in the kernel) and clip.
        valid = (actions >= 0) & (actions < len(MOVES))
        move = MOVES[np.where(valid, actions, 0)]
        new_x = loc_x + move[..., 0]
        new_y = loc_y + move[..., 1]
        hit_x = (new_x < 0) | (new_x > length)
        hit_y = (new_y < 0) | (new_y > length)
        wall = np.zeros(loc_x.shape, dtype=_F32)
        wall = np.where(hit_x, wall - penalty, wall)
        wall = np.where(hit_y, wall - penalty, wall)
        loc_x[...] = np.clip(new_x, 0, length)
        loc_y[...] = np.clip(new_y, 0, length)

        # Tags: any tagger on the runner's cell.
        on_runner = (loc_x[:, :runner] == loc_x[:, runner : runner + 1]) & (
            loc_y[:, :runner] == loc_y[:, runner : runner + 1]
        )
        tagged = on_runner.any(axis=1)

        is_runner = np.arange(n) == runner
        bonus = np.where(
            tagged[:, None],
            np.where(is_runner, -tag_penalty, tag_reward),
            np.where(is_runner, step_cost, -step_cost),
        ).astype(_F32)
        rewards[...] = wall + bonus

        observations[...] = self.compute_observations(
            loc_x, loc_y, timestep, types, length, horizon, full
        ).reshape(observations.shape)

        done[tagged] = TERMINATED
        done[~tagged & (timestep >= horizon)] = TRUNCATED

    # ---------------------------------------------------------------- helpers
    def _start_locations(self, value: Any, what: str) -> np.ndarray:
        if value is None:
            start = np.full(self.num_agents, self.grid_length // 2, dtype=np.int32)
            start[self.runner_id] = 0
            return start
        start = np.asarray(value)
        if start.shape != (self.num_agents,) or start.dtype.kind not in "iu":
            raise ValueError(f"{what} must be {self.num_agents} integers (one per agent), got {value!r}")
        if start.min() < 0 or start.max() > self.grid_length:
            raise ValueError(f"{what} must lie in [0, grid_length={self.grid_length}], got {value!r}")
        return start.astype(np.int32)

    def _check_agent(self, agent_id: int) -> None:
        if not 0 <= int(agent_id) < self.num_agents:
            raise ValueError(f"agent_id {agent_id} out of range [0, {self.num_agents})")


def _int_at_least(value: Any, low: int, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{what} must be an int, got {value!r}")
    if value < low:
        raise ValueError(f"{what} must be at least {low}, got {value}")
    return int(value)


def __getattr__(name: str):
    # Names that installed packages add to this module through entry points (warp_drive.env.registry.module_extension):
    # WarpDrive 2.7's CUDATagGridWorld, which its programs import from here, is declared that way in pyproject.toml
    # and defined in warp_drive.compat, so this module needs no import of compat (an import contract forbids one).
    return module_extension(__name__, name)
