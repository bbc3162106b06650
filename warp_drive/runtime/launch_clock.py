"""Seconds since this process was launched: the start-up a user waits through, imports included.

On Linux the kernel's record of the process's start (``/proc/self/stat``,
field 22, in clock ticks since boot, against ``/proc/uptime``); elsewhere the
time since ``warp_drive`` was first imported, which misses only the
interpreter's own start.
"""

from __future__ import annotations

import os
import time

IMPORTED_AT = time.monotonic()


def _linux_process_age() -> float | None:
    try:
        with open("/proc/self/stat", "rb") as handle:
            fields = handle.read().rsplit(b")", 1)[1].split()  # the command name may hold spaces and ')'
        with open("/proc/uptime", "rb") as handle:
            uptime = float(handle.read().split()[0])
        start_ticks = int(fields[19])  # field 22 of the whole line: fields[0] here is field 3
        return max(uptime - start_ticks / os.sysconf("SC_CLK_TCK"), 0.0)
    except (OSError, ValueError, IndexError):
        return None


def seconds_since_launch() -> float:
    age = _linux_process_age()
    return age if age is not None else time.monotonic() - IMPORTED_AT
