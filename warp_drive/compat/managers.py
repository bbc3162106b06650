"""WarpDrive 2.7's managers (``CUDADataManager``, ``CUDAFunctionManager``, ...) over ours.

Every class here is a subclass of this project's one implementation
(:class:`~warp_drive.runtime.data_manager.DataManager`,
:class:`~warp_drive.runtime.function_manager.FunctionManager`,
:class:`~warp_drive.services.sampler.Sampler`, :class:`~warp_drive.services.reset.EnvironmentReset`,
:class:`~warp_drive.services.log.LogController`) that only translates WarpDrive's
argument order, keywords and method names. WarpDrive's module paths
(``warp_drive.managers.*``) re-export them; its PyCUDA names are the same
classes, since one implementation serves every executor.

The translations that matter:

* **argument order**: WarpDrive's managers take *agents first*
  (``CUDADataManager(num_agents, num_envs, blocks_per_env, episode_length)``,
  ``CUDAFunctionManager(num_agents, num_envs, blocks_per_env, process_id)``);
  ours take envs first. A positional WarpDrive call builds the sizes WarpDrive
  meant here;
* **64-bit data**: WarpDrive cast float64 -> float32 and int64 -> int32 behind
  the user's back. Our DataManager refuses such data unless a dtype is
  requested; these managers cast as WarpDrive did but warn, naming the array,
  and still refuse values that do not fit (:func:`warpdrive_cast`);
* **kernel sources** build with WarpDrive's device-side names
  (``getEnvID``, ``__sync_env_threads``, ``wkNumberAgents``, ...) through
  :func:`warp_drive.compat.cuda_build.build_warpdrive_source`;
* every class takes ``backend=`` (default ``"auto"``: PyCUDA where a GPU is
  present, else the cpu executor, which runs the same kernels).
"""

from __future__ import annotations

import os
import sys
import warnings
from pathlib import Path
from typing import Any, Iterable

import numpy as np
import torch

from warp_drive.runtime.backends import get_backend
from warp_drive.compat.cuda_build import build_warpdrive_source, load_build_manifest, write_build_manifest
from warp_drive.runtime.data_feed import DataFeed
from warp_drive.runtime.data_manager import DataManager
from warp_drive.runtime.data_values import FLOAT32, INT32, _cast_checked, _tensor_to_numpy
from warp_drive.runtime.function_manager import FunctionFeed, FunctionManager
from warp_drive.services.log import LogController
from warp_drive.env.registry import get_env_class, registered_envs
from warp_drive.services.reset import EnvironmentReset
from warp_drive.services.sampler import Sampler
from warp_drive.compat.env_registrar import env_registrar as default_registrar
from warp_drive.compat.example_envs import KERNEL_BUILTIN_CONSTANTS

_WARPDRIVE_CASTS = {np.dtype(np.float64): FLOAT32, np.dtype(np.int64): INT32}
_PACKAGE_DIR = str(Path(__file__).resolve().parent.parent) + os.sep


def _warn(message: str) -> None:
    """A UserWarning attributed to the first caller outside this package (the user's line)."""
    level, frame = 1, sys._getframe(0)
    while frame is not None and frame.f_code.co_filename.startswith(_PACKAGE_DIR):
        frame, level = frame.f_back, level + 1
    warnings.warn(message, UserWarning, stacklevel=level)


# ---------------------------------------------------------------------------
# WarpDrive's 64-bit cast, with a warning
# ---------------------------------------------------------------------------


def warpdrive_value(name: str, value: Any) -> Any:
    """``value`` as WarpDrive pushed it: C-ordered, float64 -> float32 and
    int64 -> int32, each change announced by a ``UserWarning`` naming ``name``.

    Values that do not fit 32 bits (int64 outside the int32 range, finite
    float64 beyond float32's range) raise ``ValueError``: WarpDrive wrapped or
    overflowed them silently (reference §9.5). Other values pass unchanged, for
    the DataManager to accept or refuse with its own message.
    """
    if isinstance(value, torch.Tensor):
        value = _tensor_to_numpy(name, value)
    if isinstance(value, np.ndarray) and value.ndim > 0 and not value.flags.c_contiguous:
        _warn(f"{name!r} is not C-contiguous (e.g. Fortran-ordered or a transpose); copied to C order as "
              "WarpDrive did, since kernels index row-major memory. Pass np.ascontiguousarray(...) to silence this")
        value = np.ascontiguousarray(value)
    if isinstance(value, (np.ndarray, np.generic)) and value.dtype in _WARPDRIVE_CASTS:
        target = _WARPDRIVE_CASTS[value.dtype]
        cast = _cast_checked(name, np.asarray(value), target)  # raises for values that do not fit
        _warn(f"{name!r} is {value.dtype.name}; cast to {target.name} as WarpDrive did (every value fits). "
              f"Pass {target.name} data (or DataFeed.add_data(..., dtype='{target.name}')) to silence this")
        value = cast if isinstance(value, np.ndarray) else cast[()]
    return value


def warpdrive_cast(data_feed: dict) -> dict:
    """A copy of ``data_feed`` with WarpDrive's 32-bit cast applied to each entry
    (see :func:`warpdrive_value`); the caller's feed and arrays are not changed.

    Entries that request a ``dtype`` are left to the DataManager, which casts
    them as requested; malformed entries pass through for it to refuse.
    """
    if not isinstance(data_feed, dict):
        raise TypeError(f"expected a DataFeed (a dict of name -> {{'data': ..., 'attributes': ...}}), "
                        f"got {type(data_feed).__name__}")
    out = type(data_feed)() if isinstance(data_feed, DataFeed) else {}
    for name, spec in data_feed.items():
        if isinstance(spec, dict) and "data" in spec:
            attributes = dict(spec.get("attributes") or {})
            if attributes.get("dtype") is None:
                spec = {**spec, "data": warpdrive_value(name, spec["data"]), "attributes": attributes}
            else:
                spec = {**spec, "attributes": attributes}
        dict.__setitem__(out, name, spec)  # bypasses DataFeed.add_data: the entry was declared already
    return out


def _require_sizes(**sizes) -> None:
    missing = [name for name, value in sizes.items() if value is None]
    if missing:
        raise TypeError(f"CUDADataManager needs {', '.join(missing)} (WarpDrive's order: "
                        "CUDADataManager(num_agents, num_envs, blocks_per_env=1, episode_length))")


def _service_backend(function_manager, backend) -> None:
    """Samplers, resets and logs run where their function manager runs; a
    ``backend=`` that names another executor is a mistake worth reporting."""
    if backend in (None, "auto"):
        return

    own = function_manager.backend
    if get_backend(backend) is not own:
        raise ValueError(f"backend={backend!r} differs from the function manager's backend {own.name!r}; "
                         "create the function manager with that backend (they must agree)")


# ---------------------------------------------------------------------------
# Data manager
# ---------------------------------------------------------------------------


class CUDADataManager(DataManager):
    """WarpDrive's ``CUDADataManager(num_agents, num_envs, blocks_per_env=1, episode_length)``.

    Agents first, as in WarpDrive; all three sizes are required. Data pushed,
    meta info and shared constants get WarpDrive's 32-bit cast with a warning
    (:func:`warpdrive_value`). ``blocks_per_env`` is recorded as the meta info
    ``blocks_per_env``, as WarpDrive did; the launch geometry belongs to the
    function manager.
    """

    def __init__(self, num_agents: int | None = None, num_envs: int | None = None, blocks_per_env: int = 1,
                 episode_length: int | None = None, backend: Any = "auto"):
        _require_sizes(num_agents=num_agents, num_envs=num_envs, episode_length=episode_length)
        super().__init__(num_envs, num_agents, episode_length, backend)
        self.add_meta_info({"blocks_per_env": blocks_per_env})

    def push_data_to_device(self, data: dict, torch_accessible: bool = False) -> None:
        super().push_data_to_device(warpdrive_cast(data), torch_accessible)

    def add_meta_info(self, meta: dict) -> None:
        if isinstance(meta, dict):
            meta = {name: warpdrive_value(name, value) for name, value in meta.items()}
        super().add_meta_info(meta)

    def add_shared_constants(self, constants: dict) -> None:
        if isinstance(constants, dict):
            constants = {name: warpdrive_value(name, value) for name, value in constants.items()}
        super().add_shared_constants(constants)


def CudaTensorHolder(tensor: torch.Tensor) -> torch.Tensor:
    """WarpDrive wrapped a tensor so that PyCUDA could pass its pointer; our
    kernels take torch tensors directly, so this returns the tensor itself."""
    if not isinstance(tensor, torch.Tensor):
        raise TypeError(f"CudaTensorHolder wraps a torch tensor, got {type(tensor).__name__}")
    return tensor


# ---------------------------------------------------------------------------
# Function manager and feed
# ---------------------------------------------------------------------------


class CUDAFunctionManager(FunctionManager):
    """WarpDrive's ``CUDAFunctionManager(num_agents=1, num_envs=1, blocks_per_env=1, process_id=0)``.

    Differences, on purpose:

    * ``grid`` is this project's ``(num_envs, blocks_per_env, 1)``, not
      WarpDrive's flat ``(num_envs * blocks_per_env, 1)``: they agree for one
      block per env (the common case), and WarpDrive's helpers
      (``getEnvID``/``getAgentID``) return the right ids in both layouts;
    * the framework's own kernels (sampler, reset, log) are always loaded, so
      ``initialize_default_functions`` has nothing to do;
    * several sources may be loaded (WarpDrive allowed one module);
    * ``process_id`` is recorded only: the build cache is safe for concurrent
      processes (a lock per product), so no process waits for another's build.
    """

    def __init__(self, num_agents: int = 1, num_envs: int = 1, blocks_per_env: int = 1, process_id: int = 0,
                 backend: Any = "auto"):
        super().__init__(num_envs, num_agents, blocks_per_env, backend)
        self.process_id = int(process_id)
        self._default_functions_initialized = True

    # -- loading ------------------------------------------------------------
    def load_cuda_from_source_code(self, code: str, default_functions_included: bool = True):
        """Build CUDA source *text* (WarpDrive's helper names available) and load it."""
        if not isinstance(code, str):
            raise TypeError(f"load_cuda_from_source_code takes the CUDA source as a str, got {type(code).__name__}")
        return build_warpdrive_source(self, code)

    def load_cuda_from_binary_file(self, cubin: str, default_functions_included: bool = True):
        """Load what :meth:`_compile` made: its source, built on this executor
        (see :func:`~warp_drive.compat.cuda_build.write_build_manifest`). A
        prebuilt binary from elsewhere is refused, naming the fix."""
        return load_build_manifest(self, cubin)

    @staticmethod
    def _compile(main_file=None, cubin_file=None, arch=None):
        """WarpDrive's build step: ``cubin_file`` records ``main_file``, which
        :meth:`load_cuda_from_binary_file` then builds on either executor.
        WarpDrive's ``test_build.cu`` works as written: its core includes are
        built in here, its size constants must match the function manager's."""
        if main_file is None or cubin_file is None:
            raise TypeError("_compile(main_file, cubin_file): both paths are needed")
        write_build_manifest(main_file, cubin_file)

    compile = _compile

    def compile_and_load_cuda(self, env_name: str, template_header_file: str | None = None,
                              template_runner_file: str | None = None, template_path: str | None = None,
                              default_functions_included: bool = True, customized_env_registrar=None,
                              event_messenger=None, defines: dict | None = None):
        """Build env ``env_name``'s kernel source: the path an ``EnvironmentRegistrar``
        holds for it, else the ``.cu`` of this project's env of that name.

        The template arguments are accepted and unused: the sizes reach the
        kernel as ``-D`` defines (:func:`~warp_drive.compat.cuda_build.warpdrive_defines`)
        instead of a header generated into the package.
        """
        registrar = customized_env_registrar if customized_env_registrar is not None else default_registrar
        path = registrar.get_cuda_env_src_path(env_name)
        if path is not None:
            return build_warpdrive_source(self, path, defines=defines)

        matches = [name for name in registered_envs() if name.lower() == str(env_name).lower()]
        if not matches:
            raise KeyError(
                f"no CUDA source known for env {env_name!r}: register it with "
                f"EnvironmentRegistrar().add_cuda_env_src_path({env_name!r}, '/path/to/step.cu'); "
                f"this project's envs: {', '.join(registered_envs())}"
            )
        return self.compile_and_load(get_env_class(matches[0]).cuda_source_path(), defines=defines)

    # -- functions ------------------------------------------------------------
    def initialize_default_functions(self) -> None:
        """Nothing to do: the sampler, reset and log kernels are built once per
        executor and always available to every function manager."""
        self._default_functions_initialized = True

    def initialize_functions(self, func_names: Iterable[str] | None = None) -> None:
        super().initialize_functions(func_names or [])

    def _get_function(self, fname: str):
        """The kernel, callable PyCUDA-style: ``kernel(*args, block=..., grid=...)``."""
        return self.get_function(fname)

    # -- shared constants -------------------------------------------------------
    def initialize_shared_constants(self, data_manager, constant_names: Iterable[str]) -> None:
        """Upload the data manager's shared constants into the loaded modules' ``__constant__`` symbols.

        A WarpDrive symbol that this project's kernel holds built in
        (:data:`~warp_drive.compat.example_envs.KERNEL_BUILTIN_CONSTANTS`, e.g.
        ``kIndexToActionArr`` of ``TagGridWorldStep``) has nothing to upload: its
        value must equal the built-in one (then this is a no-op), and any other
        value is refused, naming both, since the kernel could not use it.
        """
        names = [constant_names] if isinstance(constant_names, str) else list(constant_names)
        uploads = []
        for name in names:
            builtin = self._builtin_constant(name)
            if builtin is None:
                uploads.append(name)
                continue
            kernel, table = builtin
            value = np.asarray(data_manager.shared_constant(name))
            if value.size != table.size or not np.array_equal(value.reshape(-1), table.reshape(-1)):
                raise ValueError(
                    f"shared constant {name!r}: kernel {kernel} holds this table built in (WarpDrive uploaded it "
                    f"as a __constant__ symbol), as {table.reshape(-1).tolist()}; the value given, "
                    f"{value.reshape(-1).tolist()}, differs and cannot be used by the kernel. Upload the built-in "
                    f"table (the env's step_actions) or leave {name!r} out; to change the moves, edit the kernel's "
                    "move code and its NumPy reference together"
                )
        super().initialize_shared_constants(data_manager, uploads)

    def _builtin_constant(self, name: str) -> tuple[str, np.ndarray] | None:
        """(kernel, value) when ``name`` is a table a loaded kernel holds built in and no loaded
        module declares it as a ``__constant__`` symbol (a module that does gets the upload)."""
        if name not in KERNEL_BUILTIN_CONSTANTS:
            return None
        modules = self.modules
        if any(name in (getattr(m, "constants", None) or ()) for m in modules):
            return None
        kernels, table = KERNEL_BUILTIN_CONSTANTS[name]
        loaded = [k for k in kernels if any(k in m.kernel_names for m in modules)]
        if not loaded:
            return None
        return " / ".join(loaded), table

    @property
    def cuda_function_names(self) -> list[str]:
        return self.function_names

    @property
    def _num_agents(self) -> int:
        return self.num_agents

    @property
    def _num_envs(self) -> int:
        return self.num_envs


class CUDAFunctionFeed(FunctionFeed):
    """WarpDrive's feed: ``"name"``, ``("name", "device"|"d")``, ``("name", "meta"|"m")``
    and ``("name", "shared"|"s")`` (a shared constant, passed as its value; an
    array constant is passed as a device tensor). Unlike WarpDrive's, it
    resolves every call instead of returning the first list it built."""

    def __init__(self, data_manager):
        super().__init__(data_manager)
        self._shared_tensors: dict[str, torch.Tensor] = {}

    def _resolve(self, arg: Any) -> Any:
        if isinstance(arg, tuple) and len(arg) == 2 and isinstance(arg[1], str):
            name, kind = arg[0], arg[1].lower()
            if kind in ("s", "shared"):
                return self._shared(name)
            arg = (name, kind)
        return super()._resolve(arg)

    def _shared(self, name: str) -> Any:
        value = self.data_manager.shared_constant(name)
        if not isinstance(value, np.ndarray):
            return value
        if name not in self._shared_tensors:  # constants never change once added
            self._shared_tensors[name] = torch.as_tensor(value, device=self.data_manager.device)
        return self._shared_tensors[name]


# ---------------------------------------------------------------------------
# Sampler, reset, log
# ---------------------------------------------------------------------------


class CUDASampler(Sampler):
    """WarpDrive's sampler: ``register_actions(data_manager, action_name, num_actions)``,
    ``init_random(seed)``, ``sample(data_manager, distribution, action_name, use_argmax=False)``.

    Action arrays may be WarpDrive's ``(num_envs, num_agents, 1)`` or ``(num_envs, num_agents)``.
    ``init_random`` is optional here (the constructor seeds from the OS); RNG
    streams are stateless Philox, so there is no ``free_random``.
    """

    def __init__(self, function_manager, seed: int | None = None, backend: Any = "auto"):
        _service_backend(function_manager, backend)
        super().__init__(function_manager, seed)

    def register_actions(self, data_manager, action_name: str, num_actions, is_deterministic: bool = False) -> None:
        if is_deterministic:
            raise NotImplementedError(
                f"register_actions({action_name!r}, is_deterministic=True): continuous actions need their bounds "
                f"here; call register_continuous_actions(data_manager, {action_name!r}, low, high, damping=0.15, "
                "stddev=0.2) (an Ornstein-Uhlenbeck process, WarpDrive's defaults)"
            )
        super().register_actions(data_manager, action_name, num_actions)

    def sample(self, data_manager, distribution, action_name: str, use_argmax: bool = False, **sample_params) -> None:
        """``use_argmax=True`` takes the first most likely action; for continuous
        actions ``damping``, ``stddev`` and ``scale`` apply, as in WarpDrive."""
        argmax = bool(use_argmax) or bool(sample_params.pop("argmax", False))
        super().sample(data_manager, distribution, action_name, argmax, **sample_params)

    @staticmethod
    def assign(data_manager, actions, action_name: str) -> None:
        """Write ``actions`` (numpy array or tensor, exactly the array's shape
        and dtype) into the device array ``action_name`` in place."""
        if isinstance(actions, torch.Tensor):
            actions = _tensor_to_numpy(action_name, actions)
        actions = np.asarray(actions)
        shape, dtype = data_manager.get_shape(action_name), data_manager.get_dtype(action_name)
        if actions.shape != tuple(shape):
            raise ValueError(f"assign: actions have shape {actions.shape}; {action_name!r} has shape {tuple(shape)}")
        if actions.dtype.name != dtype:
            raise TypeError(f"assign: actions are {actions.dtype.name}; {action_name!r} is {dtype}. "
                            f"Pass actions.astype(np.{dtype})")
        data_manager.data_on_device_via_torch(action_name).copy_(torch.from_numpy(np.ascontiguousarray(actions)))


class CUDAEnvironmentReset(EnvironmentReset):
    """WarpDrive's ``reset_when_done(data_manager, mode="if_done", undo_done_after_reset=True)``.

    Reset pools are always drawn from when declared (WarpDrive's PyCUDA
    backend ignored them), so ``use_random_reset`` has nothing to switch.
    """

    def __init__(self, function_manager, seed: int | None = None, backend: Any = "auto"):
        _service_backend(function_manager, backend)
        super().__init__(function_manager, seed)

    def reset_when_done(self, data_manager, mode: str = "if_done", undo_done_after_reset: bool = True,
                        use_random_reset: bool = False) -> None:
        super().reset_when_done(data_manager, mode, undo_done_after_reset)


class CUDALogController(LogController):
    """WarpDrive's log controller: ``reset_log``, ``update_log``, and
    ``fetch_log(data_manager, names=None, last_step=None, check_last_valid_step=True)``
    returning ``{"<name>_for_log": array of rows 0..last step}``."""

    def __init__(self, function_manager, backend: Any = "auto"):
        _service_backend(function_manager, backend)
        super().__init__(function_manager)

    @property
    def last_valid_step(self) -> int:
        return self.last_step

    def fetch_log(self, data_manager, names=None, last_step: int | None = None,
                  check_last_valid_step: bool = True) -> dict[str, np.ndarray]:
        """As WarpDrive: rows up to ``min(last_step, last logged step)``.

        ``check_last_valid_step`` compared WarpDrive's device log mask with its
        host counter; here the host counter is the only record (each update is
        one launch, in order), so there is nothing to compare.
        """
        if isinstance(names, str):  # WarpDrive iterated a str name letter by letter
            names = [names]
        if last_step is not None:
            last_step = min(int(last_step), self.last_step)
        return super().fetch_log(data_manager, names, last_step)
