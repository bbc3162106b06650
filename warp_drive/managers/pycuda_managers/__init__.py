"""WarpDrive's ``warp_drive.managers.pycuda_managers``. Its ``PyCUDA*`` classes are
the same classes as the ``CUDA*`` ones: one implementation runs on every
executor, and ``backend=`` (default ``"auto"``) picks PyCUDA where a GPU is present."""
