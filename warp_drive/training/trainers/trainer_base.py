"""WarpDrive 2.7's ``trainer_base``: ``TrainerBase`` and ``PerfStats`` (:mod:`warp_drive.compat.trainer`)."""

from warp_drive.compat.trainer import PerfStats
from warp_drive.compat.trainer import Trainer as TrainerBase

__all__ = ["TrainerBase", "PerfStats"]
