"""WarpDrive 2.7's trainer module paths (``trainers.trainer_a2c.TrainerA2C``, ``trainers.trainer_ddpg.TrainerDDPG``).

Both names are this project's one :class:`~warp_drive.training.trainer.Trainer`,
which takes WarpDrive's constructor and methods; the algorithm comes from the
config's ``policy.<tag>.algorithm`` (A2C, PPO, DDPG), as WarpDrive's example
script chose the class from it.
"""

from warp_drive.training.trainer import Trainer

TrainerBase = Trainer

__all__ = ["TrainerBase"]
