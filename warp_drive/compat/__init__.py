"""WarpDrive 2.7 compatibility: its names, signatures and run configs over this project's one implementation.

WarpDrive programs import from WarpDrive's module paths (``warp_drive.managers.*``,
``warp_drive.utils.*``, ``warp_drive.env_cpu_gpu_consistency_checker``, ...).
Those modules are thin re-exports of the translators kept here: subclasses that
take WarpDrive's argument order and keywords, and functions that translate its
env classes and run configs. Nothing here re-implements a manager, a kernel or
a training loop; where WarpDrive behaved wrongly, the behaviour is this
project's and the docstring says so.
"""
