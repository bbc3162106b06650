"""WarpDrive's ``warp_drive.managers.pycuda_managers.pycuda_function_manager``."""

from warp_drive.compat.managers import (
    CUDAEnvironmentReset,
    CUDAFunctionFeed,
    CUDAFunctionManager,
    CUDALogController,
    CUDASampler,
)

PyCUDAFunctionManager = CUDAFunctionManager
PyCUDASampler = CUDASampler
PyCUDAEnvironmentReset = CUDAEnvironmentReset
PyCUDALogController = CUDALogController

__all__ = [
    "PyCUDAFunctionManager", "PyCUDASampler", "PyCUDAEnvironmentReset", "PyCUDALogController",
    "CUDAFunctionManager", "CUDAFunctionFeed", "CUDASampler", "CUDAEnvironmentReset", "CUDALogController",
]
