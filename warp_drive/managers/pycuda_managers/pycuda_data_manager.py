"""WarpDrive's ``warp_drive.managers.pycuda_managers.pycuda_data_manager``."""

from warp_drive.compat.managers import CUDADataManager, CudaTensorHolder

PyCUDADataManager = CUDADataManager

__all__ = ["PyCUDADataManager", "CudaTensorHolder"]
