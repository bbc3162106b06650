"""WarpDrive 2.7's import path ``warp_drive.training.utils.distributed_train``: ``perform_distributed_training``,
written in :mod:`warp_drive.compat.distributed_train` over torch's launcher and ``training.distributed``."""

from warp_drive.compat.distributed_train import perform_distributed_training

__all__ = ["perform_distributed_training"]
