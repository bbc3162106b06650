"""WarpDrive 2.7's ``warp_drive.training.utils`` package path.

Only the modules a WarpDrive user program imports are kept under this path,
each a thin layer over this project's implementation: ``param_scheduler``
(over ``warp_drive.training.schedules``), ``distributed_train`` with its
``distributed_trainer_pycuda`` (over torch's launcher and
``warp_drive.training.distributed``) and ``vertical_scaler`` (over
``warp_drive.training.autoscale``).
"""
