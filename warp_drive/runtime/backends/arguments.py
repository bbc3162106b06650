"""Check launch arguments against a kernel's C signature (both executors).

Arrays must be contiguous torch tensors on the backend's device whose dtype is
the pointer's element type; scalars are converted to the parameter's C type
only when the value fits exactly. Anything else is a KernelLaunchError that
names the kernel, the parameter and both types: a wrong argument can no longer
silently corrupt device memory.
"""

from __future__ import annotations

import ctypes
import itertools
from typing import Any, Sequence

import numpy as np
import torch

from warp_drive.runtime.backends.errors import KernelLaunchError
from warp_drive.runtime.backends.signature import KernelSignature, Param

_TORCH_TO_NUMPY = {
    torch.float32: np.dtype(np.float32),
    torch.float64: np.dtype(np.float64),
    torch.float16: np.dtype(np.float16),
    torch.int32: np.dtype(np.int32),
    torch.int64: np.dtype(np.int64),
    torch.int16: np.dtype(np.int16),
    torch.int8: np.dtype(np.int8),
    torch.uint8: np.dtype(np.uint8),
    torch.bool: np.dtype(np.bool_),
}
for _name in ("uint16", "uint32", "uint64"):
    if hasattr(torch, _name):
        _TORCH_TO_NUMPY[getattr(torch, _name)] = np.dtype(_name)


def torch_dtype_as_numpy(dtype: torch.dtype) -> np.dtype | None:
    return _TORCH_TO_NUMPY.get(dtype)


def _where(signature: KernelSignature, index: int, param: Param) -> str:
    return f"kernel {signature.name}: parameter {index} '{param.describe()}'"


def check_array(signature: KernelSignature, index: int, param: Param, value: Any, device: torch.device) -> torch.Tensor:
    where = _where(signature, index, param)
    if not isinstance(value, torch.Tensor):
        hint = " (push it with a DataManager, or wrap it with torch.from_numpy)" if isinstance(value, np.ndarray) else ""
        raise KernelLaunchError(f"{where} expects a torch tensor, got {type(value).__name__}{hint}")
    if value.device.type != device.type:
        raise KernelLaunchError(f"{where} expects a tensor on {device}, got one on {value.device}")
    if not value.is_contiguous():
        raise KernelLaunchError(f"{where} got a non-contiguous tensor of shape {tuple(value.shape)}; pass .contiguous()")
    if value.numel() == 0:
        # A zero-size tensor has no storage: the kernel would receive NULL (or a
        # dangling pointer) and fault on its first access.
        raise KernelLaunchError(
            f"{where} got an empty tensor of shape {tuple(value.shape)} (zero elements, so no memory to point to); "
            "pass a tensor with at least one element (e.g. allocate the array with its env/agent dimensions)"
        )
    given = torch_dtype_as_numpy(value.dtype)
    if param.dtype is not None and given != param.dtype:
        raise KernelLaunchError(
            f"{where} expects {param.dtype.name} data, got a {str(value.dtype).replace('torch.', '')} tensor"
        )
    return value


def convert_scalar(signature: KernelSignature, index: int, param: Param, value: Any) -> np.generic:
    """``value`` as a numpy scalar of the parameter's type, refusing lossy conversions."""
    where = _where(signature, index, param)
    dtype = param.dtype
    if isinstance(value, torch.Tensor):
        if value.numel() != 1:
            raise KernelLaunchError(f"{where} is a scalar; got a tensor of shape {tuple(value.shape)}")
        value = value.item()
    if isinstance(value, np.ndarray) and value.ndim == 0:
        value = value[()]
    if isinstance(value, (np.generic,)):
        value = value.item()
    if not isinstance(value, (bool, int, float)):
        raise KernelLaunchError(f"{where} is a scalar; got {type(value).__name__}")
    if dtype.kind == "f":
        return dtype.type(value)
    if dtype.kind == "b":
        if value not in (0, 1):
            raise KernelLaunchError(f"{where} is a bool; got {value!r}")
        return dtype.type(bool(value))
    if isinstance(value, float):
        if not value.is_integer():
            raise KernelLaunchError(f"{where} is an integer; got the non-integral {value!r}")
        value = int(value)
    low, high = _integer_range(dtype)
    if not low <= int(value) <= high:
        raise KernelLaunchError(f"{where}: {value} does not fit in {dtype.name} [{low}, {high}]")
    return dtype.type(int(value))


_INTEGER_RANGES: dict[np.dtype, tuple[int, int]] = {}


def _integer_range(dtype: np.dtype) -> tuple[int, int]:
    """(min, max) of an integer dtype, cached: ``np.iinfo`` costs more than the rest of a scalar's check."""
    limits = _INTEGER_RANGES.get(dtype)
    if limits is None:
        info = np.iinfo(dtype)
        limits = _INTEGER_RANGES[dtype] = (int(info.min), int(info.max))
    return limits


def check_arguments(signature: KernelSignature, args: Sequence[Any], device: torch.device) -> list[Any]:
    """Tensors (for pointers) and numpy scalars (by value), in parameter order."""
    if len(args) != len(signature.params):
        raise KernelLaunchError(
            f"kernel {signature.name} takes {len(signature.params)} arguments, got {len(args)}; "
            f"signature: {signature.describe()}"
        )
    checked = []
    for index, (param, value) in enumerate(zip(signature.params, args)):
        if param.pointer:
            checked.append(check_array(signature, index, param, value, device))
        else:
            checked.append(convert_scalar(signature, index, param, value))
    return checked


# The C type holding a scalar parameter's value (a pointer parameter is a c_void_p).
CTYPE_OF_DTYPE = {
    np.dtype(np.float32): ctypes.c_float,
    np.dtype(np.float64): ctypes.c_double,
    np.dtype(np.int32): ctypes.c_int32,
    np.dtype(np.uint32): ctypes.c_uint32,
    np.dtype(np.int64): ctypes.c_int64,
    np.dtype(np.uint64): ctypes.c_uint64,
    np.dtype(np.int16): ctypes.c_int16,
    np.dtype(np.uint16): ctypes.c_uint16,
    np.dtype(np.int8): ctypes.c_int8,
    np.dtype(np.uint8): ctypes.c_uint8,
    np.dtype(np.bool_): ctypes.c_bool,
}


# A binding re-checks its tensors (same memory, same size as when bound) on its
# first launch and then once every VERIFY_EVERY launches: ``data_ptr()`` costs
# ~0.2 us per tensor, which on every launch would double the launch overhead of
# a many-argument kernel. EnvWrapper.step_all_envs verifies its step binding on
# every step (see there), so an env step never runs on a stale pointer.
VERIFY_EVERY = 64
_DATA_PTR, _NUMEL = torch.Tensor.data_ptr, torch.Tensor.numel


class StaleArgumentError(KernelLaunchError):
    """A tensor bound to a kernel was resized or given other memory after ``bind()``."""


class PackedArguments:
    """Checked arguments as a ``void*`` array of pointers to their values.

    The layout both executors launch with (the cpu runtime's thread functions
    and CUDA's ``kernelParams``): packed once per binding, so a launch is one
    foreign call. The tensors are kept alive as long as the packed pointers;
    each one's ``data_ptr()`` and ``numel()`` at bind time are recorded so that
    :meth:`verify` detects a tensor resized (``resize_``) or re-pointed
    (``set_``) after the bind, which would otherwise leave the kernel a stale
    pointer into freed (or too small) memory.
    """

    def __init__(self, signature: KernelSignature, checked: list):
        self.signature = signature
        self._keep_alive = checked
        self._bound = tuple((index, value, value.data_ptr(), value.numel())
                            for index, (param, value) in enumerate(zip(signature.params, checked)) if param.pointer)
        self._tensors = tuple(entry[1] for entry in self._bound)
        self._pointers = tuple(entry[2] for entry in self._bound)
        self._numels = tuple(entry[3] for entry in self._bound)
        # Launches call ``if next(packed.due): packed.verify()``: True on the first
        # launch and every VERIFY_EVERY-th after (~40 ns a launch; a method call costs ~150 ns).
        self.due = itertools.cycle((True,) + (False,) * (VERIFY_EVERY - 1))
        self._slots = [ctypes.c_void_p(value.data_ptr()) if param.pointer else CTYPE_OF_DTYPE[param.dtype](value.item())
                       for param, value in zip(signature.params, checked)]
        self._argv = (ctypes.c_void_p * max(1, len(self._slots)))(*[ctypes.addressof(s) for s in self._slots])
        # None (NULL kernelParams) for a kernel without parameters.
        self.address = ctypes.addressof(self._argv) if self._slots else None

    def set_scalar(self, index: int, value) -> None:
        param = self.signature.params[index]
        if param.pointer:
            raise KernelLaunchError(f"kernel {self.signature.name}: parameter {index} is a pointer, not a scalar")
        self._slots[index].value = convert_scalar(self.signature, index, param, value).item()

    def verify(self, labels: Sequence[Any] | None = None) -> None:
        """Raise :class:`StaleArgumentError` if a bound tensor no longer has the memory
        and size it had at bind time. ``labels`` (one per parameter, e.g. the
        DataManager array names of an env's step arguments) name the arrays."""
        tensors = self._tensors
        if tuple(map(_DATA_PTR, tensors)) == self._pointers and tuple(map(_NUMEL, tensors)) == self._numels:
            return
        for index, value, pointer, numel in self._bound:
            now_pointer, now_numel = value.data_ptr(), value.numel()
            if now_pointer == pointer and now_numel == numel:
                continue
            param = self.signature.params[index]
            label = labels[index] if labels is not None and index < len(labels) else None
            what = f"array {label!r} " if isinstance(label, str) else ""
            change = (f"was resized from {numel} to {now_numel} elements" if now_numel != numel
                      else "was moved to other memory (resize_ or set_ reallocated it)")
            raise StaleArgumentError(
                f"{_where(self.signature, index, param)}: the {what}tensor bound to it {change} after bind(), so the "
                "kernel would use a stale pointer. Arrays are allocated once and updated in place: write into them "
                "with copy_() / slicing instead of resizing or replacing them, or bind the kernel again"
            )
