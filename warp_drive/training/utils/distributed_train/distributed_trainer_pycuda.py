"""WarpDrive 2.7's ``distributed_trainer_pycuda``: ``perform_distributed_training`` of
:mod:`warp_drive.compat.distributed_train` (for every executor, the cpu one included)."""

from warp_drive.compat.distributed_train import perform_distributed_training

__all__ = ["perform_distributed_training"]
