"""WarpDrive 2.7's ``TrainerA2C``: A2C and PPO from the config's ``algorithm`` (:mod:`warp_drive.compat.trainer`)."""

from warp_drive.compat.trainer import TrainerA2C

__all__ = ["TrainerA2C"]
