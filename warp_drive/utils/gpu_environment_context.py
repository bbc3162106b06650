"""WarpDrive 2.7's import path ``warp_drive.utils.gpu_environment_context``: the ``CUDAEnvironmentContext``
mixin of WarpDrive-style envs, written in :mod:`warp_drive.compat.gpu_environment_context`."""

from warp_drive.compat.gpu_environment_context import CUDAEnvironmentContext

__all__ = ["CUDAEnvironmentContext"]
