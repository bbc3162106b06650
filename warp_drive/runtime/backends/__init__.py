"""Backends: the same CUDA C on two executors (``cpu`` and ``pycuda``).

``cpu-gpu`` is the cpu executor shaped like a GPU (the GPU's macros, block
limits and launch geometry): what CI runs to execute the GPU's code path.

``get_backend(name)`` returns one shared instance per executor, so that a
DataManager and a FunctionManager created with the same name agree on where the
arrays live.
"""

from __future__ import annotations

from warp_drive.runtime.backends.base import (  # noqa: F401  (re-exported)
    Backend,
    BoundLaunch,
    Kernel,
    KernelBuildError,
    KernelLaunchError,
    Module,
)
from warp_drive.runtime.backends.cpu import CpuBackend, GpuShapedCpuBackend
from warp_drive.runtime.backends.pycuda_backend import PyCudaBackend  # imports no PyCUDA until one is made
from warp_drive.runtime.backend_names import BACKEND_NAMES, gpu_available, resolve_backend_name  # noqa: F401  (re-exported)

_CLASSES: dict[str, type[Backend]] = {"cpu": CpuBackend, "cpu-gpu": GpuShapedCpuBackend, "pycuda": PyCudaBackend}

_instances: dict[str, Backend] = {}


def get_backend(backend: "str | Backend | None" = None) -> Backend:
    """The shared backend instance for ``backend`` (a name, or a Backend passed through)."""
    if isinstance(backend, Backend):
        return backend
    name = resolve_backend_name(backend)
    if name not in _instances:
        _instances[name] = _CLASSES[name]()
    return _instances[name]


def backend_class(backend: "str | Backend | None" = None) -> type[Backend]:
    """The class of a backend, without creating one: its ``capabilities`` can be
    read before the device is chosen (e.g. by ``torch.distributed`` setup)."""
    if isinstance(backend, Backend):
        return type(backend)
    return _CLASSES[resolve_backend_name(backend)]
