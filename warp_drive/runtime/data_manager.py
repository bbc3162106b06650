"""``DataManager``: the named arrays and scalars that kernels and torch share.

Every array is a torch tensor on ``backend.device``, allocated once by
:meth:`DataManager.push_data_to_device` and updated in place for the rest of
the run: kernels receive raw pointers, and services cache tables of them, so a
tensor is never replaced (``reset_device`` copies into it). Scalars ("meta
info") stay on the host and are passed to kernels by value.

What this does better than WarpDrive's ``CUDADataManager`` (see §9 of the
reference), and why:

* no silent casts: float64/int64 data is refused unless ``dtype`` asks for a
  cast, and that cast refuses out-of-range or non-integral values, because
  kernels read raw 32-bit memory and a quiet conversion hides bugs;
* no silent copies: a non C-contiguous array is refused instead of reordered,
  so what the user indexes is what the kernel indexes;
* a feed is validated as a whole before anything is allocated, so a failed
  push leaves the manager exactly as it was;
* every array is a torch tensor, whatever ``torch_accessible`` says, so
  ``data_on_device_via_torch`` works for all of them (the flag is recorded for
  compatibility only);
* ``reset_device`` restores in place, skips scalars and works with every
  backend; lookups that miss suggest the names that were meant.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from typing import Any, Iterable

import numpy as np
import torch

from warp_drive.runtime.backends import get_backend
from warp_drive.runtime.data_feed import FLAG_ATTRIBUTES, normalize_dtype, validate_name
# DONE and TIMESTEP are re-exported: the reserved names' home for the layers above.
from warp_drive.runtime.data_values import _INT32_INFO, DONE, FLOAT32, INT32, TIMESTEP, convert_value  # noqa: F401

AT_RESET_SUFFIX = "_at_reset"
FOR_LOG_SUFFIX = "_for_log"
_TORCH_DTYPE = {FLOAT32: torch.float32, INT32: torch.int32}
_NUMPY_DTYPE = {torch_dtype: np_dtype for np_dtype, torch_dtype in _TORCH_DTYPE.items()}


class DataNotFoundError(KeyError):
    """A name that is not (or not of that kind) in the manager.

    A ``KeyError`` whose message prints as written rather than quoted.
    """

    def __str__(self) -> str:
        return str(self.args[0])


def _is_scalar_like(value: Any) -> bool:
    if isinstance(value, (bool, int, float, np.generic)):
        return True
    return isinstance(value, (np.ndarray, torch.Tensor)) and value.ndim == 0


def _positive_int(value: Any, what: str) -> int:
    """Sizes are passed to kernels as int32, so they must be positive and fit."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{what} must be an int, got {value!r}")
    if not 1 <= value <= _INT32_INFO.max:
        raise ValueError(f"{what} must be between 1 and {_INT32_INFO.max}, got {value}")
    return int(value)


@dataclass
class _Entry:
    """One validated feed entry, ready to be allocated."""

    name: str
    value: np.generic | np.ndarray
    save_copy: bool = False
    log: bool = False
    pool_target: str | None = None

    @property
    def is_meta(self) -> bool:
        return not isinstance(self.value, np.ndarray)


# ---------------------------------------------------------------------------
# The manager
# ---------------------------------------------------------------------------


class DataManager:
    """Named device arrays (torch tensors) and host scalars for one set of envs.

    ``backend`` is a backend name ("auto", "cpu", "pycuda") or any object with
    ``.device`` (a ``torch.device``) and ``.name``, such as a ``Backend``.
    """

    def __init__(self, num_envs: int, num_agents: int, episode_length: int, backend: Any = "auto"):
        self._num_envs = _positive_int(num_envs, "num_envs")
        self._num_agents = _positive_int(num_agents, "num_agents")
        self._episode_length = _positive_int(episode_length, "episode_length")
        self._backend = _resolve_backend(backend)
        self._meta: dict[str, np.generic] = {}
        self._arrays: dict[str, torch.Tensor] = {}
        # Values to restore at reset_device; None means "zeros" (saves host memory
        # for the many placeholders that start at zero).
        self._initial: dict[str, torch.Tensor | None] = {}
        self._shared_constants: dict[str, np.generic | np.ndarray] = {}
        self._torch_accessible: list[str] = []
        self._reset_data: list[str] = []
        self._log_data: list[str] = []
        # ``<name>_for_log`` buffers not allocated yet: (shape, dtype). One is allocated when first used
        # (LogController.reset_log, a read): training never logs, and episode_length=10**9 made CartPole's
        # 16 GB whether anything logged or not.
        self._pending_logs: dict[str, tuple[tuple[int, ...], torch.dtype]] = {}
        self._reset_target_to_pool: dict[str, str] = {}
        self._version = 0
        self.add_meta_info(
            {
                "n_envs": self._num_envs,
                "n_agents": self._num_agents,
                "episode_length": self._episode_length,
            }
        )
        zeros = np.zeros(self._num_envs, dtype=np.int32)
        self.push_data_to_device(
            {DONE: {"data": zeros}, TIMESTEP: {"data": zeros}}, torch_accessible=True
        )

    # -- pushing ------------------------------------------------------------

    def push_data_to_device(self, data_feed: dict, torch_accessible: bool = False) -> None:
        """Put every entry of ``data_feed`` (a :class:`DataFeed`) on the device.

        Scalars become meta info; arrays are allocated once, with their
        ``_at_reset`` twins and reset pools (``_for_log`` buffers on their first
        use). The whole feed is validated before anything is allocated, so on
        error nothing changes.
        ``torch_accessible`` is recorded for WarpDrive compatibility; every array
        here is a torch tensor anyway.
        """
        entries = self._validate_feed(data_feed)
        new_arrays = self._allocate(entries)
        self._commit(entries, new_arrays, torch_accessible)

    def add_meta_info(self, meta: dict) -> None:
        """Register host scalars (passed to kernels by value); arrays are refused."""
        if not isinstance(meta, dict):
            raise TypeError(f"add_meta_info takes a dict of name -> scalar, got {type(meta).__name__}")
        converted = {}
        for name, value in meta.items():
            self._require_new(validate_name(name, "meta info"))
            if not _is_scalar_like(value):
                raise TypeError(
                    f"meta info {name!r} must be a scalar, got {type(value).__name__}; "
                    "push arrays with push_data_to_device"
                )
            converted[name] = convert_value(name, value)
        self._meta.update(converted)
        self._version += 1

    def add_shared_constants(self, constants: dict) -> None:
        """Keep host values for upload into ``__constant__`` symbols of a module.

        They have no env dimension and live beside the arrays in their own
        namespace (a symbol, not a kernel argument); the same dtype rules apply.
        """
        if not isinstance(constants, dict):
            raise TypeError(
                f"add_shared_constants takes a dict of name -> value, got {type(constants).__name__}"
            )
        converted = {}
        for name, value in constants.items():
            validate_name(name, "shared constant")
            if name in self._shared_constants:
                raise ValueError(f"shared constant {name!r} is already registered; use a new name")
            value = convert_value(name, value)
            converted[name] = value.copy() if isinstance(value, np.ndarray) else value
        self._shared_constants.update(converted)
        self._version += 1

    # -- reading ------------------------------------------------------------

    def pull_data_from_device(self, name: str) -> np.ndarray | np.generic:
        """A host copy of array ``name`` (or the value of scalar ``name``)."""
        if name in self._meta:
            return self._meta[name]
        tensor = self._array(name)
        self._synchronize()
        return tensor.detach().to("cpu", copy=True).numpy()

    def data_on_device_via_torch(self, name: str) -> torch.Tensor:
        """The live tensor itself (the same object every call, never a copy)."""
        return self._array(name)

    def device_data(self, name: str) -> torch.Tensor | np.generic:
        """The kernel argument for ``name``: the tensor, or the scalar by value."""
        if name in self._meta:
            return self._meta[name]
        return self._array(name)

    def meta_info(self, name: str) -> np.generic:
        if name not in self._meta:
            raise self._not_found(name, "meta info", self._meta)
        return self._meta[name]

    def shared_constant(self, name: str) -> np.generic | np.ndarray:
        if name not in self._shared_constants:
            raise self._not_found(name, "shared constant", self._shared_constants)
        return self._shared_constants[name]

    def get_shape(self, name: str) -> tuple[int, ...]:
        """Shape of array ``name``; ``()`` for a scalar."""
        if name in self._meta:
            return ()
        if name in self._pending_logs:
            return self._pending_logs[name][0]
        return tuple(self._array(name).shape)

    def get_dtype(self, name: str) -> str:
        """numpy dtype name ("float32" or "int32") of ``name``."""
        if name in self._meta:
            return self._meta[name].dtype.name
        return _NUMPY_DTYPE[self._array(name).dtype].name

    def is_data_on_device(self, name: str) -> bool:
        return name in self._arrays or name in self._pending_logs

    def is_data_on_device_via_torch(self, name: str) -> bool:
        """Same as :meth:`is_data_on_device`: every array is a torch tensor."""
        return self.is_data_on_device(name)

    def has_meta(self, name: str) -> bool:
        return name in self._meta

    # -- resetting ----------------------------------------------------------

    def reset_device(self, name: str | None = None) -> None:
        """Restore array ``name`` (all arrays when None) to its values at push.

        Copies in place so that tensors, pointers and cached launches stay
        valid. Scalars never change, so resetting one is a no-op.
        """
        if name is None:
            names: Iterable[str] = list(self._arrays)
        elif name in self._meta:
            names = ()
        else:
            self._array(name)
            names = (name,)
        for array_name in names:
            self._restore(array_name)

    # -- properties ---------------------------------------------------------

    @property
    def num_envs(self) -> int:
        return self._num_envs

    @property
    def num_agents(self) -> int:
        return self._num_agents

    @property
    def episode_length(self) -> int:
        return self._episode_length

    @property
    def backend(self) -> Any:
        return self._backend

    @property
    def device(self) -> torch.device:
        return self._backend.device

    @property
    def version(self) -> int:
        """Changes whenever a name is added; services key pointer caches on it."""
        return self._version

    @property
    def array_names(self) -> list[str]:
        """Arrays allocated so far (a log buffer once first used: a checkpoint does not save unused ones)."""
        return list(self._arrays)

    @property
    def scalar_data_list(self) -> list[str]:
        return list(self._meta)

    @property
    def reset_data_list(self) -> list[str]:
        """Arrays that have an ``<name>_at_reset`` twin."""
        return list(self._reset_data)

    @property
    def log_data_list(self) -> list[str]:
        """Arrays that have a ``<name>_for_log`` buffer."""
        return list(self._log_data)

    @property
    def reset_target_to_pool(self) -> dict[str, str]:
        return dict(self._reset_target_to_pool)

    @property
    def shared_constant_names(self) -> list[str]:
        return list(self._shared_constants)

    @property
    def torch_accessible_list(self) -> list[str]:
        """Arrays pushed with ``torch_accessible=True`` (informational only)."""
        return list(self._torch_accessible)

    # -- validation (no state changes) --------------------------------------

    def _validate_feed(self, data_feed: dict) -> list[_Entry]:
        if not isinstance(data_feed, dict):
            raise TypeError(
                f"push_data_to_device takes a DataFeed, got {type(data_feed).__name__}; "
                "build one with DataFeed().add_data(name, data, ...)"
            )
        entries = [self._prepare_entry(name, spec) for name, spec in data_feed.items()]
        feed_entries = {entry.name: entry for entry in entries}
        for entry in entries:
            if entry.pool_target is not None:
                self._check_pool(entry, feed_entries)
        self._check_one_pool_per_target(entries)
        return entries

    def _prepare_entry(self, name: str, spec: Any) -> _Entry:
        self._require_new(validate_name(name))
        if not isinstance(spec, dict) or "data" not in spec:
            raise TypeError(
                f"feed entry {name!r} must be {{'data': ..., 'attributes': {{...}}}}; "
                "build the feed with DataFeed.add_data"
            )
        attributes = spec.get("attributes") or {}
        value = convert_value(name, spec["data"], normalize_dtype(attributes.get("dtype"), name))
        entry = _Entry(
            name,
            value,
            save_copy=bool(attributes.get("save_copy_and_apply_at_reset", False)),
            log=bool(attributes.get("log_data_across_episode", False)),
            pool_target=attributes.get("reset_target") if attributes.get("is_reset_pool") else None,
        )
        if attributes.get("is_reset_pool") and entry.pool_target is None:
            raise ValueError(
                f"reset pool {name!r} names no reset_target; declare it with "
                "DataFeed.add_pool_for_reset(name, pool, reset_target)"
            )
        self._check_flags(entry, attributes)
        return entry

    def _check_flags(self, entry: _Entry, attributes: dict) -> None:
        """Reset twins, logs and pools only make sense for per-env arrays."""
        flags = [flag for flag in FLAG_ATTRIBUTES if attributes.get(flag)]
        if entry.is_meta:
            if flags or entry.pool_target is not None:
                raise ValueError(
                    f"{entry.name!r} is a scalar (passed to kernels by value, never changed), "
                    "so it cannot be restored at reset, logged or used as a reset pool. Fix: "
                    f"drop those flags, or give an array of shape ({self._num_envs},)"
                )
            return
        if entry.pool_target is not None and flags:
            raise ValueError(
                f"reset pool {entry.name!r} cannot itself be saved for reset or logged; "
                f"drop {', '.join(flags)}"
            )
        if entry.save_copy:
            self._require_env_dim(entry.name, entry.value.shape, "save_copy_and_apply_at_reset")
        if entry.log:
            self._require_log_dims(entry.name, entry.value.shape)

    def _require_env_dim(self, name: str, shape: tuple, why: str) -> None:
        if len(shape) == 0 or shape[0] != self._num_envs:
            raise ValueError(
                f"{name!r} has shape {tuple(shape)}, but {why} needs the env dimension "
                f"first: expected ({self._num_envs}, ...). Fix: stack one copy per env, "
                f"e.g. np.stack([value] * {self._num_envs})"
            )

    def _require_log_dims(self, name: str, shape: tuple) -> None:
        if len(shape) < 2 or shape[:2] != (self._num_envs, self._num_agents):
            raise ValueError(
                f"{name!r} has shape {tuple(shape)}, but log_data_across_episode needs "
                f"(num_envs, num_agents, ...) = ({self._num_envs}, {self._num_agents}, ...)"
            )

    def _check_pool(self, pool: _Entry, feed_entries: dict[str, _Entry]) -> None:
        """The pool's rows must be shaped and typed like one env's slice of its target."""
        target = pool.pool_target
        shape, dtype = self._pool_target_layout(pool.name, target, feed_entries)
        self._require_env_dim(target, shape, f"being the target of reset pool {pool.name!r}")
        expected = ("P",) + tuple(shape[1:])
        given = pool.value.shape
        if len(given) != len(shape) or given[1:] != tuple(shape[1:]) or given[0] < 1:
            raise ValueError(
                f"reset pool {pool.name!r} has shape {given}, but its target {target!r} "
                f"has shape {tuple(shape)}, so the pool must be {expected} with P >= 1 "
                "(one row per start state, each shaped like one env's slice)"
            )
        if pool.value.dtype != dtype:
            raise TypeError(
                f"reset pool {pool.name!r} is {pool.value.dtype.name} but its target "
                f"{target!r} is {dtype.name}; pass dtype='{dtype.name}' to add_pool_for_reset"
            )

    def _pool_target_layout(
        self, pool_name: str, target: str, feed_entries: dict[str, _Entry]
    ) -> tuple[tuple, np.dtype]:
        """Shape and dtype of a pool's target, found in the feed or on the device."""
        entry = feed_entries.get(target)
        if target in self._meta or target in self._reset_target_to_pool.values() or (
            entry is not None and (entry.is_meta or entry.pool_target is not None)
        ):
            raise ValueError(
                f"reset pool {pool_name!r} targets {target!r}, which is a scalar or another "
                "pool, not a state array with the env dimension first"
            )
        if entry is not None:
            return entry.value.shape, entry.value.dtype
        if target in self._arrays:
            tensor = self._arrays[target]
            return tuple(tensor.shape), _NUMPY_DTYPE[tensor.dtype]
        known = [*feed_entries, *self._arrays]
        close = difflib.get_close_matches(target, known, n=3)
        hint = f" Did you mean {', '.join(map(repr, close))}?" if close else ""
        raise ValueError(
            f"reset pool {pool_name!r} targets {target!r}, which is not an array in this "
            f"feed or on the device. Fix: add {target!r} to the same feed or push it first.{hint}"
        )

    def _check_one_pool_per_target(self, entries: list[_Entry]) -> None:
        """A reset draws from one pool; two pools for one target would be ambiguous."""
        owner = dict(self._reset_target_to_pool)
        for entry in entries:
            target = entry.pool_target
            if target is None:
                continue
            if target in owner:
                raise ValueError(
                    f"{target!r} already has the reset pool {owner[target]!r}; "
                    f"{entry.name!r} cannot be a second one"
                )
            owner[target] = entry.name

    def _require_new(self, name: str) -> None:
        if self.is_data_on_device(name) or name in self._meta:
            raise ValueError(
                f"{name!r} is already on the device; each name is pushed once because "
                f"arrays are updated in place, never replaced. Fix: write into "
                f"data_on_device_via_torch({name!r}) or choose another name"
            )

    # -- allocation and registration ----------------------------------------

    def _allocate(self, entries: list[_Entry]) -> dict[str, tuple[torch.Tensor, torch.Tensor | None]]:
        """Allocate every tensor of a validated feed (nothing is registered yet)."""
        new_arrays = {}
        for entry in entries:
            if entry.is_meta:
                continue
            tensor, initial = self._upload(entry.value)
            new_arrays[entry.name] = (tensor, initial)
            if entry.save_copy:
                new_arrays[entry.name + AT_RESET_SUFFIX] = (self._upload(entry.value)[0], initial)
        return new_arrays

    def _upload(self, value: np.ndarray) -> tuple[torch.Tensor, torch.Tensor | None]:
        """A new device tensor holding ``value`` and a private host snapshot of it.

        The snapshot is copied so that later edits of the user's array do not
        change what ``reset_device`` restores; an all-zero value keeps none.
        """
        host = torch.from_numpy(np.array(value, copy=True))
        tensor = torch.empty(host.shape, dtype=host.dtype, device=self.device)
        tensor.copy_(host)
        return tensor, (host if bool(host.any()) else None)

    def _commit(self, entries: list[_Entry], new_arrays: dict, torch_accessible: bool) -> None:
        for name, (tensor, initial) in new_arrays.items():
            self._arrays[name] = tensor
            self._initial[name] = initial
        for entry in entries:
            if entry.is_meta:
                self._meta[entry.name] = entry.value
                continue
            if torch_accessible:
                self._torch_accessible.append(entry.name)
            if entry.save_copy:
                self._reset_data.append(entry.name)
            if entry.log:  # its buffer comes on first use (see _pending_logs)
                self._log_data.append(entry.name)
                self._pending_logs[entry.name + FOR_LOG_SUFFIX] = (
                    (self._episode_length + 1, *entry.value.shape[1:]), _TORCH_DTYPE[entry.value.dtype])
            if entry.pool_target is not None:
                self._reset_target_to_pool[entry.pool_target] = entry.name
        self._version += 1

    def _restore(self, name: str) -> None:
        initial = self._initial[name]
        if initial is None:
            self._arrays[name].zero_()
        else:
            self._arrays[name].copy_(initial)

    # -- lookups ------------------------------------------------------------

    def _array(self, name: str) -> torch.Tensor:
        if name in self._arrays:
            return self._arrays[name]
        if name in self._pending_logs:  # a log buffer's first use: allocated now, zeros, as at push before
            shape, dtype = self._pending_logs.pop(name)
            self._arrays[name] = torch.zeros(shape, dtype=dtype, device=self.device)
            self._initial[name] = None
            return self._arrays[name]
        if name in self._meta:
            raise DataNotFoundError(
                f"{name!r} is a meta scalar (passed to kernels by value), not a device "
                f"array; read it with meta_info({name!r})"
            )
        raise self._not_found(name, "array", self._arrays)

    def _not_found(self, name: Any, kind: str, registry: dict) -> DataNotFoundError:
        """A KeyError that suggests the names that were probably meant."""
        candidates = [*self._arrays, *self._pending_logs, *self._meta, *self._shared_constants]
        close = difflib.get_close_matches(str(name), candidates, n=3)
        message = f"no {kind} named {name!r}"
        if name in self._arrays or name in self._meta:
            message += f" ({name!r} exists, but as another kind of data)"
        elif close:
            message += f"; did you mean {', '.join(map(repr, close))}?"
        else:
            message += f"; known {kind} names: {', '.join(map(repr, registry)) or 'none'}"
        return DataNotFoundError(message)

    def _synchronize(self) -> None:
        """Wait for launched kernels before the host reads their results."""
        synchronize = getattr(self._backend, "synchronize", None)
        if synchronize is not None:
            synchronize()


def _resolve_backend(backend: Any) -> Any:
    """A backend name goes through ``get_backend``; an object with ``.device``
    (a ``Backend`` or a stand-in) is used as it is."""
    if hasattr(backend, "device"):
        return backend

    return get_backend(backend)
