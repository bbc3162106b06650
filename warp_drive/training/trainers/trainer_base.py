"""WarpDrive 2.7's ``trainer_base``: ``TrainerBase`` and ``PerfStats`` are this project's."""

from warp_drive.training.trainer import Trainer
from warp_drive.training.warpdrive_methods import PerfStats

TrainerBase = Trainer

__all__ = ["TrainerBase", "PerfStats"]
