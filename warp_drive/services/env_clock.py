"""The framework's clock: ``_timestep_`` advanced before a step, truncation set after it.

An env that sets ``framework_clock = True`` leaves both to the framework, so its kernel (and its NumPy
reference) neither advances ``_timestep_`` nor sets ``_done_ = 2``: the kernel reads ``timestep[env]``,
already the new t, and sets ``_done_ = 1`` when the episode terminates. Around each step the framework

* before: ``_timestep_ += 1`` for every env;
* after: ``_done_ = 2`` where ``_timestep_ >= episode_length`` and the step set no done (a termination on the
  last step stays a termination, as returns must not bootstrap past it).

:class:`DeviceClock` does it on the device with the two tiny kernels of ``cuda/kernels/clock.cu`` (the
wrapper and the one-replica host API launch them around the step kernel); :func:`tick` and :func:`truncate`
do the same to host arrays around ``reference_step`` (the consistency checker and the host API), so a
reference is compared against exactly what the kernel saw. Envs that keep their own clock (the default,
and every WarpDrive-style kernel) get none of this.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from warp_drive.runtime.data_values import DONE, TIMESTEP

if TYPE_CHECKING:  # the env layer imports this module for tick/truncate: no executor (nor torch) at import
    from warp_drive.runtime.function_manager import FunctionManager

TRUNCATED = 2
BLOCK = 256


def tick(arrays: dict[str, Any]) -> None:
    """Host arrays, before the reference step: every env's ``_timestep_`` one further."""
    arrays[TIMESTEP] += 1


def truncate(arrays: dict[str, Any], episode_length: int) -> None:
    """Host arrays, after the reference step: ``_done_ = 2`` where the time ran out and no done was set."""
    done = arrays[DONE]
    done[(done == 0) & (np.asarray(arrays[TIMESTEP]) >= int(episode_length))] = TRUNCATED


class DeviceClock:
    """The clock kernels bound to a data manager's ``_done_`` and ``_timestep_``: call :meth:`tick` before the
    step kernel and :meth:`truncate` after it, on the same stream."""

    def __init__(self, function_manager: FunctionManager, data_manager: Any):
        n_envs = int(data_manager.num_envs)
        block = min(BLOCK, n_envs)
        geometry = dict(grid=(-(-n_envs // block), 1, 1), block=(block, 1, 1))
        done, timestep = (data_manager.data_on_device_via_torch(name) for name in (DONE, TIMESTEP))
        self.tick = function_manager.bind("wd_clock_tick", [timestep, n_envs], **geometry)
        self.truncate = function_manager.bind(
            "wd_clock_truncate", [done, timestep, n_envs, int(data_manager.episode_length)], **geometry)

    def step(self, launch_step) -> None:
        """``launch_step()`` (the env's step kernel) between :meth:`tick` and :meth:`truncate`."""
        self.tick()
        launch_step()
        self.truncate()
