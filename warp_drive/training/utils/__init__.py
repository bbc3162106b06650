"""WarpDrive 2.7's ``warp_drive.training.utils`` package path; ``param_scheduler`` lives here.

Only the modules a WarpDrive user program imports are kept under this path,
each a thin layer over this project's implementation (``param_scheduler`` over
``warp_drive.training.schedules``).
"""
