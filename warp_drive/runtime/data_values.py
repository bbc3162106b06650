"""User values as the float32 / int32 data kernels read: one set of rules for every entry point.

:func:`convert_value` takes a number, a list, a numpy array or a torch tensor
and returns a float32/int32 numpy scalar or C-contiguous array, or raises an
error naming the value and the fix (64-bit data needs an explicit ``dtype``;
nothing is truncated or wrapped). It needs no torch: a tensor can only be given
once torch is imported, so it is recognised through ``sys.modules``. That keeps
modules that convert values on the host (``Environment``'s single-env API)
importable without torch, as the CLI's commands that do not train need.
"""

from __future__ import annotations

import sys
from typing import Any

import numpy as np

from warp_drive.runtime.data_feed import SUPPORTED_DTYPES

DONE = "_done_"
TIMESTEP = "_timestep_"
# The name of the device array holding the pool of start states of array X: X + POOL_SUFFIX.
POOL_SUFFIX = "_reset_pool"
# The reserved scalars a reset kernel reads (warp_drive/services/reset_kernel.py): the run's reset seed and the reset call.
RESET_SEED = "reset_seed"
RESET_COUNT = "reset_count"
# How many host-drawn start states a pool holds (Environment.get_reset_pools): EnvWrapper's reset_pool_size and
# the run config's env.reset_pool_size. 0: no pools (envs that honour it start from their twins).
DEFAULT_RESET_POOL_SIZE = 1000

FLOAT32 = np.dtype(np.float32)
INT32 = np.dtype(np.int32)
_INT32_INFO = np.iinfo(np.int32)
_FLOAT32_MAX = float(np.finfo(np.float32).max)


def _is_tensor(value: Any) -> bool:
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(value, torch.Tensor)


# ---------------------------------------------------------------------------
# Conversion of user values to float32 / int32 (shared by every entry point)
# ---------------------------------------------------------------------------


def _dtype_error(name: str, dtype: np.dtype, scalar: bool) -> TypeError:
    """The error for data of an unsupported dtype, with the two ways to fix it."""
    target = "float32" if dtype.kind == "f" else "int32"
    cast = f"np.{target}(value)" if scalar else f".astype(np.{target})"
    return TypeError(
        f"{name!r} has dtype {dtype.name}, but warp_drive data must be float32 or int32 "
        f"(kernels read raw 32-bit memory). Fix: pass dtype='{target}' to "
        f"DataFeed.add_data to cast explicitly, or convert it with {cast}"
    )


def _require_integral(name: str, array: np.ndarray) -> None:
    """Refuse to truncate floats into ints: 2.7 -> 2 would be a silent bug."""
    bad = ~np.isfinite(array) | (array != np.trunc(array))
    if bad.any():
        example = array[bad].flat[0]
        raise ValueError(
            f"{name!r} holds non-integral or non-finite values (e.g. {example}); casting "
            "to int32 would truncate them. Fix: round explicitly (np.rint) before the "
            "cast, or keep the data float32"
        )


def _require_int32_range(name: str, array: np.ndarray) -> None:
    """Refuse values that would wrap around in int32."""
    low, high = array.min(), array.max()
    if low < _INT32_INFO.min or high > _INT32_INFO.max:
        raise ValueError(
            f"{name!r} has values in [{low}, {high}], outside the int32 range "
            f"[{_INT32_INFO.min}, {_INT32_INFO.max}]; they cannot be cast to int32. "
            "Fix: rescale the values, or use dtype='float32'"
        )


def _require_float32_range(name: str, array: np.ndarray) -> None:
    """Refuse finite values that would become inf in float32."""
    finite = np.abs(array[np.isfinite(array)])
    if finite.size and finite.max() > _FLOAT32_MAX:
        raise ValueError(
            f"{name!r} has values of magnitude up to {finite.max()}, beyond float32's "
            f"maximum {_FLOAT32_MAX:.3e}; casting would turn them into inf. Fix: rescale them"
        )


def _cast_checked(name: str, array: np.ndarray, target: np.dtype) -> np.ndarray:
    """Cast ``array`` to ``target`` only if no value changes beyond float rounding."""
    if array.dtype == target:
        return array
    if array.dtype.kind not in "biuf":
        raise TypeError(
            f"{name!r} has dtype {array.dtype.name}, which cannot be cast to "
            f"{target.name}; give numeric data"
        )
    if array.size and array.dtype.kind != "b":
        if target == INT32:
            if array.dtype.kind == "f":
                _require_integral(name, array)
            _require_int32_range(name, array)
        elif array.dtype.kind == "f":
            _require_float32_range(name, array)
    return array.astype(target)


def _to_scalar(name: str, value: Any, dtype: np.dtype | None) -> np.generic:
    """Python or numpy scalar -> np.int32 / np.float32.

    Python values are converted implicitly (int -> int32 range-checked,
    float -> float32, bool -> int32 0/1); numpy 64-bit scalars need ``dtype``,
    like 64-bit arrays, so that both follow one rule.
    """
    if isinstance(value, (bool, np.bool_)):
        value = int(value)
    if isinstance(value, np.generic):
        if dtype is None and value.dtype not in SUPPORTED_DTYPES:
            raise _dtype_error(name, value.dtype, scalar=True)
        return _cast_checked(name, np.asarray(value), dtype or value.dtype)[()]
    if isinstance(value, int) and dtype != FLOAT32:
        _require_int32_range(name, np.array([value], dtype=object))
        return np.int32(value)
    return _cast_checked(name, np.asarray(float(value)), dtype or FLOAT32)[()]


def _list_to_array(name: str, value: list | tuple, dtype: np.dtype | None) -> np.ndarray:
    """Python lists have no dtype of their own: ints become int32, floats float32."""
    try:
        array = np.array(value)
    except ValueError as err:
        raise ValueError(
            f"list {name!r} does not form a rectangular array ({err}); give equal-length rows"
        ) from err
    if array.dtype.kind not in "biuf":
        raise TypeError(
            f"list {name!r} does not convert to a numeric array (numpy made it "
            f"{array.dtype.name}); give ints or floats that fit in 64 bits"
        )
    return _cast_checked(name, array, dtype or (FLOAT32 if array.dtype.kind == "f" else INT32))


def _checked_array(name: str, array: np.ndarray, dtype: np.dtype | None) -> np.ndarray:
    """Accept a C-contiguous float32/int32 array, or cast it when ``dtype`` asks."""
    if not array.flags.c_contiguous:
        raise ValueError(
            f"array {name!r} is not C-contiguous (e.g. a transpose or a strided slice); "
            "kernels index it as row-major memory. Fix: pass np.ascontiguousarray(...)"
        )
    if dtype is None:
        if array.dtype not in SUPPORTED_DTYPES:
            raise _dtype_error(name, array.dtype, scalar=False)
        return array
    return _cast_checked(name, array, dtype)


def _tensor_to_numpy(name: str, tensor: Any) -> np.ndarray:
    """Torch input goes through numpy so that it follows the same rules."""
    try:
        return tensor.detach().cpu().numpy()
    except TypeError as err:
        raise TypeError(
            f"tensor {name!r} has dtype {tensor.dtype}, which numpy cannot hold; "
            "cast it with .float() or .int()"
        ) from err


def convert_value(name: str, value: Any, dtype: np.dtype | None = None) -> np.generic | np.ndarray:
    """``value`` as a float32/int32 numpy scalar or C-contiguous array, or an error.

    ``dtype`` is an explicit request to cast (see :func:`_cast_checked`).
    """
    if _is_tensor(value):
        value = _tensor_to_numpy(name, value)
    if isinstance(value, np.ndarray) and value.ndim == 0:
        value = value[()]
    if isinstance(value, (bool, int, float, np.generic)):
        return _to_scalar(name, value, dtype)
    if isinstance(value, (list, tuple)):
        return _list_to_array(name, value, dtype)
    if isinstance(value, np.ndarray):
        return _checked_array(name, value, dtype)
    raise TypeError(
        f"{name!r} is a {type(value).__name__}; give a number, a list or a numpy array "
        "(or torch tensor) of float32/int32"
    )
