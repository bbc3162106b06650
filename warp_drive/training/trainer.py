"""WarpDrive 2.7's import path ``warp_drive.training.trainer``: its ``Trainer`` (written in
:mod:`warp_drive.compat.trainer` over this project's trainers, ``training/ppo/`` and
``training/ddpg/``)."""

from warp_drive.compat.trainer import Trainer

__all__ = ["Trainer"]
