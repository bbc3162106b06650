"""The executors' names and how ``auto`` resolves, without importing any executor (or torch).

Kept apart from ``warp_drive.runtime.backends`` so that the config reader and the CLI can
check a backend name, and answer ``--help``, ``configs`` and ``envs``, without
the two-second torch import that the executors bring.
"""

from __future__ import annotations

from warp_drive.runtime import env_vars

BACKEND_NAMES = ("auto", "cpu", "cpu-gpu", "pycuda")


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
    name = (name or env_vars.read("WARP_DRIVE_BACKEND") or "auto").lower()
    if name not in BACKEND_NAMES:
        raise ValueError(f"unknown backend {name!r}; choose one of {', '.join(BACKEND_NAMES)}")
    if name == "auto":
        return "pycuda" if gpu_available() else "cpu"
    return name
