"""``DataFeed``: the declaration of the named data an environment puts on the device.

A feed is a plain ``dict`` of ``{name: {"data": value, "attributes": {...}}}`` so
that it stays compatible with WarpDrive's format and can be built by hand. The
methods here only *declare*; every check that needs the device's view of the
world (env dimension, already pushed names, dtype conversion) happens in
:meth:`warp_drive.runtime.data_manager.DataManager.push_data_to_device`, which validates
a whole feed before allocating anything.

Names are checked here, early, because a bad name is a mistake in the
declaration itself and is easiest to fix where it was written.
"""

from __future__ import annotations

import difflib
import re
from typing import Any

import numpy as np

SUPPORTED_DTYPES = (np.dtype(np.float32), np.dtype(np.int32))
"""Kernels see raw 32-bit pointers; these are the only element types allowed."""

RESERVED_SUFFIXES = ("_at_reset", "_for_log")
"""Suffixes of the twins the DataManager derives; users may not push them."""

FLAG_ATTRIBUTES = ("save_copy_and_apply_at_reset", "log_data_across_episode")
_KNOWN_ATTRIBUTES = FLAG_ATTRIBUTES + ("dtype", "is_reset_pool", "reset_target")

_NAME_PATTERN = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def validate_name(name: Any, what: str = "data") -> str:
    """Return ``name`` if it can name a kernel argument, else raise.

    Names become C identifiers in kernel argument lists and ``__constant__``
    symbols, and suffixes such as ``_at_reset`` are appended to them, so they
    must be identifier-like and must not collide with the derived twins.
    """
    if not isinstance(name, str):
        raise TypeError(f"{what} name must be a str, got {type(name).__name__} {name!r}")
    if not _NAME_PATTERN.fullmatch(name):
        raise ValueError(
            f"{what} name {name!r} is not a C identifier; use letters, digits and '_' "
            "and do not start with a digit (e.g. 'agent_positions')"
        )
    for suffix in RESERVED_SUFFIXES:
        if name.endswith(suffix):
            raise ValueError(
                f"{what} name {name!r} ends with the reserved suffix {suffix!r}, which "
                "warp_drive uses for the twins it derives; rename it"
            )
    return name


def normalize_dtype(dtype: Any, name: str) -> np.dtype | None:
    """Turn a user's ``dtype`` request ("float32", np.int32, ...) into a numpy dtype.

    ``None`` means "no cast requested". Anything but float32/int32 is refused,
    since no kernel could read it.
    """
    if dtype is None:
        return None
    try:
        resolved = np.dtype(dtype)
    except TypeError as err:
        raise TypeError(
            f"dtype {dtype!r} given for {name!r} is not a dtype; use 'float32' or 'int32'"
        ) from err
    if resolved not in SUPPORTED_DTYPES:
        raise ValueError(
            f"dtype {resolved.name!r} given for {name!r} is not supported; "
            "warp_drive arrays are 'float32' or 'int32'"
        )
    return resolved


def _check_flag(value: Any, flag: str, name: str) -> bool:
    """Flags must be real booleans: a string such as "False" would read as true."""
    if not isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{flag} for {name!r} must be True or False, got {value!r}")
    return bool(value)


def _check_extra_attributes(attributes: dict, name: str) -> None:
    """Refuse a misspelt flag, which would otherwise be stored and silently ignored."""
    for key in attributes:
        if key in _KNOWN_ATTRIBUTES:
            continue
        close = difflib.get_close_matches(key, _KNOWN_ATTRIBUTES, n=1, cutoff=0.6)
        if close:
            raise TypeError(
                f"unknown attribute {key!r} for {name!r}; did you mean {close[0]!r}?"
            )


class DataFeed(dict):
    """Named data, with the flags that say how the DataManager should treat it.

    Each entry is ``{name: {"data": value, "attributes": {...}}}``; the
    attributes always hold ``save_copy_and_apply_at_reset``,
    ``log_data_across_episode`` and ``dtype`` (a numpy dtype or ``None``),
    plus any extra keyword given to :meth:`add_data`.
    """

    def add_data(
        self,
        name: str,
        data: Any,
        save_copy_and_apply_at_reset: bool = False,
        log_data_across_episode: bool = False,
        dtype: Any = None,
        **attributes: Any,
    ) -> None:
        """Declare one named value (array, list or scalar).

        ``dtype`` ("float32", "int32" or a numpy dtype) is an explicit request
        to cast; it is the only way 64-bit data reaches the device, so that no
        precision or range is lost behind the user's back.
        """
        validate_name(name)
        if name in self:
            raise ValueError(
                f"{name!r} is already in this DataFeed; each name may be added once "
                "(rename one of them)"
            )
        _check_extra_attributes(attributes, name)
        self[name] = {
            "data": data,
            "attributes": {
                "save_copy_and_apply_at_reset": _check_flag(
                    save_copy_and_apply_at_reset, "save_copy_and_apply_at_reset", name
                ),
                "log_data_across_episode": _check_flag(
                    log_data_across_episode, "log_data_across_episode", name
                ),
                "dtype": normalize_dtype(dtype, name),
                **attributes,
            },
        }

    def add_data_list(self, data_list: list) -> None:
        """Declare several values: tuples ``(name, data[, save_copy[, log]])`` or
        dicts with the keyword names of :meth:`add_data`."""
        for item in data_list:
            if isinstance(item, dict):
                self.add_data(**item)
            elif isinstance(item, (tuple, list)) and 2 <= len(item) <= 4:
                self.add_data(*item)
            else:
                raise TypeError(
                    "add_data_list takes tuples (name, data[, save_copy_and_apply_at_reset"
                    f"[, log_data_across_episode]]) or dicts of add_data keywords, got {item!r}"
                )

    def add_pool_for_reset(self, name: str, pool: Any, reset_target: str, dtype: Any = None) -> None:
        """Declare a pool of start states for ``reset_target``.

        ``pool`` has shape ``(P, *target.shape[1:])``: each of its ``P`` rows is
        one env's slice of the target, and a reset copies a random row into the
        env being reset, so episodes need not all start from one snapshot.
        """
        validate_name(reset_target, what="reset target")
        self.add_data(name, pool, dtype=dtype, is_reset_pool=True, reset_target=reset_target)
