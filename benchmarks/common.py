"""Helpers shared by the benchmark scripts: timing, tables, CSV output."""

from __future__ import annotations

import csv
import platform
import time
from pathlib import Path
from typing import Callable

RESULTS_DIR = Path(__file__).resolve().parent / "results"


def time_per_call(fn: Callable[[], None], min_seconds: float = 0.5, sync: Callable[[], None] = lambda: None) -> float:
    """Seconds per call of ``fn``: warm up once, then repeat until ``min_seconds`` have passed."""
    fn()
    sync()
    calls, started = 0, time.perf_counter()
    while True:
        fn()
        calls += 1
        if calls & (calls - 1) == 0 or calls % 64 == 0:  # check the clock rarely
            sync()
            elapsed = time.perf_counter() - started
            if elapsed >= min_seconds:
                return elapsed / calls


def machine_description() -> str:
    import os

    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return f"{cpu}, {os.cpu_count()} cores"


def print_table(title: str, rows: list[dict]) -> None:
    if not rows:
        return
    columns = list(rows[0])
    cells = [[_fmt(row[c]) for c in columns] for row in rows]
    widths = [max(len(c), *(len(r[i]) for r in cells)) for i, c in enumerate(columns)]
    print(f"\n{title}")
    print("  ".join(c.ljust(w) for c, w in zip(columns, widths)))
    print("  ".join("-" * w for w in widths))
    for r in cells:
        print("  ".join(v.rjust(w) for v, w in zip(r, widths)))


def _fmt(value) -> str:
    if isinstance(value, float):
        if value == 0 or 0.01 <= abs(value) < 1e6:
            return f"{value:,.2f}"
        return f"{value:,.3g}"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)


def write_csv(name: str, rows: list[dict]) -> Path:
    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    path = RESULTS_DIR / f"{name}.csv"
    with path.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    return path
