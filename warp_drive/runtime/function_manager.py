"""``FunctionManager``: build, load and launch kernels; ``FunctionFeed``: names to arguments.

The launch geometry of an environment kernel follows the data model — one
block row per environment replica — and is passed at run time; kernels read it
back through ``wd_env_id()`` / ``wd_agent_id()`` (``warp_drive/core.h``), so
nothing is templated into generated sources and one process can hold any
number of configurations. :meth:`FunctionManager.env_geometry` chooses it from
the kernel's own limits (its registers cap its block size on a GPU) and the
executor's capabilities, in one place:

* ``THREADS_PER_AGENT`` (thread = agent): ``grid = (num_envs, blocks_per_env)``,
  ``block = ceil(num_agents / blocks_per_env)``; an env too large for the
  kernel is refused naming the kernel, its resources and the largest env that fits;
* ``AGENT_PHASES`` (``WD_FOR_EACH_AGENT``): ``grid = (num_envs,)`` and one
  thread per agent up to the kernel's limit -- or one thread per env where a
  block's threads take turns on one host thread anyway (the cpu executor).
"""

from __future__ import annotations

import math
import warnings
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

from warp_drive.runtime.backends import get_backend
from warp_drive.runtime.backends.base import Backend, BoundLaunch, Kernel, KernelLaunchError, Module
from warp_drive.runtime.backends.build_cache import KERNELS_DIR
from warp_drive.runtime.backends.signature import KernelSignature
from warp_drive.runtime.data_values import DONE, TIMESTEP
from warp_drive.runtime.layouts import AGENT_PHASES, THREADS_PER_AGENT, THREADS_PER_ENV

FLAT_BLOCK = 256  # threads per block of a one-thread-per-env (THREADS_PER_ENV) launch
CORE_SOURCES = [KERNELS_DIR / name for name in ("sampler.cu", "reset.cu", "log.cu", "clock.cu")]

_core_modules: dict[int, Module] = {}


def core_module(backend: Backend) -> Module:
    """The framework's own kernels (sampler, reset, log, clock), built once per backend."""
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


# Readable C names a kernel may give the framework's reserved arrays and scalars. A C parameter binds to the
# array or scalar of its own name first; only a name the env does not define falls back to its alias.
RESERVED_ALIASES = {
    "done": DONE,
    "timestep": TIMESTEP,
    "num_agents": "n_agents",
    "num_envs": "n_envs",
    "actions": "sampled_actions",
    "obs": "observations",
}


def _canonical(name: str) -> str:
    return RESERVED_ALIASES.get(name, name)


def _defined(data_manager, name: str) -> bool:
    return data_manager.is_data_on_device(name) or data_manager.has_meta(name)


def _close_matches(data_manager, name: str) -> str:
    import difflib

    known = [*data_manager.array_names, *data_manager.scalar_data_list]
    close = difflib.get_close_matches(name, known, n=3, cutoff=0.6)
    return f" (close: {', '.join(close)})" if close else ""


def arguments_by_name(signature: KernelSignature, data_manager, declared: Sequence[Any] = (),
                      owner: str = "", extra: Mapping[str, Any] | None = None) -> list[Any]:
    """The names that bind ``signature``'s C parameters, in order: each parameter is the array or scalar of
    its own C name (or, where the env defines no such name, of its reserved alias: ``done`` is ``_done_``).

    ``declared`` (an env's old ``step_args``) is still accepted, but every entry must name what the C
    parameter at its position names: a swap of two same-typed arguments (``grid_size`` and ``num_food``, both
    ``int``) would otherwise reach the kernel and corrupt memory, so it is refused here, naming the position,
    the Python name and the C name. A literal (not a name) in ``declared`` is passed as it is.

    ``extra``: names the framework gives this kernel alone, with their values (a reset kernel's ``reset_seed``
    and ``reset_count``, rewritten before each launch): a C parameter of such a name binds that literal.
    """
    who = f"{owner}: " if owner else ""
    params = signature.params
    if declared:
        if len(declared) != len(params):
            raise ValueError(
                f"{who}step_args lists {len(declared)} arguments but kernel {signature.describe()} takes "
                f"{len(params)}. Fix: drop step_args (arguments bind by their C parameter names)")
        for index, (entry, param) in enumerate(zip(declared, params)):
            name = entry[0] if isinstance(entry, tuple) else entry
            if isinstance(name, str) and _canonical(name) != _canonical(param.name):
                raise ValueError(
                    f"{who}step_args[{index}] is {name!r} but kernel {signature.name}'s parameter {index} is "
                    f"'{param.describe()}': arguments bind by name, so Python's {name!r} cannot be passed as C's "
                    f"{param.name!r}. Fix: drop step_args (each C parameter binds the array or parameter of its "
                    f"own name), or rename one of the two")
        warnings.warn(f"{who}step_args is no longer needed and will go: each C parameter of kernel "
                      f"{signature.name} binds the array or parameter of its own name", DeprecationWarning,
                      stacklevel=4)
        return list(declared)
    names = []
    for index, param in enumerate(params):
        if extra and param.name in extra:
            names.append(extra[param.name])
            continue
        name = param.name if _defined(data_manager, param.name) else _canonical(param.name)
        if not _defined(data_manager, name):
            alias = f" or {name!r}" if name != param.name else ""
            raise ValueError(
                f"{who}kernel {signature.name}'s parameter {index} '{param.describe()}' binds by name, but the env "
                f"defines no array or parameter {param.name!r}{alias}{_close_matches(data_manager, param.name)}. "
                f"Fix: name the C parameter after the array or parameter it reads, or declare {param.name!r} "
                f"(get_data_dictionary, or the env's parameters)")
        is_array = data_manager.is_data_on_device(name)
        if is_array != param.pointer:
            given = f"array {name!r} {data_manager.get_dtype(name)} {data_manager.get_shape(name)}" if is_array \
                else f"scalar {name!r} = {data_manager.meta_info(name)!r}"
            wanted = "a pointer (an array)" if param.pointer else "a scalar"
            raise ValueError(
                f"{who}kernel {signature.name}'s parameter {index} '{param.describe()}' is {wanted}, but its name "
                f"binds the env's {given}. Fix: declare the C parameter as "
                f"{'a scalar' if not is_array else 'a pointer'}, or give it the name of {wanted}")
        names.append((name, "device") if is_array else (name, "meta"))
    return names


class EnvTooLargeError(KernelLaunchError, ValueError):
    """An env has more agents than a thread-per-agent kernel can launch with."""


class FunctionManager:
    """Loads modules of kernels and launches them over the environment geometry.

    ``blocks_per_env`` applies to thread-per-agent kernels; None chooses the
    fewest blocks the kernel's own limit allows.
    """

    def __init__(self, num_envs: int, num_agents: int, blocks_per_env: int | None = None, backend: Any = "auto"):
        self.backend: Backend = get_backend(backend)
        self.num_envs, self.num_agents = int(num_envs), int(num_agents)
        self.requested_blocks_per_env = None if blocks_per_env is None else int(blocks_per_env)
        if self.num_envs < 1 or self.num_agents < 1 or (blocks_per_env is not None and int(blocks_per_env) < 1):
            raise ValueError("num_envs, num_agents and blocks_per_env must be positive")
        most = self.backend.capabilities.max_blocks_per_env
        if blocks_per_env is not None and most is not None and int(blocks_per_env) > most:
            raise ValueError(
                f"blocks_per_env={blocks_per_env}: the {self.backend.name} executor runs an env as at most {most} "
                f"block(s) (it has no grid-wide barrier); use blocks_per_env=1, or write the step with "
                "WD_FOR_EACH_AGENT (thread_layout = AGENT_PHASES) to run any number of agents in one block"
            )
        self._modules: list[Module] = []
        self._functions: dict[str, Kernel] = {}
        if self.requested_blocks_per_env is not None:
            self._classic_geometry(self.backend.limits.max_threads_per_block, "the device")

    # ------------------------------------------------------------ geometry
    @property
    def blocks_per_env(self) -> int:
        """Blocks per env of a thread-per-agent kernel at the device's limit (kernels may need more)."""
        if self.requested_blocks_per_env is not None:
            return self.requested_blocks_per_env
        return self._default_blocks_per_env(self.backend.limits.max_threads_per_block)

    @property
    def grid(self) -> tuple[int, int, int]:
        return (self.num_envs, self.blocks_per_env, 1)

    @property
    def block(self) -> tuple[int, int, int]:
        return (math.ceil(self.num_agents / self.blocks_per_env), 1, 1)

    def _default_blocks_per_env(self, max_threads: int) -> int:
        blocks = max(1, math.ceil(self.num_agents / max(1, max_threads)))
        most = self.backend.capabilities.max_blocks_per_env
        return blocks if most is None else min(blocks, most)

    def _classic_geometry(self, max_threads: int, whose: str, kernel: Kernel | None = None):
        blocks = self.requested_blocks_per_env or self._default_blocks_per_env(max_threads)
        threads = math.ceil(self.num_agents / blocks)
        if threads > max_threads:
            name = f"kernel {kernel.name}" if kernel is not None else f"the {self.backend.name} executor"
            limit = kernel.resources.describe() if kernel is not None else f"at most {max_threads} threads per block"
            if self.backend.capabilities.max_blocks_per_env is None:  # more blocks per env are possible
                fix = f"blocks_per_env={math.ceil(self.num_agents / max_threads)}"
            else:
                fix = f"at most {max_threads * blocks} agents per env"
            raise EnvTooLargeError(
                f"{name} cannot step an env of {self.num_agents} agents with one thread per agent in {blocks} "
                f"block(s) per env: it uses {limit} ({whose}). Use {fix}, or write the step as phases over agents "
                "(WD_FOR_EACH_AGENT in warp_drive/agents.h, thread_layout = AGENT_PHASES), which runs any number "
                "of agents in one block"
            )
        return (self.num_envs, blocks, 1), (threads, 1, 1), blocks > 1

    def env_geometry(self, name: str, layout: str = THREADS_PER_AGENT):
        """``(grid, block, cooperative)`` of env kernel ``name`` written in ``layout``,
        from the kernel's own limits and the executor's capabilities."""
        kernel = self.get_function(name)
        limit = kernel.resources.max_threads_per_block
        if layout == AGENT_PHASES:
            if self.requested_blocks_per_env not in (None, 1):
                raise ValueError(f"kernel {name} loops over agents (AGENT_PHASES) in one block per env; "
                                 f"blocks_per_env={self.requested_blocks_per_env} does not apply")
            threads = 1 if self.backend.capabilities.serial_blocks else min(self.num_agents, limit)
            return (self.num_envs, 1, 1), (threads, 1, 1), False
        if layout != THREADS_PER_AGENT:
            raise ValueError(f"env_geometry: layout {layout!r} is not {THREADS_PER_AGENT!r} or {AGENT_PHASES!r}")
        return self._classic_geometry(limit, "its own limit", kernel)

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
    def bind(self, name: str, args: Sequence[Any], grid=None, block=None, shared_mem: int = 0,
             layout: str = THREADS_PER_AGENT) -> BoundKernel:
        """Check ``args`` once; the result launches ``name`` with no further checks.

        Without ``grid``/``block`` the environment geometry of ``layout`` is
        used (:meth:`env_geometry`); a launch over several blocks per env is
        cooperative so that ``wd_sync_env`` is safe.
        """
        if grid is None and block is None:
            grid, block, cooperative = self.env_geometry(name, layout)
        else:
            grid = self.grid if grid is None else grid
            block = self.block if block is None else block
            cooperative = isinstance(grid, tuple) and len(grid) > 1 and grid[1] > 1
        return BoundKernel(self.get_function(name).bind(*args), grid, block, shared_mem, cooperative)

    def bind_env_kernel(self, name: str, args: Sequence[Any], layout: str) -> BoundKernel:
        """Bind env kernel ``name`` (a step or a reset kernel) in the env's thread ``layout``: the env
        geometry (:meth:`env_geometry`) for ``THREADS_PER_AGENT`` and ``AGENT_PHASES``, and for
        ``THREADS_PER_ENV`` a flat launch of one thread per env in blocks of :data:`FLAT_BLOCK`."""
        if layout != THREADS_PER_ENV:
            return self.bind(name, args, layout=layout)
        block = min(FLAT_BLOCK, self.num_envs)
        return self.bind(name, args, grid=(math.ceil(self.num_envs / block), 1, 1), block=(block, 1, 1))

    def launch(self, name: str, args: Sequence[Any], grid=None, block=None, shared_mem: int = 0) -> None:
        self.bind(name, args, grid, block, shared_mem)()

    def launch_flat(self, name: str, args: Sequence[Any], n_threads: int, block_size: int = 256) -> None:
        """Launch over ``n_threads`` threads in 1-D (for kernels indexed by ``wd_global_thread_id()``)."""
        if n_threads < 1:
            raise KernelLaunchError(f"kernel {name}: launch over {n_threads} threads")
        block_size = min(block_size, n_threads)
        self.launch(name, args, grid=(math.ceil(n_threads / block_size), 1, 1), block=(block_size, 1, 1))
