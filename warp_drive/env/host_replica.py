"""One replica of an env stepped by its own kernel on the cpu executor.

This is what the single-env host API (``Environment.reset`` / ``step``) runs for an env that has no NumPy
reference: the env's arrays pushed for one env, its pools and resets as the framework does them on the device,
and its step kernel bound by name -- on host memory, so :attr:`KernelReplica.arrays` are NumPy views of the very
arrays the kernel writes (read and write them between steps). With the same seed its episodes are env 0 of
``EnvWrapper(env, num_envs=1, backend="cpu", seed=seed)``.

It sits below the wrapper (the env layer may use it) and so does none of the wrapper's declaration checks
beyond those of the env layer; training goes through ``EnvWrapper``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from warp_drive.runtime.data_feed import DataFeed
from warp_drive.runtime.data_manager import DataManager
from warp_drive.runtime.data_values import DEFAULT_RESET_POOL_SIZE, POOL_SUFFIX
from warp_drive.services.env_clock import DeviceClock
from warp_drive.runtime.function_manager import FunctionFeed, FunctionManager, arguments_by_name
from warp_drive.services.reset import EnvironmentReset

DEFAULT_POOL_SIZE = DEFAULT_RESET_POOL_SIZE  # EnvWrapper's default reset_pool_size


class KernelReplica:
    """``env`` (an Environment) as one replica on the cpu executor; :meth:`reset` and :meth:`step` launch its
    framework resets and its step kernel."""

    def __init__(self, env: Any, seed: int, pool_size: int = DEFAULT_POOL_SIZE):
        self.data_manager = dm = DataManager(1, env.num_agents, env.episode_length, backend="cpu")
        dm.push_data_to_device(env.data_dictionary(1))
        pools = env.get_reset_pools(int(pool_size), np.random.default_rng(seed))
        if pools:
            feed = DataFeed()
            for target, pool in pools.items():
                feed.add_pool_for_reset(target + POOL_SUFFIX, pool, target)
            dm.push_data_to_device(feed)
        functions = FunctionManager(1, env.num_agents, None, dm.backend)
        functions.compile_and_load(env.cuda_source_path(), defines=dict(env.cuda_defines) or None)
        signature = functions.get_function(env.step_kernel).signature
        args = FunctionFeed(dm)(arguments_by_name(signature, dm, env.step_args, owner=env.name))
        self._step = functions.bind_env_kernel(env.step_kernel, args, env.thread_layout)
        self._resetter = EnvironmentReset(functions, seed=seed)
        if env.reset_kernel:  # the env's own starts, drawn by its reset kernel as in EnvWrapper
            self._resetter.use_reset_kernel(dm, env.reset_kernel, env.thread_layout, owner=env.name)
        self._clock = DeviceClock(functions, dm) if env.framework_clock else None
        self.arrays: dict[str, Any] = {name: dm.data_on_device_via_torch(name).numpy() for name in dm.array_names}
        self.arrays.update({name: dm.meta_info(name) for name in dm.scalar_data_list})

    def reset(self) -> None:
        """Every array back to a start state (a twin, a pool row drawn on the device, the env's reset kernel),
        done flag cleared; each call the next start (the reset counter advances)."""
        self._resetter.reset_when_done(self.data_manager, mode="force_reset")

    def step(self) -> None:
        """One step of the env's kernel (with the framework's clock around it where the env leaves it so)."""
        if self._clock is not None:
            self._clock.step(self._step)
        else:
            self._step()
