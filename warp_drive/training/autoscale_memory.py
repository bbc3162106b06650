"""Memory sizes for auto-scaling: reading a budget such as ``"2GiB"``, printing bytes, the host's free memory.

Kept apart from the search and the probes because every part of auto-scaling
(the budget given on the command line, the probes' log lines, the summary, the
default host budget) needs these and nothing else from one another.
"""

from __future__ import annotations

import re

import psutil

from warp_drive.training.config import ConfigError

_UNITS = {"": 1, "b": 1, "k": 2**10, "kib": 2**10, "kb": 10**3, "m": 2**20, "mib": 2**20, "mb": 10**6,
          "g": 2**30, "gib": 2**30, "gb": 10**9, "t": 2**40, "tib": 2**40, "tb": 10**12}


def parse_memory_size(text: str | int) -> int:
    """Bytes in ``"512MiB"``, ``"2GiB"``, ``"1.5GB"``, ``"2G"`` (binary) or ``"1000000"``; an int passes through."""
    if isinstance(text, int) and not isinstance(text, bool):
        value = text
    else:
        match = re.fullmatch(r"\s*([0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)\s*([A-Za-z]*)\s*", str(text))
        unit = match.group(2).lower() if match else None
        if unit not in _UNITS:
            raise ConfigError(f"memory budget {text!r}: expected a size such as 512MiB, 2GiB, 1.5GB or a number of "
                              f"bytes (units: {', '.join(u for u in _UNITS if u)}; K/M/G/T are binary)")
        value = int(float(match.group(1)) * _UNITS[unit])
    if value <= 0:
        raise ConfigError(f"memory budget {text!r}: must be more than 0 bytes")
    return value


def format_bytes(n: float | None) -> str:
    if n is None:
        return "-"
    for unit, size in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= size:
            return f"{n / size:,.1f} {unit}"
    return f"{int(n)} B"


def host_memory_available() -> int:
    """Bytes this process could still use: psutil's ``available``, capped by a cgroup memory limit (containers)."""
    available = psutil.virtual_memory().available
    for limit_file, usage_file in (("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory.current"),
                                   ("/sys/fs/cgroup/memory/memory.limit_in_bytes",
                                    "/sys/fs/cgroup/memory/memory.usage_in_bytes")):
        try:
            with open(limit_file) as f_limit, open(usage_file) as f_usage:
                limit, usage = f_limit.read().strip(), int(f_usage.read().strip())
        except (OSError, ValueError):
            continue
        if limit.isdigit() and int(limit) < 2**60:  # "max" or a huge number: no limit
            available = min(available, max(int(limit) - usage, 0))
        break
    return available
