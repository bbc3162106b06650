"""WarpDrive's ``warp_drive.managers.function_manager``: its function manager, feed,
sampler, reset and log controller (see :mod:`warp_drive.compat.managers`)."""

from warp_drive.compat.managers import (
    CUDAEnvironmentReset,
    CUDAFunctionFeed,
    CUDAFunctionManager,
    CUDALogController,
    CUDASampler,
)

__all__ = ["CUDAFunctionManager", "CUDAFunctionFeed", "CUDASampler", "CUDAEnvironmentReset", "CUDALogController"]
