"""Check launch arguments against a kernel's C signature (both executors).

Arrays must be contiguous torch tensors on the backend's device whose dtype is
the pointer's element type; scalars are converted to the parameter's C type
only when the value fits exactly. Anything else is a KernelLaunchError that
names the kernel, the parameter and both types: a wrong argument can no longer
silently corrupt device memory.
"""

from __future__ import annotations

import ctypes
from typing import Any, Sequence

import numpy as np
import torch

from warp_drive.backends.base import KernelLaunchError
from warp_drive.backends.signature import KernelSignature, Param

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


class PackedArguments:
    """Checked arguments as a ``void*`` array of pointers to their values.

    The layout both executors launch with (the cpu runtime's thread functions
    and CUDA's ``kernelParams``): packed once per binding, so a launch is one
    foreign call. The tensors are kept alive as long as the packed pointers.
    """

    def __init__(self, signature: KernelSignature, checked: list):
        self.signature = signature
        self._keep_alive = checked
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
