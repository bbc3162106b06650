"""PettingZoo ``ParallelEnv`` over one replica of a warp_drive environment.

All agents act at once, as in the kernel. Agent names follow the
environment's agent groups: ``agent_<i>`` when there is only the default
``"shared"`` group, else ``<group>_<i>`` (e.g. ``tagger_0`` … ``runner_3``),
where ``<i>`` is always the agent's index in the kernel's arrays, so a name
maps to its row without a table.

Episodes end for the whole environment (``_done_`` is per replica): when the
step returns ``_done_ == 1`` every agent is terminated, ``2`` every agent is
truncated, and ``agents`` becomes empty until ``reset()`` (PettingZoo's
contract; agents leaving one by one is not something the contract expresses).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from pettingzoo import ParallelEnv

from warp_drive.adapters import (
    build_wrapper,
    check_discrete_actions,
    check_fits,
    supported_space,
    to_host,
)
from warp_drive.environment import TERMINATED, TRUNCATED


def agent_names(env) -> list[str]:
    """One name per agent index, from ``env.agent_groups()`` (see the module docstring)."""
    n = int(env.num_agents)
    groups = env.agent_groups()
    if set(groups) == {"shared"}:
        return [f"agent_{i}" for i in range(n)]
    names: list[str | None] = [None] * n
    for group, members in groups.items():
        for i in members:
            i = int(i)
            if not 0 <= i < n:
                raise ValueError(f"{env.name}: agent group {group!r} names agent {i}, outside 0..{n - 1}")
            if names[i] is not None:
                raise ValueError(f"{env.name}: agent {i} is in two agent groups ({names[i]} and {group!r})")
            names[i] = f"{group}_{i}"
    # Agents in no group keep the neutral name.
    return [name if name is not None else f"agent_{i}" for i, name in enumerate(names)]


class PettingZooParallelEnv(ParallelEnv):
    """``ParallelEnv`` view of one replica; see the module docstring.

    ``env``: an environment instance, class or registered name (or an
    ``EnvWrapper`` with one replica); ``seed``: the wrapper's seed (random when
    None); ``reset(seed=s)`` reseeds (see :mod:`warp_drive.adapters`).
    """

    metadata = {"render_modes": [], "name": "warp_drive_parallel_v0", "is_parallelizable": True}

    def __init__(self, env: Any, backend: Any = "cpu", seed: int | None = None, env_config: dict | None = None,
                 render_mode: str | None = None, reset_pool_size: int = 1000):
        if render_mode is not None:
            raise ValueError(f"render_mode {render_mode!r}: warp_drive environments do not render")
        self.render_mode = None
        self.wrapper = build_wrapper(env, 1, backend, seed, env_config, reset_pool_size,
                                     adapter="PettingZooParallelEnv")
        wenv = self.wrapper.env
        self.metadata = dict(self.metadata, name=f"warp_drive_{wenv.name or type(wenv).__name__}")
        self.possible_agents = agent_names(wenv)
        self.agent_index = {name: i for i, name in enumerate(self.possible_agents)}
        # Built once: PettingZoo requires the very same space object on every call
        # (so seeding a space sticks).
        self._observation_spaces = {name: wenv.observation_space(i) for name, i in self.agent_index.items()}
        self._action_spaces = {name: wenv.action_space(i) for name, i in self.agent_index.items()}

        obs_shape = tuple(self.wrapper.obs.shape)
        act_shape = tuple(self.wrapper.actions.shape)
        self._obs_size = int(np.prod(obs_shape[2:], dtype=np.int64))
        self._act_size = int(np.prod(act_shape[2:], dtype=np.int64))
        for name in self.possible_agents:
            supported_space(self._observation_spaces[name], "observation", self.wrapper.name)
            supported_space(self._action_spaces[name], "action", self.wrapper.name)
            check_fits(self._observation_spaces[name], self._obs_size, "observation", self.wrapper.name, name)
            check_fits(self._action_spaces[name], self._act_size, "action", self.wrapper.name, name)
        self._actions_host = np.zeros(act_shape, np.int32 if self.wrapper.actions.dtype == torch.int32 else np.float32)
        self.agents: list[str] = []

    # ------------------------------------------------------------ spaces
    def observation_space(self, agent: str):
        return self._observation_spaces[agent]

    def action_space(self, agent: str):
        return self._action_spaces[agent]

    # ------------------------------------------------------------ episodes
    def reset(self, seed: int | None = None, options: dict | None = None):
        if seed is not None:
            self.wrapper.reseed(seed)
        else:
            self.wrapper.reset_all_envs()
        self.agents = list(self.possible_agents)
        return self._observations(), {name: {} for name in self.agents}

    def step(self, actions: dict[str, Any]):
        if not self.agents:
            raise RuntimeError("the episode is over (no live agents): call reset() before step()")
        missing = [name for name in self.agents if name not in actions]
        unknown = [name for name in actions if name not in self.agent_index]
        if missing or unknown:
            raise KeyError(f"step() needs one action per live agent; missing {missing}, unknown {unknown}")
        flat = self._actions_host.reshape(self.wrapper.num_agents, self._act_size)
        for name in self.agents:
            value = np.asarray(actions[name]).reshape(-1)
            if value.size != self._act_size:
                raise ValueError(f"action of {name} has {value.size} values; its space {self._action_spaces[name]} "
                                 f"needs {self._act_size}")
            check_discrete_actions(self._action_spaces[name], value, name)
            flat[self.agent_index[name]] = value
        self.wrapper.actions.copy_(torch.from_numpy(self._actions_host))
        self.wrapper.step_all_envs()

        observations = self._observations()
        rewards_row = to_host(self.wrapper.rewards)[0]
        done = int(self.wrapper.done[0])
        rewards = {name: float(rewards_row[self.agent_index[name]]) for name in self.agents}
        terminations = {name: done == TERMINATED for name in self.agents}
        truncations = {name: done == TRUNCATED for name in self.agents}
        infos = {name: {} for name in self.agents}
        if done:
            self.agents = []
        return observations, rewards, terminations, truncations, infos

    def _observations(self) -> dict[str, np.ndarray]:
        obs = to_host(self.wrapper.obs)[0].reshape(self.wrapper.num_agents, self._obs_size)
        out = {}
        for name in self.agents:
            space = self._observation_spaces[name]
            out[name] = obs[self.agent_index[name]].reshape(space.shape).astype(space.dtype, copy=True)
        return out

    def render(self):
        return None

    def close(self):
        pass
