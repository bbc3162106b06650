"""Backends: the same CUDA C on two executors (``cpu`` and ``pycuda``).

``cpu-gpu`` is the cpu executor shaped like a GPU (the GPU's macros, block
limits and launch geometry): what CI runs to execute the GPU's code path.

``get_backend(name)`` returns one shared instance per executor, so that a
DataManager and a FunctionManager created with the same name agree on where the
arrays live.
"""

from __future__ import annotations

import os

from warp_drive.backends.base import (  # noqa: F401  (re-exported)
    Backend,
    BoundLaunch,
    Kernel,
    KernelBuildError,
    KernelLaunchError,
    Module,
)
from warp_drive.backends.cpu import CpuBackend, GpuShapedCpuBackend
from warp_drive.backends.pycuda_backend import PyCudaBackend  # imports no PyCUDA until one is made

BACKEND_NAMES = ("auto", "cpu", "cpu-gpu", "pycuda")
_CLASSES: dict[str, type[Backend]] = {"cpu": CpuBackend, "cpu-gpu": GpuShapedCpuBackend, "pycuda": PyCudaBackend}

_instances: dict[str, Backend] = {}


def gpu_available() -> bool:
    """True when PyCUDA imports and torch sees a CUDA device."""
    try:
        import torch

        if not torch.cuda.is_available():
            return False
        import pycuda.driver  # noqa: F401
    except Exception:
        return False
    return True


def resolve_backend_name(name: str | None) -> str:
    """``auto`` (the default, also via ``$WARP_DRIVE_BACKEND``) means ``pycuda``
    where a GPU and PyCUDA are present, else ``cpu``."""
    name = (name or os.environ.get("WARP_DRIVE_BACKEND") or "auto").lower()
    if name not in BACKEND_NAMES:
        raise ValueError(f"unknown backend {name!r}; choose one of {', '.join(BACKEND_NAMES)}")
    if name == "auto":
        return "pycuda" if gpu_available() else "cpu"
    return name


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
