"""LineChase: a small env written the way WarpDrive 2.7's tutorial 4 writes one.

A dual-mode gym-style class: with ``env_backend="cpu"`` its ``step(actions)``
is the Python step (the consistency checker's reference); otherwise ``step()``
launches ``CudaLineChaseStep`` (``line_chase_step.cu``) through the attributes
``EnvWrapper`` sets. The rules are in the ``.cu`` file's header.

Arrays, in WarpDrive's convention (one env's values; the wrapper adds the env
dimension to reset-copied arrays and to reset-pool targets):

* ``loc`` (N,) float32, ``save_copy_and_apply_at_reset`` -> (E, N);
* ``speeds`` (N,) float32, shared by every env and never reset;
* ``goal`` () float32: reset-copied -> (E,), or, with ``goal_pool``, the target
  of the reset pool ``goal_reset_pool`` (each reset draws a row).

``observations``, ``sampled_actions`` and ``rewards`` are not declared: the
wrapper makes them from ``reset()`` and ``action_space``, as WarpDrive's data
loader did.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from gymnasium import spaces

from warp_drive.utils.constants import Constants
from warp_drive.utils.data_feed import DataFeed
from warp_drive.utils.gpu_environment_context import CUDAEnvironmentContext

CUDA_SOURCE = str(Path(__file__).resolve().parent / "line_chase_step.cu")

_OBSERVATIONS = Constants.OBSERVATIONS
_ACTIONS = Constants.ACTIONS
_REWARDS = Constants.REWARDS


class LineChase(CUDAEnvironmentContext):
    name = "LineChase"

    def __init__(
        self,
        num_agents=4,
        episode_length=20,
        grid_length=10.0,
        goal=5.0,
        tolerance=0.75,
        speeds=None,
        starting_locations=None,
        goal_pool=None,
        seed=None,
        env_backend="cpu",
    ):
        super().__init__()
        self.num_agents = num_agents
        self.episode_length = episode_length
        self.grid_length = np.float32(grid_length)
        self.goal_at_reset = np.float32(goal)
        self.tolerance = np.float32(tolerance)
        rng = np.random.default_rng(seed)
        self.speeds = (
            np.asarray(speeds, dtype=np.float32)
            if speeds is not None
            else rng.uniform(0.25, 1.0, num_agents).astype(np.float32)
        )
        self.starting_locations = (
            np.asarray(starting_locations, dtype=np.float32)
            if starting_locations is not None
            else rng.uniform(0.0, grid_length, num_agents).astype(np.float32)
        )
        self.goal_pool = None if goal_pool is None else np.asarray(goal_pool, dtype=np.float32)
        self.env_backend = env_backend
        self.action_space = {agent_id: spaces.Discrete(3) for agent_id in range(num_agents)}
        self.timestep = 0

    # ------------------------------------------------------------ CPU (Python) mode
    def reset(self):
        self.timestep = 0
        self.loc = self.starting_locations.copy()
        self.goal = self.goal_at_reset
        return self.generate_observation()

    def generate_observation(self):
        t = np.float32(self.timestep) / np.float32(self.episode_length)
        return {
            agent_id: np.array(
                [
                    self.loc[agent_id] / self.grid_length,
                    (self.goal - self.loc[agent_id]) / self.grid_length,
                    t,
                ],
                dtype=np.float32,
            )
            for agent_id in range(self.num_agents)
        }

    def step(self, actions=None):
        self.timestep += 1
        if self.env_backend != "cpu":
            args = [
                "loc",
                "goal",
                "speeds",
                _ACTIONS,
                _OBSERVATIONS,
                _REWARDS,
                "_done_",
                "_timestep_",
                "grid_length",
                "tolerance",
                ("n_agents", "meta"),
                ("episode_length", "meta"),
            ]
            self.cuda_step(
                *self.cuda_step_function_feed(args),
                block=self.cuda_function_manager.block,
                grid=self.cuda_function_manager.grid,
            )
            return None

        assert isinstance(actions, dict) and len(actions) == self.num_agents
        direction = np.array([0.0, -1.0, 1.0], dtype=np.float32)
        moves = np.array([direction[int(np.ravel(actions[a])[0])] for a in range(self.num_agents)])
        self.loc = np.clip(self.loc + moves * self.speeds, 0.0, self.grid_length).astype(np.float32)
        distance = np.abs(self.loc - self.goal).astype(np.float32)
        all_near = bool((distance <= self.tolerance).all())
        shared = -(np.float32(distance.sum()) / self.num_agents) / self.grid_length + (1.0 if all_near else 0.0)
        rew = {agent_id: float(shared) for agent_id in range(self.num_agents)}
        done = {"__all__": self.timestep >= self.episode_length or all_near}
        return self.generate_observation(), rew, done, {}

    # ------------------------------------------------------------ CUDA mode
    def get_data_dictionary(self):
        data_dict = DataFeed()
        data_dict.add_data(name="loc", data=self.loc, save_copy_and_apply_at_reset=True)
        data_dict.add_data(name="speeds", data=self.speeds)
        data_dict.add_data(name="goal", data=self.goal, save_copy_and_apply_at_reset=self.goal_pool is None)
        data_dict.add_data(name="grid_length", data=self.grid_length)
        data_dict.add_data(name="tolerance", data=self.tolerance)
        return data_dict

    def get_reset_pool_dictionary(self):
        pool_dict = DataFeed()
        if self.goal_pool is not None:
            pool_dict.add_pool_for_reset(name="goal_reset_pool", data=self.goal_pool, reset_target="goal")
        return pool_dict
