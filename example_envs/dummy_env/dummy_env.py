"""DummyEnv: agents nudge a value towards a target; the smallest complete environment.

Used by the tests and the tutorials to show every part of the contract in
``warp_drive/environment.py``: declared arrays with reset twins, a pool of
random starts, per-agent spaces, the step kernel's arguments, and a NumPy
reference that the consistency checker runs beside the kernel.
"""

from __future__ import annotations

import numpy as np
from gymnasium import spaces

from warp_drive.data_feed import DataFeed
from warp_drive.environment import TERMINATED, TRUNCATED, Environment, require_finite


class DummyEnv(Environment):
    name = "DummyEnv"
    cuda_source = "dummy_env.cu"
    step_kernel = "DummyEnvStep"
    state_arrays = ("values",)  # every agent's value: the global state of a centralised critic
    written_arrays = ("agents_on_target",)  # the step's per-env count (no reset twin): state for a checkpoint

    def __init__(self, num_agents: int = 4, episode_length: int = 20, step_size: float = 0.25,
                 target: float = 1.0, tolerance: float = 0.1, random_starts: bool = True):
        self.num_agents, self.episode_length = int(num_agents), int(episode_length)
        require_finite("DummyEnv", step_size=step_size, target=target, tolerance=tolerance)
        self.step_size, self.target, self.tolerance = float(step_size), float(target), float(tolerance)
        self.random_starts = bool(random_starts)

    def observation_space(self, agent_id: int):
        return spaces.Box(-np.inf, np.inf, shape=(2,), dtype=np.float32)

    def action_space(self, agent_id: int):
        return spaces.Discrete(3)  # 0: down, 1: stay, 2: up

    def _observations(self, values: np.ndarray, timestep: np.ndarray) -> np.ndarray:
        t = (timestep.astype(np.float32) / np.float32(self.episode_length))[..., None]
        return np.stack([values, np.broadcast_to(t, values.shape)], axis=-1).astype(np.float32)

    def get_data_dictionary(self, num_envs: int) -> DataFeed:
        values = np.zeros((num_envs, self.num_agents), np.float32)
        feed = DataFeed()
        feed.add_data("values", values, save_copy_and_apply_at_reset=True)
        feed.add_data("observations", self._observations(values, np.zeros(num_envs, np.int32)),
                      save_copy_and_apply_at_reset=True)
        feed.add_data("sampled_actions", np.ones((num_envs, self.num_agents), np.int32))
        feed.add_data("rewards", np.zeros((num_envs, self.num_agents), np.float32))
        feed.add_data("agents_on_target", np.zeros(num_envs, np.int32))  # per-env count, across blocks
        feed.add_data("step_size", self.step_size)
        feed.add_data("target", self.target)
        feed.add_data("tolerance", self.tolerance)
        return feed

    def get_reset_pools(self, pool_size: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
        if not self.random_starts:
            return {}
        values = rng.uniform(-2.0, 2.0, size=(pool_size, self.num_agents)).astype(np.float32)
        return {"values": values, "observations": self._observations(values, np.zeros(pool_size, np.int32))}

    def reference_step(self, arrays: dict) -> None:
        arrays["_timestep_"] += 1
        step = np.float32(arrays["step_size"]) * (arrays["sampled_actions"] - 1).astype(np.float32)
        values = (arrays["values"] + step).astype(np.float32)
        distance = np.abs(values - np.float32(arrays["target"]))
        arrays["values"][...] = values
        arrays["rewards"][...] = -distance
        arrays["observations"][...] = self._observations(values, arrays["_timestep_"])
        arrays["agents_on_target"][...] = (distance <= np.float32(arrays["tolerance"])).sum(axis=1)
        on_target = arrays["agents_on_target"] == values.shape[1]
        timed_out = arrays["_timestep_"] >= arrays["episode_length"]
        arrays["_done_"][...] = np.where(on_target, TERMINATED, np.where(timed_out, TRUNCATED, 0))
