"""WarpDrive 2.7's ``TrainerDDPG``: this project's Trainer; a policy trains with DDPG when its config says
``algorithm: DDPG``."""

from warp_drive.training.trainer import Trainer

TrainerDDPG = Trainer

__all__ = ["TrainerDDPG"]
