"""``EnvWrapper``: many replicas of one environment, stepped by one kernel launch.

It pushes the environment's arrays to the device once, pushes its pools of
random start states, builds and binds its step kernel, and from then on every
call is a kernel launch on arrays that live on the device:

* ``step_all_envs()`` — one launch steps every replica;
* ``reset_only_done_envs()`` — kernels read ``_done_`` on the device and reset
  only those replicas (no ``done.any()`` round trip to the host);
* ``reset_all_envs()`` — the same kernels, forced.

``obs``, ``rewards`` and ``done`` are the device tensors the kernels write.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import torch

from warp_drive.backends import get_backend
from warp_drive.data_feed import DataFeed
from warp_drive.data_manager import DONE, DataManager, convert_value
from warp_drive.environment import (
    AGENT_PHASES,
    TERMINATED,
    THREAD_LAYOUTS,
    THREADS_PER_AGENT,
    THREADS_PER_ENV,
    TRUNCATED,
    Environment,
)
from warp_drive.function_manager import FunctionFeed, FunctionManager
from warp_drive.registry import get_env_class
from warp_drive.reset import EnvironmentReset
from warp_drive.sampler import random_seed

REQUIRED_ARRAYS = ("observations", "sampled_actions", "rewards")
POOL_SUFFIX = "_reset_pool"
FLAT_BLOCK = 256


def make_env(env: Any, env_config: dict | None = None) -> Environment:
    """An environment instance from an instance, a class, or a registered name."""
    if isinstance(env, str):
        env = get_env_class(env)
    if isinstance(env, type):
        if not issubclass(env, Environment):
            raise TypeError(f"{env.__name__} is not a warp_drive Environment subclass")
        return env(**(env_config or {}))
    if env_config:
        raise ValueError("env_config applies when the environment is given as a class or a name, not an instance")
    if not isinstance(env, Environment):
        raise TypeError(f"expected an Environment, its class or its registered name; got {type(env).__name__}")
    return env


class EnvWrapper:
    def __init__(
        self,
        env: Any,
        num_envs: int,
        backend: Any = "auto",
        blocks_per_env: int | None = None,
        seed: int | None = None,
        env_config: dict | None = None,
        reset_pool_size: int = 1000,
    ):
        self.env = make_env(env, env_config)
        self.num_envs = int(num_envs)
        self.seed = random_seed() if seed is None else int(seed)
        self.backend = get_backend(backend)
        env_ = self.env
        self.num_agents, self.episode_length = int(env_.num_agents), int(env_.episode_length)
        requested_blocks = self._requested_blocks_per_env(blocks_per_env)

        self.data_manager = DataManager(self.num_envs, self.num_agents, self.episode_length, backend=self.backend)
        self.data_manager.push_data_to_device(env_.get_data_dictionary(self.num_envs))
        self._check_required_arrays()
        self._push_reset_pools(reset_pool_size)

        self.function_manager = FunctionManager(self.num_envs, self.num_agents, requested_blocks, self.backend)
        self.function_manager.compile_and_load(env_.cuda_source_path())
        self._step = self._bind_step()
        self.blocks_per_env = self._step.grid[1] if env_.thread_layout != THREADS_PER_ENV else 1
        self.env_resetter = EnvironmentReset(self.function_manager, seed=self.seed)
        self.reset_all_envs()

    # ------------------------------------------------------------ setup
    def _requested_blocks_per_env(self, requested: int | None) -> int | None:
        layout = self.env.thread_layout
        if layout not in THREAD_LAYOUTS:
            raise ValueError(f"{self.env.name}.thread_layout must be one of {', '.join(map(repr, THREAD_LAYOUTS))}; "
                             f"got {layout!r}")
        if layout != THREADS_PER_AGENT and requested not in (None, 1):
            raise ValueError(f"{self.env.name} runs one block per env (thread_layout {layout!r}); "
                             "blocks_per_env does not apply")
        return None if requested is None else int(requested)

    def _check_required_arrays(self) -> None:
        dm = self.data_manager
        for name in REQUIRED_ARRAYS:
            if not dm.is_data_on_device(name):
                raise ValueError(f"{self.env.name}.get_data_dictionary() must define {name!r}")
            shape = dm.get_shape(name)
            if shape[:2] != (self.num_envs, self.num_agents):
                raise ValueError(
                    f"{self.env.name}: {name!r} has shape {shape}; expected ({self.num_envs}, {self.num_agents}, ...)"
                )

    def _push_reset_pools(self, pool_size: int) -> None:
        pools = self.env.get_reset_pools(int(pool_size), np.random.default_rng(self.seed))
        if not pools:
            return
        feed = DataFeed()
        for target, pool in pools.items():
            feed.add_pool_for_reset(target + POOL_SUFFIX, pool, target)
        self.data_manager.push_data_to_device(feed)

    def reseed(self, seed: int) -> None:
        """Restart the start-state randomness from ``seed`` and reset every replica.

        Pools are redrawn in place (same shapes: the reset kernels' pointer
        tables stay valid) and the reset counter restarts, so the state equals
        that of a new ``EnvWrapper(..., seed=seed)``.
        """
        self.seed = int(seed)
        dm = self.data_manager
        targets = dm.reset_target_to_pool
        if targets:
            size = dm.get_shape(next(iter(targets.values())))[0]
            pools = self.env.get_reset_pools(size, np.random.default_rng(self.seed))
            if set(pools) != set(targets):
                raise RuntimeError(f"{self.name}.get_reset_pools() returned pools for {sorted(pools)}; the wrapper "
                                   f"was built with pools for {sorted(targets)}")
            for target, pool in pools.items():
                device_pool = dm.data_on_device_via_torch(targets[target])
                host = np.ascontiguousarray(convert_value(targets[target], pool))
                if tuple(host.shape) != tuple(device_pool.shape):
                    raise RuntimeError(f"{self.name}: pool for {target!r} redrawn with shape {host.shape}; the device "
                                       f"pool has {tuple(device_pool.shape)}")
                device_pool.copy_(torch.from_numpy(host))
        self.env_resetter.init_reset_pool(seed=self.seed)
        self.reset_all_envs()

    def _bind_step(self):
        """The step launch: its geometry comes from the env's thread layout, the
        kernel's own limits and the executor (FunctionManager.env_geometry)."""
        args = FunctionFeed(self.data_manager)(self.env.step_args)
        if self.env.thread_layout in (THREADS_PER_AGENT, AGENT_PHASES):
            return self.function_manager.bind(self.env.step_kernel, args, layout=self.env.thread_layout)
        block = min(FLAT_BLOCK, self.num_envs)
        return self.function_manager.bind(
            self.env.step_kernel, args, grid=(math.ceil(self.num_envs / block), 1, 1), block=(block, 1, 1)
        )

    # ------------------------------------------------------------ stepping
    def step_all_envs(self) -> None:
        """Advance every replica by one step (one launch)."""
        self._step()

    step = step_all_envs

    def reset_only_done_envs(self) -> None:
        """Reset the replicas whose ``_done_`` flag is set, on the device."""
        self.env_resetter.reset_when_done(self.data_manager, mode="if_done")

    def reset_all_envs(self) -> None:
        """Reset every replica (each draws a new start state where the env has pools)."""
        self.env_resetter.reset_when_done(self.data_manager, mode="force_reset")

    reset = reset_all_envs

    # ------------------------------------------------------------ device views
    @property
    def obs(self) -> torch.Tensor:
        return self.data_manager.data_on_device_via_torch("observations")

    @property
    def rewards(self) -> torch.Tensor:
        return self.data_manager.data_on_device_via_torch("rewards")

    @property
    def actions(self) -> torch.Tensor:
        return self.data_manager.data_on_device_via_torch("sampled_actions")

    @property
    def done(self) -> torch.Tensor:
        """``(num_envs,)`` int32: 0 running, 1 terminated, 2 truncated (time limit)."""
        return self.data_manager.data_on_device_via_torch(DONE)

    @property
    def terminated(self) -> torch.Tensor:
        return self.done == TERMINATED

    @property
    def truncated(self) -> torch.Tensor:
        return self.done == TRUNCATED

    # ------------------------------------------------------------ spaces
    @property
    def observation_spaces(self) -> dict[int, Any]:
        return {agent: self.env.observation_space(agent) for agent in range(self.num_agents)}

    @property
    def action_spaces(self) -> dict[int, Any]:
        return {agent: self.env.action_space(agent) for agent in range(self.num_agents)}

    @property
    def name(self) -> str:
        return self.env.name
