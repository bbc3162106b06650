"""DummyEnv: agents nudge a value towards a target; the smallest complete environment.

Used by the tests and the tutorials to show every part of the contract in
``warp_drive/env/environment.py``: parameters declared once (validated at
construction, pushed as the kernel's scalars), declared arrays with reset
twins, a pool of random starts, per-agent spaces, a step kernel whose
arguments bind by their C names, the framework's clock (the kernel neither
advances ``_timestep_`` nor truncates), and a NumPy reference that the
consistency checker runs beside the kernel.
"""

import numpy as np
from gymnasium import spaces

from warp_drive.runtime.data_feed import DataFeed
from warp_drive.env.environment import TERMINATED, Environment, Parameter


class DummyEnv(Environment):
    name = "DummyEnv"
    cuda_source = "dummy_env.cu"
    step_kernel = "DummyEnvStep"
    framework_clock = True  # the framework advances _timestep_ and truncates at episode_length
    state_arrays = ("values",)  # every agent's value: the global state of a centralised critic
    written_arrays = ("agents_on_target",)  # the step's per-env count (no reset twin): state for a checkpoint
    parameters = (
        Parameter("num_agents", 4, ge=1, doc="agents per env"),
        Parameter("episode_length", 20, ge=1, doc="steps before an episode is truncated"),
        Parameter("step_size", 0.25, gt=0, doc="how far actions 0 and 2 move a value (down, up)"),
        Parameter("target", 1.0, doc="the value every agent is rewarded for approaching"),
        Parameter("tolerance", 0.1, doc="an episode terminates when every value is this close to the target"),
        Parameter("random_starts", True, kernel=False, doc="start values uniform in [-2, 2] (else 0)"),
    )

    def observation_space(self, agent_id: int):
        return spaces.Box(-np.inf, np.inf, shape=(2,), dtype=np.float32)

    def action_space(self, agent_id: int):
        return spaces.Discrete(3)  # 0: down, 1: stay, 2: up

    def get_data_dictionary(self, num_envs: int) -> DataFeed:
        feed = DataFeed()  # every value 0 at t = 0, so every observation (value, t / episode_length) is 0
        feed.add_data("values", np.zeros((num_envs, self.num_agents), np.float32), save_copy_and_apply_at_reset=True)
        feed.add_data("observations", np.zeros((num_envs, self.num_agents, 2), np.float32),
                      save_copy_and_apply_at_reset=True)
        feed.add_data("sampled_actions", np.ones((num_envs, self.num_agents), np.int32))
        feed.add_data("rewards", np.zeros((num_envs, self.num_agents), np.float32))
        feed.add_data("agents_on_target", np.zeros(num_envs, np.int32))  # per-env count, across blocks
        return feed  # step_size, target and tolerance: pushed from the table

    def get_reset_pools(self, pool_size: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
        if not self.random_starts:
            return {}
        values = rng.uniform(-2.0, 2.0, size=(pool_size, self.num_agents)).astype(np.float32)
        return {"values": values, "observations": np.stack([values, np.zeros_like(values)], axis=-1)}

    def reference_step(self, arrays: dict) -> None:
        """The kernel in NumPy; the framework's clock has already advanced ``_timestep_`` and truncates after."""
        step = np.float32(arrays["step_size"]) * (arrays["sampled_actions"] - 1).astype(np.float32)
        values = (arrays["values"] + step).astype(np.float32)
        distance = np.abs(values - np.float32(arrays["target"]))
        arrays["values"][...] = values
        arrays["rewards"][...] = -distance
        t = arrays["_timestep_"].astype(np.float32) / np.float32(arrays["episode_length"])
        arrays["observations"][...] = np.stack([values, np.broadcast_to(t[:, None], values.shape)], axis=-1)
        arrays["agents_on_target"][...] = (distance <= np.float32(arrays["tolerance"])).sum(axis=1)
        arrays["_done_"][arrays["agents_on_target"] == values.shape[1]] = TERMINATED
