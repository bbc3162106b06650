"""``FunctionManager``: build, load and launch kernels; ``FunctionFeed``: names to arguments.

The launch geometry of an environment kernel is fixed by the data model — one
block row per environment replica, its agents spread over ``blocks_per_env``
blocks — and passed at run time: ``grid = (num_envs, blocks_per_env, 1)``,
``block = (ceil(num_agents / blocks_per_env), 1, 1)``. Kernels read it back
through ``wd_env_id()`` / ``wd_agent_id()`` (``warp_drive/core.h``), so nothing
is templated into generated sources and one process can hold any number of
configurations.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Iterable, Sequence

from warp_drive.backends import get_backend
from warp_drive.backends.base import Backend, BoundLaunch, Kernel, KernelLaunchError, Module
from warp_drive.backends.build_cache import KERNELS_DIR

CORE_SOURCES = [KERNELS_DIR / name for name in ("sampler.cu", "reset.cu", "log.cu")]

_core_modules: dict[int, Module] = {}


def core_module(backend: Backend) -> Module:
    """The framework's own kernels (sampler, reset, log), built once per backend."""
    key = id(backend)
    if key not in _core_modules:
        _core_modules[key] = backend.build(CORE_SOURCES)
    return _core_modules[key]


def _source_paths(sources: Any) -> list[Path]:
    """Paths from a path, a list of paths, or an env (class or instance) with ``cuda_source``."""
    if hasattr(sources, "cuda_source"):
        sources = sources.cuda_source
    if isinstance(sources, (str, Path)):
        sources = [sources]
    return [Path(s) for s in sources]


class BoundKernel:
    """A kernel with its arguments checked once and its geometry fixed: the
    object a step loop calls every iteration."""

    def __init__(self, launch: BoundLaunch, grid, block, shared_mem: int, cooperative: bool):
        self._launch = launch
        self.grid, self.block, self.shared_mem, self.cooperative = grid, block, shared_mem, cooperative

    def __call__(self) -> None:
        self._launch.launch(self.grid, self.block, self.shared_mem, self.cooperative)

    def set_scalar(self, index: int, value) -> None:
        self._launch.set_scalar(index, value)


class FunctionFeed:
    """Turns a list of array and meta names into a kernel's positional arguments.

    Each entry is ``"name"`` (an array on the device, else a meta scalar),
    ``("name", "device")``, ``("name", "meta")``, or a literal value (a number
    or a tensor) passed through. Unlike WarpDrive's feed it resolves every call
    (it never returns the first list it resolved for a different request).
    """

    def __init__(self, data_manager):
        self.data_manager = data_manager

    def __call__(self, arguments: Iterable[Any]) -> list[Any]:
        return [self._resolve(arg) for arg in arguments]

    feed = __call__

    def _resolve(self, arg: Any) -> Any:
        dm = self.data_manager
        if isinstance(arg, tuple):
            if len(arg) != 2 or arg[1] not in ("device", "d", "meta", "m"):
                raise ValueError(f"argument {arg!r}: use 'name', ('name', 'device') or ('name', 'meta')")
            name, kind = arg
            return dm.device_data(name) if kind in ("device", "d") else dm.meta_info(name)
        if isinstance(arg, str):
            return dm.device_data(arg)  # an unknown name raises with close-match suggestions
        return arg


class FunctionManager:
    """Loads modules of kernels and launches them over the environment geometry."""

    def __init__(self, num_envs: int, num_agents: int, blocks_per_env: int = 1, backend: Any = "auto"):
        self.backend: Backend = get_backend(backend)
        self.num_envs, self.num_agents = int(num_envs), int(num_agents)
        self.blocks_per_env = int(blocks_per_env)
        if self.blocks_per_env < 1 or self.num_envs < 1 or self.num_agents < 1:
            raise ValueError("num_envs, num_agents and blocks_per_env must be positive")
        if self.blocks_per_env > 1 and self.backend.name == "cpu":
            raise ValueError(
                f"blocks_per_env={self.blocks_per_env}: the cpu executor runs each env as one block of any "
                "size; use blocks_per_env=1"
            )
        threads = math.ceil(self.num_agents / self.blocks_per_env)
        if threads > self.backend.limits.max_threads_per_block:
            raise ValueError(
                f"{self.num_agents} agents in {self.blocks_per_env} block(s) per env needs {threads} threads per "
                f"block; {self.backend.name} allows {self.backend.limits.max_threads_per_block}. Use "
                f"blocks_per_env={math.ceil(self.num_agents / self.backend.limits.max_threads_per_block)}"
            )
        self._modules: list[Module] = []
        self._functions: dict[str, Kernel] = {}

    # ------------------------------------------------------------ geometry
    @property
    def grid(self) -> tuple[int, int, int]:
        return (self.num_envs, self.blocks_per_env, 1)

    @property
    def block(self) -> tuple[int, int, int]:
        return (math.ceil(self.num_agents / self.blocks_per_env), 1, 1)

    # ------------------------------------------------------------ modules
    def compile_and_load(self, sources: Any, include_dirs: Sequence[str | Path] = (), defines=None) -> Module:
        """Build (or fetch from the cache) ``sources`` — a ``.cu`` path, a list,
        or an env with a ``cuda_source`` attribute — and load the module."""
        module = self.backend.build(_source_paths(sources), include_dirs=include_dirs, defines=defines)
        if module not in self._modules:
            self._modules.append(module)
        return module

    @property
    def modules(self) -> list[Module]:
        return [core_module(self.backend), *self._modules]

    def initialize_functions(self, names: Iterable[str]) -> None:
        for name in names:
            if name in self._functions:
                raise ValueError(f"kernel {name!r} is already initialized")
            owners = [m for m in self.modules if name in m.signatures]
            if not owners:
                defined = sorted({k for m in self.modules for k in m.kernel_names})
                raise KeyError(f"no loaded module defines kernel {name!r}; loaded kernels: {', '.join(defined)}")
            if len(owners) > 1:
                raise ValueError(f"kernel {name!r} is defined by several modules: "
                                 + "; ".join(str(m.sources) for m in owners))
            self._functions[name] = owners[0].get_function(name)

    def get_function(self, name: str) -> Kernel:
        if name not in self._functions:
            self.initialize_functions([name])
        return self._functions[name]

    @property
    def function_names(self) -> list[str]:
        return list(self._functions)

    def initialize_shared_constants(self, data_manager, constant_names: Iterable[str]) -> None:
        """Copy the DataManager's shared constants into ``__constant__`` symbols."""
        for name in constant_names:
            owners = [m for m in self._modules if name in getattr(m, "constants", {})] or self._modules
            errors = []
            for module in owners:
                try:
                    module.set_constant(name, data_manager.shared_constant(name))
                    break
                except KeyError as exc:
                    errors.append(str(exc))
            else:
                raise KeyError(f"no loaded module has a __constant__ named {name!r}: {'; '.join(errors)}")

    # ------------------------------------------------------------ launches
    def bind(self, name: str, args: Sequence[Any], grid=None, block=None, shared_mem: int = 0) -> BoundKernel:
        """Check ``args`` once; the result launches ``name`` with no further checks.

        ``grid``/``block`` default to the environment geometry; a launch over
        several blocks per env is cooperative so that ``wd_sync_env`` is safe.
        """
        grid = self.grid if grid is None else grid
        block = self.block if block is None else block
        cooperative = isinstance(grid, tuple) and len(grid) > 1 and grid[1] > 1
        return BoundKernel(self.get_function(name).bind(*args), grid, block, shared_mem, cooperative)

    def launch(self, name: str, args: Sequence[Any], grid=None, block=None, shared_mem: int = 0) -> None:
        self.bind(name, args, grid, block, shared_mem)()

    def launch_flat(self, name: str, args: Sequence[Any], n_threads: int, block_size: int = 256) -> None:
        """Launch over ``n_threads`` threads in 1-D (for kernels indexed by ``wd_global_thread_id()``)."""
        if n_threads < 1:
            raise KernelLaunchError(f"kernel {name}: launch over {n_threads} threads")
        block_size = min(block_size, n_threads)
        self.launch(name, args, grid=(math.ceil(n_threads / block_size), 1, 1), block=(block_size, 1, 1))
