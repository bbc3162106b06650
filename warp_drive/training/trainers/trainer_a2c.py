"""WarpDrive 2.7's ``TrainerA2C``: this project's Trainer (A2C and PPO from the config's ``algorithm``)."""

from warp_drive.training.trainer import Trainer

TrainerA2C = Trainer

__all__ = ["TrainerA2C"]
