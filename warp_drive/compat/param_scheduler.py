"""WarpDrive 2.7's ``ParamScheduler`` and ``LRScheduler`` over :class:`warp_drive.training.schedules.Schedule`.

A schedule is WarpDrive's: a number (constant), or ``[[t0, v0], [t1, v1], ...]``
piecewise linear in env steps and clamped at both ends (``v0`` before ``t0``,
the last value after the last step). The one evaluation is ``Schedule.value``,
the same code that schedules ``lr`` and ``entropy_coef`` in the Trainer.

Stricter than WarpDrive, on purpose: the steps must be strictly increasing
(WarpDrive accepted a repeated step, where its value was ambiguous), the values
finite numbers, and bad input raises ``ValueError`` naming the entry instead of
an ``AssertionError`` or ``NotImplementedError``.
"""

from __future__ import annotations

import numbers
from typing import Any

from torch.optim.lr_scheduler import LambdaLR

from warp_drive.training.schedules import Schedule


class ParamScheduler:
    """A hyper-parameter's value as a function of the env step: ``get_param_value(timestep)``.

    ``type`` is ``"constant"`` or ``"piecewise_linear"`` and ``schedule`` the
    value given, as in WarpDrive.
    """

    def __init__(self, schedule: Any):
        if isinstance(schedule, dict):
            raise ValueError(f"ParamScheduler takes WarpDrive's schedules: a number or [[timestep, value], ...]; "
                             f"got the mapping {schedule!r} (a {{type: linear}} schedule is a run-config form "
                             f"that needs the run's total_steps: use [[0, start], [total_steps, end]])")
        self._schedule = Schedule.parse(schedule, total_steps=0, name="ParamScheduler schedule")
        constant = isinstance(schedule, numbers.Real)
        self.type = "constant" if constant else "piecewise_linear"
        self.schedule = schedule

    def get_param_value(self, timestep: float) -> float:
        """The value at env step ``timestep`` (>= 0)."""
        if isinstance(timestep, bool) or not isinstance(timestep, numbers.Real) or not timestep >= 0:
            raise ValueError(f"ParamScheduler.get_param_value: timestep must be a number >= 0, got {timestep!r}")
        return self._schedule.value(timestep)


class LRScheduler(ParamScheduler, LambdaLR):
    """A ``torch.optim.lr_scheduler.LambdaLR`` following a WarpDrive schedule (WarpDrive's Lightning API).

    Each ``step()`` is one iteration of ``timesteps_per_iteration`` env steps
    from ``init_timestep``; the optimizer's learning rate is its initial one
    times ``value(t) / value(init_timestep)``, as WarpDrive computed it, so an
    optimizer built with ``lr = value(init_timestep)`` follows the schedule
    exactly. A schedule whose value at ``init_timestep`` is not > 0 cannot
    scale a learning rate that way (WarpDrive divided by zero) and is refused.
    """

    def __init__(self, schedule: Any, optimizer=None, init_timestep: float = 0, timesteps_per_iteration: float = 1):
        if optimizer is None:
            raise ValueError("LRScheduler needs the optimizer whose learning rate it schedules (optimizer=)")
        for name, value, low in (("init_timestep", init_timestep, 0), ("timesteps_per_iteration",
                                                                         timesteps_per_iteration, None)):
            bad = isinstance(value, bool) or not isinstance(value, numbers.Real)
            if bad or (value < low if low is not None else not value > 0):
                raise ValueError(f"LRScheduler: {name} must be a number {'>= 0' if low is not None else '> 0'}, "
                                 f"got {value!r}")
        ParamScheduler.__init__(self, schedule)
        self.init_timestep = init_timestep
        self.timesteps_per_iteration = timesteps_per_iteration
        first = self.get_param_value(init_timestep)
        if not first > 0:
            raise ValueError(f"LRScheduler: the schedule's value at init_timestep={init_timestep} is {first}; the "
                             f"learning rate is scaled by value(t) / value(init_timestep), which needs it > 0")

        def lr_lambda(iteration: int) -> float:
            return self.get_param_value(self.init_timestep + iteration * self.timesteps_per_iteration) / first

        LambdaLR.__init__(self, optimizer, lr_lambda)


__all__ = ["LRScheduler", "ParamScheduler"]
