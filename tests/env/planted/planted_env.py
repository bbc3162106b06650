"""A small env with one planted mistake chosen by ``bug`` (``planted_env.cu`` says what each is), for
``tests/cli/test_check.py``: ``warp-drive check planted_env:MissingBarrier`` (one subclass per bug, so one
command checks them all), or ``planted_env:PlantedEnv --set env.config.bug=barrier``.

``bug="wide_obs"`` declares an observation space wider than the ``observations`` array; the other bugs are in
the kernel, and the NumPy reference follows the kernel where it can (the NaN reward too), so only the check that
is meant to find a bug finds it.
"""

from __future__ import annotations

import numpy as np
from gymnasium import spaces

from warp_drive.runtime.data_feed import DataFeed
from warp_drive.env.environment import TRUNCATED, Environment

BUGS = ("", "barrier", "atomic", "oob", "nan", "wide_obs")


class PlantedEnv(Environment):
    name = "PlantedEnv"
    cuda_source = "planted_env.cu"
    step_kernel = "PlantedStep"
    written_arrays = ("count",)
    default_bug = ""

    def __init__(self, bug: str | None = None, num_agents: int = 4, episode_length: int = 6):
        bug = self.default_bug if bug is None else bug
        if bug not in BUGS:
            raise ValueError(f"PlantedEnv: bug={bug!r}; one of {BUGS}")
        self.bug, self.num_agents, self.episode_length = bug, int(num_agents), int(episode_length)
        kernel_bug = bug in ("barrier", "atomic", "oob", "nan")
        self.cuda_defines = {f"PLANTED_{bug.upper()}": "1"} if kernel_bug else {}

    def observation_space(self, agent_id: int):
        return spaces.Box(-np.inf, np.inf, shape=(3 if self.bug == "wide_obs" else 2,), dtype=np.float32)

    def action_space(self, agent_id: int):
        return spaces.Discrete(3)

    def get_data_dictionary(self, num_envs: int) -> DataFeed:
        feed = DataFeed()
        feed.add_data("values", np.zeros((num_envs, self.num_agents), np.float32), save_copy_and_apply_at_reset=True)
        feed.add_data("observations", np.zeros((num_envs, self.num_agents, 2), np.float32),
                      save_copy_and_apply_at_reset=True)
        feed.add_data("sampled_actions", np.ones((num_envs, self.num_agents), np.int32))
        feed.add_data("rewards", np.zeros((num_envs, self.num_agents), np.float32))
        feed.add_data("count", np.zeros(num_envs, np.int32))
        feed.add_data("action_mask", np.ones((num_envs, self.num_agents, 3), np.int32),
                      save_copy_and_apply_at_reset=True)  # every action legal: for the scan's mask test
        feed.add_data("zero", 0.0)
        return feed

    def array_ranges(self) -> dict[str, tuple[int, int]]:
        return {"count": (0, self.num_agents)}

    def reference_step(self, arrays: dict) -> None:
        arrays["_timestep_"] += 1
        t = arrays["_timestep_"]
        values = (arrays["values"] + np.float32(0.25) * (arrays["sampled_actions"] - 1)).astype(np.float32)
        left = np.concatenate([np.zeros_like(values[:, :1]), values[:, :-1]], axis=1)
        arrays["values"][...] = values
        arrays["rewards"][...] = -np.abs(values - left)
        if self.bug == "nan" and t[0] == 3:
            arrays["rewards"][0, 0] = np.nan
        arrays["observations"][..., 0] = values
        arrays["observations"][..., 1] = (t.astype(np.float32) / np.float32(self.episode_length))[:, None]
        arrays["count"][...] = self.num_agents
        arrays["_done_"][...] = np.where(t >= arrays["episode_length"], TRUNCATED, arrays["_done_"])


class MissingBarrier(PlantedEnv):
    default_bug = "barrier"


class PlainIncrement(PlantedEnv):
    default_bug = "atomic"


class WriteOutOfBounds(PlantedEnv):
    default_bug = "oob"


class NanReward(PlantedEnv):
    default_bug = "nan"


class WideObservations(PlantedEnv):
    default_bug = "wide_obs"
