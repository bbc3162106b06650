"""WarpDrive's Numba managers: not a backend here.

WarpDrive kept a second copy of every manager and kernel in Numba (reference
§9.3). This project runs one set of CUDA C kernels on two executors instead,
so importing this package fails with the classes to use.
"""

raise ImportError(
    "warp_drive.managers.numba_managers: Numba is not a backend of this warp_drive. The same CUDA C kernels run "
    "on a GPU (backend='pycuda') or on the CPU (backend='cpu'); use "
    "warp_drive.managers.pycuda_managers.pycuda_data_manager.PyCUDADataManager and "
    "warp_drive.managers.pycuda_managers.pycuda_function_manager.PyCUDAFunctionManager / PyCUDASampler / "
    "PyCUDAEnvironmentReset / PyCUDALogController (NumbaDataManager -> PyCUDADataManager, NumbaFunctionManager "
    "-> PyCUDAFunctionManager, NumbaSampler -> PyCUDASampler, NumbaEnvironmentReset -> PyCUDAEnvironmentReset, "
    "NumbaLogController -> PyCUDALogController), with backend='auto' (the default), 'pycuda' or 'cpu'. "
    "Numba step functions must be ported to a CUDA C kernel (see the migration guide)."
)
