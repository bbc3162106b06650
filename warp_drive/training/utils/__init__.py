"""WarpDrive 2.7's ``warp_drive.training.utils`` package path.

Only the modules a WarpDrive user program imports are kept under this path,
each a re-export of :mod:`warp_drive.compat`, where they are written:
``param_scheduler`` (:mod:`warp_drive.compat.param_scheduler`),
``distributed_train`` with its ``distributed_trainer_pycuda``
(:mod:`warp_drive.compat.distributed_train`) and ``vertical_scaler``
(:mod:`warp_drive.compat.vertical_scaler`).
"""
