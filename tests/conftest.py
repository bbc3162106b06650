"""Shared pytest setup.

* Tests marked ``gpu`` are skipped unless a CUDA GPU is usable: torch sees a
  device *and* ``pycuda.driver`` imports.
* ``backend_name`` runs a test once per executor: ``"cpu"`` always, and
  ``"pycuda"`` (marked ``gpu``, so skipped without one).
* Under pytest-xdist (``make test``), the longest files are collected first;
  see :func:`longest_first`.
"""

from __future__ import annotations

import functools
import os

import pytest

# The files that take longest, longest first (measured with --durations on the
# 2-core VM, 2026-12-02). `make test` runs files whole on each worker
# (--dist loadfile) in collection order (--no-loadscope-reorder): starting these
# first keeps a worker from being left alone with one of them at the end. A
# stale list costs speed, never correctness.
LONGEST_FILES = (
    "tests/project/test_tutorials.py",
    "tests/cli/test_check.py",
    "tests/runtime/test_race_mode.py",
    "tests/runtime/test_kernel_coverage.py",
    "tests/runtime/test_build_gate.py",
    "tests/cli/test_new_env.py",
    "tests/learning/test_learning.py",
    "tests/project/test_packaging.py",
    "tests/runtime/test_build_cache_trust.py",
    "tests/project/test_gpu_checklist.py",
    "tests/project/test_docs.py",
)


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


def longest_first(items) -> None:
    """Reorder ``items`` in place: :data:`LONGEST_FILES` in that order, then the
    other files holding ``slow`` tests, then the rest (each file's tests stay
    together and in order) -- longest-processing-time-first scheduling."""
    slow_files = {item.path for item in items if item.get_closest_marker("slow") is not None}

    def rank(item) -> int:
        relative = item.path.relative_to(item.config.rootpath).as_posix()
        if relative in LONGEST_FILES:
            return LONGEST_FILES.index(relative)
        return len(LONGEST_FILES) + (0 if item.path in slow_files else 1)

    order = {id(item): (rank(item), index) for index, item in enumerate(items)}
    items.sort(key=lambda item: order[id(item)])


def pytest_collection_modifyitems(config, items):
    if os.environ.get("PYTEST_XDIST_WORKER"):  # every worker collects, and sorts the same way
        longest_first(items)
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
