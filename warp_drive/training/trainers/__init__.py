"""WarpDrive 2.7's trainer module paths (``trainers.trainer_a2c.TrainerA2C``, ``trainers.trainer_ddpg.TrainerDDPG``),
written in :mod:`warp_drive.compat.trainer`; the algorithm comes from the config's ``policy.<tag>.algorithm``."""

from warp_drive.compat.trainer import Trainer as TrainerBase

__all__ = ["TrainerBase"]
