"""LineChase ported from WarpDrive's env style (``line_chase.py``) to warp_drive's
native :class:`~warp_drive.env.environment.Environment` contract.

The migration guide (``docs/migrating_from_warpdrive.md``) walks through this
port; ``tests/compat/test_compat_envs.py`` checks that it steps exactly as the
WarpDrive-style original does and passes the native consistency checker.

What moved where:

* WarpDrive's Python ``reset()``/``step(actions)`` on one env's dicts became
  :meth:`reference_step`, NumPy over all envs' arrays at once, under the
  kernel's argument names; resets are the framework's (reset twins and pools);
* ``step()`` launching the kernel with a ``FunctionFeed`` became the class
  attribute ``step_kernel``, whose C parameters bind the arrays of their names:
  the env never launches anything;
* arrays are declared with the env dimension first (WarpDrive added it for
  reset-copied arrays only), including ``observations``, ``sampled_actions``
  and ``rewards``;
* WarpDrive's reset pool (a fixed array of goals) became ``get_reset_pools``,
  drawn by the framework with the run's seed.
"""

from __future__ import annotations

import numpy as np
from gymnasium import spaces

from warp_drive.runtime.data_feed import DataFeed
from warp_drive.env.environment import TERMINATED, TRUNCATED, Environment


class LineChaseNative(Environment):
    name = "LineChaseNative"
    cuda_source = "line_chase_native.cu"
    step_kernel = "LineChaseStep"

    def __init__(self, num_agents=4, episode_length=20, grid_length=10.0, goal=5.0, tolerance=0.75, speeds=None,
                 starting_locations=None, goal_pool=None, seed=None):
        self.num_agents, self.episode_length = int(num_agents), int(episode_length)
        self.grid_length, self.goal, self.tolerance = np.float32(grid_length), np.float32(goal), np.float32(tolerance)
        rng = np.random.default_rng(seed)  # drawn as the original draws them, so the two match
        self.speeds = (np.asarray(speeds, np.float32) if speeds is not None
                       else rng.uniform(0.25, 1.0, num_agents).astype(np.float32))
        self.starting_locations = (np.asarray(starting_locations, np.float32) if starting_locations is not None
                                   else rng.uniform(0.0, grid_length, num_agents).astype(np.float32))
        self.goal_pool = None if goal_pool is None else np.asarray(goal_pool, np.float32)

    def observation_space(self, agent_id: int):
        return spaces.Box(-np.inf, np.inf, shape=(3,), dtype=np.float32)

    def action_space(self, agent_id: int):
        return spaces.Discrete(3)  # 0 stay, 1 left, 2 right

    def _observations(self, loc: np.ndarray, goal: np.ndarray, timestep: np.ndarray) -> np.ndarray:
        """(E, N, 3): [x / L, (goal - x) / L, t / episode_length], in float32 as the kernel rounds."""
        L = self.grid_length
        t = (timestep.astype(np.float32) / np.float32(self.episode_length))[:, None]
        return np.stack([loc / L, (goal[:, None] - loc) / L, np.broadcast_to(t, loc.shape)], axis=-1).astype(
            np.float32)

    def get_data_dictionary(self, num_envs: int) -> DataFeed:
        E, N = num_envs, self.num_agents
        loc = np.tile(self.starting_locations, (E, 1))
        goal = np.full(E, self.goal, np.float32)
        feed = DataFeed()
        feed.add_data("loc", loc, save_copy_and_apply_at_reset=True)
        feed.add_data("goal", goal, save_copy_and_apply_at_reset=True)
        feed.add_data("speeds", self.speeds)
        feed.add_data("observations", self._observations(loc, goal, np.zeros(E, np.int32)),
                      save_copy_and_apply_at_reset=True)
        feed.add_data("sampled_actions", np.zeros((E, N), np.int32))
        feed.add_data("rewards", np.zeros((E, N), np.float32))
        feed.add_data("distance", np.zeros((E, N), np.float32))  # per-env scratch between the two phases
        feed.add_data("grid_length", float(self.grid_length))
        feed.add_data("tolerance", float(self.tolerance))
        return feed

    def get_reset_pools(self, pool_size: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
        if self.goal_pool is None:
            return {}
        goals = rng.choice(self.goal_pool, size=pool_size).astype(np.float32)
        loc = np.tile(self.starting_locations, (pool_size, 1))
        # Paired pools of one size draw the same row, so each start's observations describe its goal.
        return {"goal": goals, "observations": self._observations(loc, goals, np.zeros(pool_size, np.int32))}

    def reference_step(self, arrays: dict) -> None:
        arrays["_timestep_"] += 1
        actions = arrays["sampled_actions"].reshape(arrays["loc"].shape)
        direction = np.array([0.0, -1.0, 1.0], np.float32)[actions]
        loc = np.clip(arrays["loc"] + direction * arrays["speeds"], 0.0, arrays["grid_length"]).astype(np.float32)
        distance = np.abs(loc - arrays["goal"][:, None]).astype(np.float32)
        all_near = (distance <= np.float32(arrays["tolerance"])).all(axis=1)
        mean = np.float32(0.0)
        for agent in range(loc.shape[1]):  # the kernel's summation order, for bit-equal float32 sums
            mean = (mean + distance[:, agent]).astype(np.float32)
        mean = (mean / np.float32(loc.shape[1])).astype(np.float32)
        reward = (-(mean / np.float32(arrays["grid_length"])) + all_near.astype(np.float32)).astype(np.float32)
        arrays["loc"][...] = loc
        arrays["distance"][...] = distance
        arrays["rewards"][...] = reward[:, None]
        arrays["observations"][...] = self._observations(loc, arrays["goal"], arrays["_timestep_"])
        timed_out = arrays["_timestep_"] >= arrays["episode_length"]
        arrays["_done_"][...] = np.where(all_near, TERMINATED, np.where(timed_out, TRUNCATED, 0))
