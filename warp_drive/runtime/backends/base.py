"""The backend interface: one contract, two executors of the same CUDA C.

A *backend* turns CUDA C sources into a loaded :class:`Module` and launches its
kernels on arrays that torch allocated on ``backend.device``. Everything above
this layer (DataManager, FunctionManager, Sampler, reset, log, EnvWrapper,
training) is written once against this interface and never asks which executor
runs underneath.

* ``cpu``    -- the host C++ compiler builds the ``.cu`` files against an
  emulation header; blocks run on a pool of host threads, CUDA threads are
  fibers (see ``warp_drive/cuda/cpu/``).
* ``pycuda`` -- nvcc builds a cubin for the present GPU; PyCUDA launches it
  inside torch's primary context on pointers that torch allocated.
"""

from __future__ import annotations

import abc
import operator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Sequence

import torch

from warp_drive.runtime.backends.errors import KernelBuildError, KernelLaunchError  # noqa: F401  (re-exported)
from warp_drive.runtime.backends.signature import KernelSignature

if TYPE_CHECKING:
    from warp_drive.runtime.backends.resources import KernelResources


Dim3 = tuple[int, int, int]


# CUDA's limits on grid dimensions (x, y, z); block sizes are per backend.
GRID_LIMITS = (2**31 - 1, 65535, 65535)


def as_dim3(value: int | Sequence[int], what: str) -> Dim3:
    """Normalise an int or a 1-3 sequence of ints (numpy ints too) to a CUDA ``dim3``."""
    try:
        dims = [operator.index(value)] if not isinstance(value, (tuple, list)) else [operator.index(v) for v in value]
    except TypeError:
        raise KernelLaunchError(f"{what} must be a positive int or 1-3 positive ints, got {value!r}") from None
    if not 1 <= len(dims) <= 3 or any(d < 1 for d in dims):
        raise KernelLaunchError(f"{what} must be a positive int or 1-3 positive ints, got {value!r}")
    return tuple(dims + [1] * (3 - len(dims)))  # type: ignore[return-value]


def check_geometry(grid: Dim3, block: Dim3, shared_mem: int, limits: "DeviceLimits", kernel: str,
                   resources: "KernelResources | None" = None) -> None:
    """Refuse launches the device (or this kernel's own resources) cannot run,
    instead of truncating them."""
    if any(g > limit for g, limit in zip(grid, GRID_LIMITS)):
        raise KernelLaunchError(f"kernel {kernel}: grid {grid} exceeds CUDA's limits {GRID_LIMITS}")
    threads = block[0] * block[1] * block[2]
    if threads > limits.max_threads_per_block:
        raise KernelLaunchError(
            f"kernel {kernel}: block {block} has {threads} threads; the device allows {limits.max_threads_per_block} "
            "threads per block"
        )
    if resources is not None and threads > resources.max_threads_per_block:
        raise KernelLaunchError(f"kernel {kernel}: block {block} has {threads} threads; this kernel uses "
                                f"{resources.describe()}")
    if not 0 <= shared_mem <= limits.max_dynamic_shared_bytes:
        raise KernelLaunchError(
            f"kernel {kernel}: {shared_mem} bytes of dynamic shared memory requested; the limit is "
            f"{limits.max_dynamic_shared_bytes}"
        )


class Kernel(abc.ABC):
    """One ``__global__`` function of a loaded module."""

    def __init__(self, module: "Module", signature: KernelSignature):
        self.module = module
        self.signature = signature

    @property
    def name(self) -> str:
        return self.signature.name

    @property
    @abc.abstractmethod
    def resources(self) -> "KernelResources":
        """Registers, shared memory and the largest block this kernel may launch with."""

    def __call__(self, *args, grid, block, shared_mem: int = 0, cooperative: bool = False) -> None:
        """Check ``args`` against the kernel's C signature and launch it."""
        self.bind(*args).launch(grid, block, shared_mem, cooperative)

    @abc.abstractmethod
    def bind(self, *args) -> "BoundLaunch":
        """Check and pack ``args`` once; the result launches with no re-checking.

        Arrays are torch tensors on the backend's device (their storage must not
        be reallocated while the binding is in use, which the DataManager
        guarantees since it updates arrays in place); scalars are converted to
        the parameter's C type, refusing values that do not fit.
        """


class BoundLaunch(abc.ABC):
    """Arguments already checked and packed for one kernel: the hot path."""

    @abc.abstractmethod
    def launch(self, grid, block, shared_mem: int = 0, cooperative: bool = False) -> None:
        """Launch on the bound arguments. ``cooperative`` guarantees that all
        blocks are co-resident (needed by ``wd_sync_env`` when an env spans
        several blocks on a GPU); the cpu executor runs an env as one block and
        never needs it."""

    @abc.abstractmethod
    def set_scalar(self, index: int, value) -> None:
        """Replace the value of scalar argument ``index`` (e.g. a step counter)."""


class Module(abc.ABC):
    """A built and loaded set of kernels."""

    def __init__(self, sources: Sequence[Path], kernels: dict[str, KernelSignature], from_cache: bool):
        self.sources = list(sources)
        self.signatures = kernels
        self.from_cache = from_cache  # True when no compiler ran for this load

    @property
    def kernel_names(self) -> list[str]:
        return list(self.signatures)

    def get_function(self, name: str) -> Kernel:
        if name not in self.signatures:
            raise KeyError(
                f"kernel {name!r} is not defined in {', '.join(map(str, self.sources))}; "
                f"defined kernels: {', '.join(sorted(self.signatures)) or '(none)'}. "
                "Kernels must be declared extern \"C\" __global__."
            )
        return self._kernel(name)

    @abc.abstractmethod
    def _kernel(self, name: str) -> Kernel: ...

    @abc.abstractmethod
    def set_constant(self, name: str, value) -> None:
        """Copy ``value`` (array-like) into the ``__constant__`` symbol ``name``."""


@dataclass(frozen=True)
class DeviceLimits:
    max_threads_per_block: int
    max_dynamic_shared_bytes: int


@dataclass(frozen=True)
class Capabilities:
    """What the layers above need to know about an executor, as data: they read
    these and never ask for the executor's name.

    * ``serial_blocks``: a block's threads take turns on one host thread, so an
      ``AGENT_PHASES`` kernel runs best as one thread per env (a plain loop over
      its agents); otherwise one thread per agent, up to the kernel's limit.
    * ``max_blocks_per_env``: 1 where an env must be one block (no grid-wide
      barrier); None where several blocks per env launch cooperatively.
    * ``collective_backend``: the ``torch.distributed`` backend for
      data-parallel training on this executor's device.
    * ``memory``: where arrays live, for memory probes: ``"host"`` (resident
      set size) or ``"cuda"`` (torch's CUDA allocator).
    * ``shares_host_cores``: the kernels' worker pool uses the host's cores, so
      torch gets one intra-op thread beside it.
    """

    serial_blocks: bool
    max_blocks_per_env: int | None
    collective_backend: str
    memory: str
    shares_host_cores: bool


class Backend(abc.ABC):
    """Builds modules and says where arrays live."""

    name: str
    device: torch.device
    limits: DeviceLimits
    capabilities: Capabilities  # a class attribute: readable before an instance (and its device) exists

    @abc.abstractmethod
    def build(
        self,
        sources: Sequence[str | Path],
        include_dirs: Sequence[str | Path] = (),
        defines: dict[str, str] | None = None,
    ) -> Module:
        """Build (or load from the cache) the given ``.cu`` files as one module."""

    def synchronize(self) -> None:
        """Wait for all launched work (a no-op where launches are synchronous)."""
