"""The environment variables warp_drive reads, each parsed and checked here, in one place.

Every variable is read through :func:`read`, which returns its parsed value
(``None`` when unset or empty) or raises :class:`EnvVarError` naming the
variable, the value and what it takes: a value that did not parse used to be
silently ignored (``WARP_DRIVE_CPU_THREADS=abc`` gave one worker per core,
``WARP_DRIVE_CPU_STACK_KB=x`` a 16 KiB stack, ``WARP_DRIVE_TORCH_UPDATE_THREADS=-3``
nothing) or to end a run in a traceback. ``warp-drive train`` and ``evaluate``
call :func:`check_all` before anything else, so a bad value costs a fraction
of a second and one line. The two the cpu runtime reads in C
(``WARP_DRIVE_CPU_THREADS``, ``WARP_DRIVE_CPU_STACK_KB``) are checked here
before the runtime is first loaded (``backends/cpu.py``).

Torch-free and executor-free, like ``backend_names``: the CLI imports it.
"""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Any, Callable

# The values of WARP_DRIVE_CPU_MODE and WARP_DRIVE_BACKEND: backends/cpu.py's MODES and backend_names'
# BACKEND_NAMES, written out (cpu.py brings torch; backend_names reads its variable here). A test holds them equal.
CPU_MODES = ("release", "debug", "asan", "coverage", "race")
BACKENDS = ("auto", "cpu", "cpu-gpu", "pycuda")
SHUFFLE_OFF = "off"  # WARP_DRIVE_CPU_SHUFFLE turned off (None would read as unset)
_TRUE, _FALSE = ("1", "true", "yes", "on"), ("0", "false", "no", "off")
MAX_STACK_KB = 1 << 20  # 1 GiB per fiber: far beyond any kernel's need, and kb * 1024 cannot overflow in C


class EnvVarError(ValueError):
    """An environment variable warp_drive reads holds a value it cannot use (the message names both)."""


def _int(minimum: int, maximum: int | None = None) -> Callable[[str], int]:
    def parse(text: str) -> int:
        try:
            value = int(text, 10)
        except ValueError:
            raise ValueError("not a whole number") from None
        if value < minimum or (maximum is not None and value > maximum):
            raise ValueError("out of range")
        return value
    return parse


def _choice(choices: tuple[str, ...]) -> Callable[[str], str]:
    def parse(text: str) -> str:
        if text.lower() not in choices:
            raise ValueError("not one of the choices")
        return text.lower()
    return parse


def _flag(text: str) -> bool:
    if text.lower() in _TRUE:
        return True
    if text.lower() in _FALSE:
        return False
    raise ValueError("not a yes/no value")


def _seconds(text: str) -> float:
    value = float(text)
    if not math.isfinite(value) or value <= 0:
        raise ValueError("not a positive number")
    return value


def _shuffle(text: str) -> int | str:
    if text.lower() in ("off", "no", "none", "false"):
        return SHUFFLE_OFF
    return int(text, 0)


def _directory(text: str) -> str:
    """A directory, or a path that can become one: no file where it or one of its parents should be."""
    path = Path(text).expanduser()
    for part in (path, *path.parents):
        if part.exists() or part.is_symlink():
            if not part.is_dir():
                raise ValueError(f"{part} is a file, not a directory" if part == path
                                 else f"{part} is a file, so no directory can be made under it")
            break
    return text


# name -> (parser, what it takes: the fix the message gives). Parsers raise ValueError on a bad value.
VARIABLES: dict[str, tuple[Callable[[str], Any], str]] = {
    "WARP_DRIVE_BACKEND": (_choice(BACKENDS), f"one of {', '.join(BACKENDS)}"),
    "WARP_DRIVE_CACHE": (_directory, "a directory of your own for the build cache (unset: ~/.cache/warp_drive)"),
    "WARP_DRIVE_CPU_MODE": (_choice(CPU_MODES), f"one of {', '.join(CPU_MODES)}"),
    "WARP_DRIVE_CPU_SHUFFLE": (_shuffle, "an integer seed, or off"),
    "WARP_DRIVE_CPU_THREADS": (_int(1), "a whole number of worker threads >= 1 (unset: one per core)"),
    "WARP_DRIVE_CPU_STACK_KB": (_int(16, MAX_STACK_KB),
                                f"a whole number of KiB per CUDA thread's stack, 16 to {MAX_STACK_KB} (unset: 128)"),
    "WARP_DRIVE_TORCH_THREADS": (_int(1), "a whole number of torch threads >= 1 (unset: 1 on the cpu executor)"),
    "WARP_DRIVE_TORCH_UPDATE_THREADS": (_int(0), "a whole number of torch threads for the update, >= 0 "
                                                 "(0 or unset: off)"),
    "WARP_DRIVE_NVCC_DEBUG": (_flag, "1/true/yes/on or 0/false/no/off"),
    "WARP_DRIVE_DIST_TIMEOUT": (_seconds, "a number of seconds > 0 (unset: 300)"),
}


def read(name: str) -> Any:
    """The parsed value of ``$name`` (one of :data:`VARIABLES`), or None when it is unset or empty.

    Raises :class:`EnvVarError` naming the variable, its value and what it takes."""
    parse, takes = VARIABLES[name]
    text = os.environ.get(name, "").strip()
    if not text:
        return None
    try:
        return parse(text)
    except (ValueError, OverflowError) as exc:
        detail = str(exc) if "is a file" in str(exc) else ""
        raise EnvVarError(f"environment variable {name}={text!r}: {detail + '; ' if detail else ''}set it to "
                          f"{takes}, or unset it") from None


def check(*names: str) -> None:
    """Read each of ``names``, raising :class:`EnvVarError` on the first bad value."""
    for name in names:
        read(name)


def check_all() -> None:
    """Read every variable of :data:`VARIABLES` (``warp-drive train`` and ``evaluate``, before anything else)."""
    check(*VARIABLES)
