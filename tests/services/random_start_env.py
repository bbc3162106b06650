"""RandomStart: an env whose starts are drawn on the device by its reset kernel (``random_start_env.cu``).

Each agent starts at a point uniform in ``[-spawn, spawn]^2`` and each env at a goal index in
``[0, num_goals)`` (shown in the observations); there are no twins and no pools: the reset kernel writes the
positions, the goal and the first observation. ``reference_step`` and ``reference_reset`` are its NumPy
references (``warp_drive.runtime.philox`` draws the kernel's bits).
"""

from __future__ import annotations

import numpy as np
from gymnasium import spaces

from warp_drive.runtime import philox
from warp_drive.runtime.data_feed import DataFeed
from warp_drive.env.environment import AGENT_PHASES, TERMINATED, TRUNCATED, Environment


class RandomStart(Environment):
    name = "RandomStart"
    cuda_source = "random_start_env.cu"
    step_kernel = "RandomStartStep"
    reset_kernel = "RandomStartReset"
    thread_layout = AGENT_PHASES
    consistency_atol = consistency_rtol = 0.0  # bit-exact

    def __init__(self, num_agents: int = 2, episode_length: int = 12, step_size: float = 0.5,
                 spawn: float = 0.5, num_goals: int = 7):
        self.num_agents, self.episode_length = int(num_agents), int(episode_length)
        self.step_size, self.spawn, self.num_goals = float(step_size), float(spawn), int(num_goals)

    def observation_space(self, agent_id: int):
        return spaces.Box(-np.inf, np.inf, shape=(4,), dtype=np.float32)

    def action_space(self, agent_id: int):
        return spaces.Discrete(5)

    def array_ranges(self):
        return {"goal": (0, self.num_goals - 1)}

    def get_data_dictionary(self, num_envs: int) -> DataFeed:
        n = self.num_agents
        feed = DataFeed()
        feed.add_data("positions", np.zeros((num_envs, n, 2), np.float32))
        feed.add_data("goal", np.zeros(num_envs, np.int32))
        feed.add_data("observations", np.zeros((num_envs, n, 4), np.float32))
        feed.add_data("sampled_actions", np.zeros((num_envs, n), np.int32))
        feed.add_data("rewards", np.zeros((num_envs, n), np.float32))
        feed.add_data("step_size", self.step_size)
        feed.add_data("spawn", self.spawn)
        feed.add_data("num_goals", self.num_goals)
        return feed

    def reference_reset(self, arrays: dict) -> None:
        envs = np.flatnonzero(arrays["_done_"])
        seed, count, n = arrays["reset_seed"], arrays["reset_count"], self.num_agents
        spawn = np.float32(arrays["spawn"])
        goal = philox.reset_int(seed, count, envs, 0, arrays["num_goals"])
        k = 1 + 2 * np.arange(n)
        x = philox.reset_uniform_in(seed, count, envs[:, None], k[None, :], -spawn, spawn)
        y = philox.reset_uniform_in(seed, count, envs[:, None], k[None, :] + 1, -spawn, spawn)
        arrays["goal"][envs] = goal
        arrays["positions"][envs] = np.stack([x, y], axis=-1)
        zeros = np.zeros_like(x)
        arrays["observations"][envs] = np.stack([x, y, np.broadcast_to(goal[:, None], x.shape).astype(np.float32),
                                                 zeros], axis=-1)

    def reference_step(self, arrays: dict) -> None:
        arrays["_timestep_"] += 1
        t = arrays["_timestep_"]
        step = np.float32(arrays["step_size"])
        actions = arrays["sampled_actions"]
        zero = np.float32(0.0)
        dx = np.where(actions == 1, step, np.where(actions == 2, -step, zero)).astype(np.float32)
        dy = np.where(actions == 3, step, np.where(actions == 4, -step, zero)).astype(np.float32)
        pos = arrays["positions"]
        pos[..., 0] += dx
        pos[..., 1] += dy
        arrays["rewards"][...] = -(np.abs(pos[..., 0]) + np.abs(pos[..., 1]))
        obs = arrays["observations"]
        obs[..., :2] = pos
        obs[..., 2] = arrays["goal"][:, None].astype(np.float32)
        obs[..., 3] = (t.astype(np.float32) / np.float32(arrays["episode_length"]))[:, None]
        out = np.abs(pos[:, 0, 0]) > np.float32(1.0)
        arrays["_done_"][...] = np.where(out, TERMINATED, np.where(t >= arrays["episode_length"], TRUNCATED, 0))
