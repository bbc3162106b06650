"""WarpDrive 2.7's ``TrainerDDPG`` (:mod:`warp_drive.compat.trainer`)."""

from warp_drive.compat.trainer import TrainerDDPG

__all__ = ["TrainerDDPG"]
