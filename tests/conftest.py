"""Shared pytest setup.

* Tests marked ``gpu`` are skipped unless a CUDA GPU is usable: torch sees a
  device *and* ``pycuda.driver`` imports.
* ``backend_name`` runs a test once per executor: ``"cpu"`` always, and
  ``"pycuda"`` (marked ``gpu``, so skipped without one).
"""

from __future__ import annotations

import functools

import pytest


@functools.lru_cache(maxsize=None)
def gpu_unusable_reason() -> str | None:
    """None when a GPU can be used through PyCUDA, else why not."""
    try:
        import torch
    except Exception as exc:  # pragma: no cover - torch is a hard requirement
        return f"torch not importable ({exc})"
    if not torch.cuda.is_available():
        return "no CUDA GPU (torch.cuda.is_available() is False)"
    try:
        import pycuda.driver  # noqa: F401
    except Exception as exc:
        return f"PyCUDA not usable ({type(exc).__name__}: {exc}); pip install -e '.[cuda]'"
    return None


def pytest_collection_modifyitems(config, items):
    gpu_items = [item for item in items if item.get_closest_marker("gpu") is not None]
    if not gpu_items:
        return
    reason = gpu_unusable_reason()
    if reason is None:
        return
    skip_gpu = pytest.mark.skip(reason=f"gpu test skipped: {reason}")
    for item in gpu_items:
        item.add_marker(skip_gpu)


@pytest.fixture(params=["cpu", pytest.param("pycuda", marks=pytest.mark.gpu)])
def backend_name(request) -> str:
    """Executor name: run the same test on the cpu and (with a GPU) pycuda backends."""
    return request.param


@pytest.fixture(params=["cpu", "cpu-gpu", pytest.param("pycuda", marks=pytest.mark.gpu)])
def env_backend(request) -> str:
    """Executor of an env test: the cpu executor in both shapes -- native (one host
    thread per env for phase kernels) and GPU-shaped (the GPU's macros, block
    limits and geometry, so the GPU's code path runs here) -- and, with a GPU, pycuda."""
    return request.param


@pytest.fixture
def clean_registrar():
    """WarpDrive's EnvironmentRegistrar is class-level (process-wide): restore it after a test registers."""
    from warp_drive.utils.env_registrar import EnvironmentRegistrar

    saved = ({k: dict(v) for k, v in EnvironmentRegistrar._envs.items()},
             {k: dict(v) for k, v in EnvironmentRegistrar._customized_cuda_env_src_paths.items()})
    yield EnvironmentRegistrar
    EnvironmentRegistrar._envs, EnvironmentRegistrar._customized_cuda_env_src_paths = saved
