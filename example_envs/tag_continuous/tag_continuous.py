"""TagContinuous: taggers chase runners on a continuous square (WarpDrive's flagship env).

Each agent picks an acceleration and a turn every step (index 0 of each table
is the no-op), moves at a clipped speed, and bounces off nothing: positions are
clipped to ``[0, L]`` with an optional edge penalty. A runner whose nearest
tagger is closer than ``tagging_distance * L`` is tagged: it pays
``tag_penalty_for_runner``, that tagger earns ``tag_reward_for_tagger`` (once
per runner it tagged this step) and, when ``runner_exits_game_after_tagged``,
the runner leaves the game. Runners still in the game when time runs out earn
``end_of_game_reward_for_runner``. An episode terminates (``_done_ == 1``) when
every runner is out and is truncated (``_done_ == 2``) at ``episode_length``.

Observations are feature-major rows of 7 features per observed agent plus the
time ``t / episode_length``: ``[dx, dy, dspeed, dacc, ddir, type, still]`` where the deltas
are the other agent's minus the observer's, over ``sqrt(2) L``, ``max_speed +
1e-10`` (speed and acceleration) and ``2 pi``. Full observation (``7(N-1)+1``)
lists every other agent in id order; an observer that is out of the game sees
zero deltas and time but still the others' types and flags. Partial observation
(``7K+1``) lists the K nearest others still in the game by increasing distance,
zero-padded; an observer out of the game sees all zeros. Observations are taken
after the move and before this step's tags.

Differences from the original, and why (see ``tag_continuous.cu``):

* the original lost rewards and runner counts when several runners were tagged
  in one step (non-atomic ``+=``); here every tag counts;
* ties in distance (neighbours and the nearest tagger) go to the smaller id;
* a runner tagged out on the last step gets no end-of-game reward (the original
  GPU and CPU versions disagreed);
* no O(N^2) neighbour scratch arrays: the kernel keeps the K nearest on the
  fly in a small list, so ``num_other_agents_observed`` is at most
  ``MAX_NEIGHBORS`` (32); envs of many agents search a grid of cells
  (``warp_drive/neighbors.h``) instead of every agent (same result);
* ``tagged_by`` records, for each runner, the tagger that tagged it this step
  (-1: none);
* by default every reset draws a new start state (positions uniform in the
  square, directions among the four axes) from a pool, with its matching
  observations; ``random_starts=False`` keeps one start state drawn once, as
  the original did. Explicit ``starting_location_x/y`` or
  ``starting_directions`` are always used as given;
* taggers and fixed starts come from the env's own ``np.random.default_rng(seed)``,
  never the global NumPy generator.

Distances are compared squared (float32); the tag test is ``sqrt(d2) <
margin``. The NumPy reference reproduces the kernel's float32 arithmetic
operation by operation, including ``wd_sincosf`` (``warp_drive.runtime.portable_math``), so the two
agree bit for bit and the consistency tolerance is zero.
"""

from __future__ import annotations

import numpy as np
from gymnasium import spaces

from warp_drive.runtime.data_feed import DataFeed
from warp_drive.env.environment import AGENT_PHASES, TERMINATED, TRUNCATED, Environment, Parameter
from warp_drive.env.neighbors import MAX_NEIGHBORS, grid_scratch
from warp_drive.runtime.portable_math import sincos32

F32 = np.float32
NUM_FEATURES = 7
TWO_PI = F32(6.28318548202514648)  # float(2 pi), as in the kernel
EPSILON = 1e-10


# ---------------------------------------------------------------------------
# The environment
# ---------------------------------------------------------------------------


class TagContinuous(Environment):
    """The continuous game of tag (see the module docstring).

    The constructor takes the original's arguments and defaults (``seed`` now
    seeds the env's own generator, which picks the taggers and any start state
    drawn here), plus:

    * ``random_starts`` (True): a new random start state at every reset;
    * ``pool_max_bytes``: cap on a reset pool's size; the observations make a
      pool row ``N * obs_size`` floats, so large envs get fewer pool rows than
      the wrapper's ``reset_pool_size``.
    """

    name = "TagContinuous"
    cuda_source = "tag_continuous.cu"
    step_kernel = "TagContinuousStep"
    thread_layout = AGENT_PHASES  # phases over agents: any number of threads per env
    # The neighbour grid's scratch: rebuilt every step, its order may vary between GPU runs.
    consistency_skip = ("neighbor_grid",)
    written_arrays = ("neighbor_grid",)  # the step writes it (no reset twin): state for a checkpoint
    # The global state a centralised critic reads (critic_input: state): every agent's position, speed,
    # heading and whether it is still in the game -- 5 numbers per agent, whatever each agent observes.
    state_arrays = ("loc_x", "loc_y", "speed", "direction", "still_in_the_game")
    active_array = "still_in_the_game"  # a tagged runner leaves: its episode ends there
    # The reference reproduces the kernel's float32 operations one by one
    # (wd_sincosf included), so kernel and reference agree bit for bit.
    consistency_atol = 0.0
    consistency_rtol = 0.0

    MAX_NEIGHBORS = MAX_NEIGHBORS  # WD_MAX_NEIGHBORS in <warp_drive/neighbors.h>
    # Reset pools hold observations, (P, N, obs_dim) floats: P is capped so a
    # pool stays below this many bytes (large envs get fewer distinct starts).
    DEFAULT_POOL_MAX_BYTES = 64 * 1024 * 1024

    parameters = (
        Parameter("num_taggers", 1, ge=1, doc="taggers (their ids drawn with seed)"),
        Parameter("num_runners", 10, ge=1, kernel=False, doc="runners"),
        Parameter("grid_length", 10.0, gt=0, doc="side of the square"),
        Parameter("episode_length", 100, ge=1, doc="steps before an episode is truncated"),
        Parameter("seed", None, type=int, kernel=False, doc="the env's own generator: taggers, fixed starts"),
        Parameter("max_speed", 1.0, ge=0, doc="speed limit (times an agent's skill level)"),
        Parameter("skill_level_runner", 1.0, kernel=False, doc="runners' share of max_speed"),
        Parameter("skill_level_tagger", 1.0, kernel=False, doc="taggers' share of max_speed"),
        Parameter("max_acceleration", 1.0, kernel=False, doc="the acceleration table's top"),
        Parameter("min_acceleration", -1.0, kernel=False, doc="the acceleration table's bottom"),
        Parameter("max_turn", np.pi / 2, kernel=False, doc="the turn table's top (radians)"),
        Parameter("min_turn", -np.pi / 2, kernel=False, doc="the turn table's bottom (radians)"),
        Parameter("num_acceleration_levels", 10, ge=0, kernel=False, doc="accelerations besides the no-op"),
        Parameter("num_turn_levels", 10, ge=0, kernel=False, doc="turns besides the no-op"),
        Parameter("edge_hit_penalty", -0.0, le=0, doc="reward for crossing an edge (clipped back)"),
        Parameter("use_full_observation", True, doc="every other agent, or the nearest num_other_agents_observed"),
        Parameter("num_other_agents_observed", 2, ge=1, doc=f"neighbours observed when partial (<= {MAX_NEIGHBORS})"),
        Parameter("tagging_distance", 0.01, ge=0, le=1, kernel=False, doc="tag radius, a fraction of grid_length"),
        Parameter("tag_reward_for_tagger", 1.0, ge=0, doc="a tagger's reward per runner it tags"),
        Parameter("step_penalty_for_tagger", -0.0, le=0, kernel=False, doc="a tagger's reward per step"),
        Parameter("tag_penalty_for_runner", -1.0, le=0, doc="a runner's reward when tagged"),
        Parameter("step_reward_for_runner", 0.0, ge=0, kernel=False, doc="a runner's reward per step"),
        Parameter("end_of_game_reward_for_runner", 1.0, ge=0, doc="a runner's reward for lasting the episode"),
        Parameter("runner_exits_game_after_tagged", True, doc="a tagged runner leaves the game"),
        Parameter("random_starts", True, kernel=False, doc="a new random start state at every reset"),
        Parameter("pool_max_bytes", DEFAULT_POOL_MAX_BYTES, ge=1, kernel=False, doc="cap on a reset pool's bytes"),
    )

    def __init__(self, starting_location_x=None, starting_location_y=None, starting_directions=None, **config):
        super().__init__(**config)  # the table: types, finiteness, bounds
        if not self.use_full_observation and self.num_other_agents_observed > self.MAX_NEIGHBORS:
            raise ValueError(
                f"TagContinuous: num_other_agents_observed must be in [1, {self.MAX_NEIGHBORS}] with partial "
                f"observation (the kernel keeps the nearest neighbours in a fixed-size per-thread list), got "
                f"{self.num_other_agents_observed}; use use_full_observation=True to observe every agent")
        self.num_agents = self.num_taggers + self.num_runners
        # Float32 once, so that the kernel and the reference compute with the very same numbers.
        for name in ("grid_length", "max_speed", "edge_hit_penalty", "tag_reward_for_tagger",
                     "tag_penalty_for_runner", "end_of_game_reward_for_runner"):
            setattr(self, name, F32(getattr(self, name)))
        self.distance_margin_for_reward = F32(F32(self.tagging_distance) * self.grid_length)
        # Normalisers, rounded once to float32 so that the kernel and the
        # reference divide by the very same numbers.
        self.position_scale = F32(np.sqrt(2.0) * float(self.grid_length))
        self.speed_scale = F32(float(self.max_speed) + EPSILON)
        self.direction_scale = TWO_PI

        n = self.num_agents
        self.rng = np.random.default_rng(self.seed)
        self.tagger_ids = np.sort(self.rng.choice(n, self.num_taggers, replace=False)).astype(np.int32)
        self.agent_types = np.zeros(n, np.int32)  # 1 = tagger, 0 = runner
        self.agent_types[self.tagger_ids] = 1
        self.runner_ids = np.flatnonzero(self.agent_types == 0).astype(np.int32)
        # WarpDrive's names: dicts whose keys are the ids (``list(env.taggers)``).
        self.taggers = dict.fromkeys(self.tagger_ids.tolist(), True)
        self.runners = dict.fromkeys(self.runner_ids.tolist(), True)

        self.acceleration_actions = np.insert(
            np.linspace(F32(self.min_acceleration), F32(self.max_acceleration), self.num_acceleration_levels), 0, 0.0
        ).astype(F32)
        self.turn_actions = np.insert(np.linspace(F32(self.min_turn), F32(self.max_turn), self.num_turn_levels),
                                      0, 0.0).astype(F32)
        self.skill_levels = np.where(
            self.agent_types == 1, F32(self.skill_level_tagger), F32(self.skill_level_runner)
        ).astype(F32)
        self.step_rewards = np.where(
            self.agent_types == 1, F32(self.step_penalty_for_tagger), F32(self.step_reward_for_runner)
        ).astype(F32)

        # Start state: what is given is fixed; what is not is drawn (once here
        # for the fixed start, and per reset from the pools if random_starts).
        self._given_locations = starting_location_x is not None
        self._given_directions = starting_directions is not None
        if (starting_location_x is None) != (starting_location_y is None):
            raise ValueError("TagContinuous: give both starting_location_x and starting_location_y, or neither")
        if self._given_locations:
            self.starting_location_x = self._per_agent(starting_location_x, "starting_location_x")
            self.starting_location_y = self._per_agent(starting_location_y, "starting_location_y")
        else:
            x, y = self._draw_locations(self.rng, 1)
            self.starting_location_x, self.starting_location_y = x[0], y[0]
        if self._given_directions:
            self.starting_directions = self._per_agent(starting_directions, "starting_directions")
        else:
            self.starting_directions = self._draw_directions(self.rng, 1)[0]

    # ---------------------------------------------------------------- helpers
    def _per_agent(self, values, what: str) -> np.ndarray:
        array = np.asarray(values, dtype=np.float64).reshape(-1)
        if array.shape != (self.num_agents,):
            raise ValueError(f"TagContinuous: {what} needs {self.num_agents} values (one per agent), got {array.size}")
        return array.astype(F32)

    def _draw_locations(self, rng: np.random.Generator, count: int) -> tuple[np.ndarray, np.ndarray]:
        size = (count, self.num_agents)
        x = (rng.random(size) * float(self.grid_length)).astype(F32)
        y = (rng.random(size) * float(self.grid_length)).astype(F32)
        return x, y

    def _draw_directions(self, rng: np.random.Generator, count: int) -> np.ndarray:
        choices = np.array([0.0, np.pi / 2, np.pi, 3 * np.pi / 2], dtype=F32)
        return choices[rng.integers(0, 4, size=(count, self.num_agents))]

    @property
    def observation_size(self) -> int:
        observed = self.num_agents - 1 if self.use_full_observation else self.num_other_agents_observed
        return NUM_FEATURES * observed + 1

    # ---------------------------------------------------------------- spaces
    def observation_space(self, agent_id: int):
        return spaces.Box(-np.inf, np.inf, shape=(self.observation_size,), dtype=np.float32)

    def action_space(self, agent_id: int):
        return spaces.MultiDiscrete([len(self.acceleration_actions), len(self.turn_actions)])

    def agent_groups(self) -> dict[str, list[int]]:
        return {"tagger": self.tagger_ids.tolist(), "runner": self.runner_ids.tolist()}

    def array_ranges(self) -> dict[str, tuple[int, int]]:
        # int state a checkpoint may hold (tagger_ids and agent_types are constants: never restored)
        return {"tagged_by": (-1, self.num_agents - 1), "still_in_the_game": (0, 1),
                "num_runners": (0, self.num_runners)}

    # ---------------------------------------------------------------- data
    def _start_observations(self, x: np.ndarray, y: np.ndarray, direction: np.ndarray) -> np.ndarray:
        """Observations of start states (rows of x, y, direction) at t = 0."""
        zeros = np.zeros_like(x)
        still = np.ones(x.shape, np.int32)
        return self.observe(x, y, zeros, zeros, direction, still, np.zeros(x.shape[0], np.int32))

    def get_data_dictionary(self, num_envs: int) -> DataFeed:
        e, n = int(num_envs), self.num_agents

        def per_env(values, dtype=F32):
            return np.ascontiguousarray(np.broadcast_to(np.asarray(values, dtype), (e, *np.shape(values))))

        x, y = per_env(self.starting_location_x), per_env(self.starting_location_y)
        d = per_env(self.starting_directions)
        zeros = np.zeros((e, n), F32)
        feed = DataFeed()
        # State (restored from the *_at_reset twins; locations and directions
        # from the pools instead when random_starts).
        feed.add_data("loc_x", x, save_copy_and_apply_at_reset=True)
        feed.add_data("loc_y", y, save_copy_and_apply_at_reset=True)
        feed.add_data("speed", zeros, save_copy_and_apply_at_reset=True)
        feed.add_data("direction", d, save_copy_and_apply_at_reset=True)
        feed.add_data("acceleration", zeros.copy(), save_copy_and_apply_at_reset=True)
        feed.add_data("edge_hit_reward_penalty", zeros.copy(), save_copy_and_apply_at_reset=True)
        feed.add_data("still_in_the_game", np.ones((e, n), np.int32), save_copy_and_apply_at_reset=True)
        feed.add_data("num_runners", np.full(e, self.num_runners, np.int32), save_copy_and_apply_at_reset=True)
        # The observation twin is skipped when a pool provides start observations
        # (it can be large: E x N x obs_size).
        obs = self._start_observations(x[:1], y[:1], d[:1])
        feed.add_data("observations", per_env(obs[0]), save_copy_and_apply_at_reset=not self._has_pools())
        feed.add_data("sampled_actions", np.zeros((e, n, 2), np.int32))
        feed.add_data("tagged_by", np.full((e, n), -1, np.int32), save_copy_and_apply_at_reset=True)
        k = 0 if self.use_full_observation else self.num_other_agents_observed
        feed.add_data("neighbor_grid", grid_scratch(e, n, k))
        feed.add_data("rewards", zeros.copy())
        # Constant tables (no env dimension).
        feed.add_data("agent_types", self.agent_types)
        feed.add_data("tagger_ids", self.tagger_ids)
        feed.add_data("skill_levels", self.skill_levels)
        feed.add_data("step_rewards", self.step_rewards)
        feed.add_data("acceleration_actions", self.acceleration_actions)
        feed.add_data("turn_actions", self.turn_actions)
        # Derived scalars (the parameters' own are pushed from the table).
        feed.add_data("distance_margin_for_reward", self.distance_margin_for_reward)
        feed.add_data("position_scale", self.position_scale)
        feed.add_data("speed_scale", self.speed_scale)
        feed.add_data("direction_scale", self.direction_scale)
        return feed

    def _has_pools(self) -> bool:
        return self.random_starts and not (self._given_locations and self._given_directions)

    def pool_rows(self, pool_size: int) -> int:
        """How many start states a pool holds: ``pool_size``, capped by ``pool_max_bytes``."""
        row_bytes = 4 * self.num_agents * (self.observation_size + 3)
        return int(max(1, min(int(pool_size), self.pool_max_bytes // row_bytes)))

    def get_reset_pools(self, pool_size: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
        """Random start states: positions uniform in the square, directions among the four
        axes (only for what the constructor did not fix), with their t = 0 observations."""
        if not self._has_pools():
            return {}
        rows = self.pool_rows(pool_size)
        if self._given_locations:
            x = np.broadcast_to(self.starting_location_x, (rows, self.num_agents)).copy()
            y = np.broadcast_to(self.starting_location_y, (rows, self.num_agents)).copy()
        else:
            x, y = self._draw_locations(rng, rows)
        if self._given_directions:
            d = np.broadcast_to(self.starting_directions, (rows, self.num_agents)).copy()
        else:
            d = self._draw_directions(rng, rows)
        pools = {"observations": self._start_observations(x, y, d)}
        if not self._given_locations:
            pools["loc_x"], pools["loc_y"] = x, y
        if not self._given_directions:
            pools["direction"] = d
        return pools

    # ---------------------------------------------------------------- reference
    def observe(self, x, y, speed, acc, direction, still, timestep) -> np.ndarray:
        """Observations ``(E, N, obs_size)`` of states given as ``(E, N)`` arrays.

        ``still`` is the in-game flag the observations see (before this step's
        tags); ``timestep`` is ``(E,)``.
        """
        e, n = x.shape
        time = (timestep.astype(F32) / F32(self.episode_length)).astype(F32)
        own = [a[:, :, None] for a in (x, y, speed, acc, direction)]
        scales = (self.position_scale, self.position_scale, self.speed_scale, self.speed_scale, self.direction_scale)
        in_game = still.astype(bool)
        if self.use_full_observation:
            others = self._others()
            features = [
                np.where(in_game[:, :, None], (values[:, others] - mine) / scale, F32(0.0))
                for values, mine, scale in zip((x, y, speed, acc, direction), own, scales)
            ]
            features.append(np.broadcast_to(self.agent_types[others].astype(F32), (e, n, n - 1)))
            features.append(still[:, others].astype(F32))
            features.append(np.where(in_game, time[:, None], F32(0.0))[:, :, None])
            return np.concatenate(features, axis=2).astype(F32)

        k = self.num_other_agents_observed
        ids, valid = self.nearest_neighbors(x, y, still, k)
        env = np.arange(e)[:, None, None]
        safe = np.where(valid, ids, 0)
        features = [
            np.where(valid, (values[env, safe] - mine) / scale, F32(0.0))
            for values, mine, scale in zip((x, y, speed, acc, direction), own, scales)
        ]
        features.append(np.where(valid, self.agent_types[safe].astype(F32), F32(0.0)))
        features.append(np.where(valid, still[env, safe].astype(F32), F32(0.0)))
        features.append(time[:, None, None].repeat(n, axis=1))
        obs = np.concatenate(features, axis=2).astype(F32)
        obs[~in_game] = 0.0
        return obs

    def _others(self) -> np.ndarray:
        """``(N, N-1)``: row i lists every agent but i, in id order (the full observation's slots)."""
        if getattr(self, "_others_cache", None) is None:
            n = self.num_agents
            slots = np.arange(n - 1)[None, :]
            self._others_cache = slots + (slots >= np.arange(n)[:, None])
        return self._others_cache

    @staticmethod
    def nearest_neighbors(x, y, still, k: int) -> tuple[np.ndarray, np.ndarray]:
        """Ids ``(E, N, k)`` of each agent's k nearest still-in-game others, sorted by
        (float32 squared distance, id), and which slots are filled.

        Squared distances are non-negative floats, whose bit patterns sort like
        the values, so ``bits << 32 | id`` is one integer key that orders by
        distance and then id; ``argpartition`` on it picks the k smallest
        exactly, without sorting whole rows. Envs go in chunks to bound memory.
        """
        e, n = x.shape
        ids = np.zeros((e, n, k), np.int64)
        valid = np.zeros((e, n, k), bool)
        take = min(k, n)
        chunk = max(1, (1 << 22) // (n * n))
        column = np.arange(n, dtype=np.uint64)
        for start in range(0, e, chunk):
            sl = slice(start, min(e, start + chunk))
            dx = x[sl, None, :] - x[sl, :, None]  # [env, me, other] = other - me, as in the kernel
            dy = y[sl, None, :] - y[sl, :, None]
            d2 = dx * dx + dy * dy
            excluded = ~still[sl, None, :].astype(bool) | np.eye(n, dtype=bool)[None]
            d2[excluded] = np.inf
            keys = (d2.view(np.uint32).astype(np.uint64) << np.uint64(32)) | column
            if take < n:
                keys = np.take_along_axis(keys, np.argpartition(keys, take - 1, axis=2)[:, :, :take], axis=2)
            keys = np.sort(keys, axis=2)[:, :, :take]
            ids[sl, :, :take] = (keys & np.uint64(0xFFFFFFFF)).astype(np.int64)
            valid[sl, :, :take] = (keys >> np.uint64(32)) < np.uint64(0x7F800000)  # finite distance
        return ids, valid

    # ---------------------------------------------------------------- rendering
    render_arrays = ("loc_x", "loc_y", "still_in_the_game")

    def render(self, frames: dict[str, np.ndarray], out_path):
        """GIF of one episode: taggers and runners on the square, tagged-out runners grey."""
        from warp_drive.env.rendering import render_tag_episode

        return render_tag_episode(out_path, frames["loc_x"], frames["loc_y"], self.agent_types == 1,
                                  frames["still_in_the_game"].astype(bool), float(self.grid_length),
                                  title=self.name)

    def reference_step(self, arrays: dict) -> None:
        """One step of every env in NumPy, operation for operation like the kernel."""
        timestep = arrays["_timestep_"]
        t = timestep + 1
        still = arrays["still_in_the_game"].copy()
        in_game = still.astype(bool)
        actions = arrays["sampled_actions"]
        agent_types = arrays["agent_types"]

        # 1. move
        acc = arrays["acceleration"] + arrays["acceleration_actions"][actions[..., 0]]
        turned = arrays["direction"] + arrays["turn_actions"][actions[..., 1]]
        direction = np.where(in_game, np.fmod(turned, TWO_PI), F32(0.0))
        direction = np.where(direction < 0, direction + TWO_PI, direction)
        top_speed = F32(arrays["max_speed"]) * arrays["skill_levels"]
        speed = arrays["speed"] + acc
        speed = np.where(speed < 0, F32(0.0), speed)
        speed = np.where(speed > top_speed, top_speed, speed)
        speed = np.where(in_game, speed, F32(0.0))
        acc = np.where((speed <= 0) | (speed >= top_speed), F32(0.0), acc)
        sin, cos = sincos32(direction)
        x = arrays["loc_x"] + speed * cos
        y = arrays["loc_y"] + speed * sin
        length = F32(arrays["grid_length"])
        crossed = (x < 0) | (x > length) | (y < 0) | (y > length)
        x = np.clip(x, F32(0.0), length)
        y = np.clip(y, F32(0.0), length)
        edge = np.where(crossed, F32(arrays["edge_hit_penalty"]), F32(0.0))
        reward = np.where(in_game, edge + arrays["step_rewards"], F32(0.0))

        # 2. observe (before this step's tags)
        observations = self.observe(x, y, speed, acc, direction, still, t)

        # 3. tag: each runner in the game against its nearest tagger (ties: smaller id)
        taggers = arrays["tagger_ids"]
        dx = x[:, taggers][:, None, :] - x[:, :, None]
        dy = y[:, taggers][:, None, :] - y[:, :, None]
        d2 = dx * dx + dy * dy  # (E, N, T)
        nearest = taggers[np.argmin(d2, axis=2)]
        tagged = (in_game & (agent_types == 0)[None, :]
                  & (np.sqrt(d2.min(axis=2)) < F32(arrays["distance_margin_for_reward"])))
        reward = np.where(tagged, reward + F32(arrays["tag_penalty_for_runner"]), reward)
        counts = np.zeros_like(still)
        env_index, runner_index = np.nonzero(tagged)
        np.add.at(counts, (env_index, nearest[env_index, runner_index]), 1)
        tag_reward = F32(arrays["tag_reward_for_tagger"])
        for i in range(int(counts.max(initial=0))):  # one float add per tag, as the atomics do
            reward = np.where(counts > i, reward + tag_reward, reward)
        num_runners = arrays["num_runners"]
        terminated = np.zeros(num_runners.shape, bool)
        if arrays["runner_exits_game_after_tagged"]:
            still[tagged] = 0
            per_env = tagged.sum(axis=1).astype(np.int32)
            terminated = (per_env > 0) & (num_runners >= 1) & (num_runners - per_env <= 0)
            num_runners -= per_env
        end = in_game & (agent_types == 0)[None, :] & still.astype(bool) & (t == arrays["episode_length"])[:, None]
        reward = np.where(end, reward + F32(arrays["end_of_game_reward_for_runner"]), reward)

        arrays["loc_x"][...] = x
        arrays["loc_y"][...] = y
        arrays["speed"][...] = speed
        arrays["direction"][...] = direction
        arrays["acceleration"][...] = acc
        arrays["edge_hit_reward_penalty"][...] = edge
        arrays["still_in_the_game"][...] = still
        arrays["observations"][...] = observations
        arrays["rewards"][...] = reward
        arrays["tagged_by"][...] = np.where(tagged, nearest, -1)
        timestep[...] = t
        done = arrays["_done_"]
        done[terminated] = TERMINATED
        done[(t >= arrays["episode_length"]) & (done == 0)] = TRUNCATED
