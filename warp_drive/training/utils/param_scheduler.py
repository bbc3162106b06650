"""WarpDrive 2.7's import path ``warp_drive.training.utils.param_scheduler``: ``ParamScheduler`` and
``LRScheduler``, written in :mod:`warp_drive.compat.param_scheduler` over ``training.schedules``."""

from warp_drive.compat.param_scheduler import LRScheduler, ParamScheduler

__all__ = ["LRScheduler", "ParamScheduler"]
