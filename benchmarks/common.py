"""Helpers shared by the benchmark scripts: timing, executors, tables, CSV output."""

from __future__ import annotations

import contextlib
import csv
import platform
import time
from collections.abc import Callable, Iterator
from pathlib import Path

RESULTS_DIR = Path(__file__).resolve().parent / "results"
_results_dir = RESULTS_DIR  # where write_csv writes; see results_dir_set_to


def results_dir() -> Path:
    """The folder the benchmark scripts write into (``benchmarks/results/`` unless redirected)."""
    return _results_dir


@contextlib.contextmanager
def results_dir_set_to(path: Path | str | None) -> Iterator[Path]:
    """Redirect every script's CSV output into ``path`` for the duration (``None``: keep the current folder).

    The suite entry point uses this so that scripts it does not know the
    options of (any that call :func:`write_csv`) still write where ``--out`` says.
    """
    global _results_dir
    previous = _results_dir
    _results_dir = Path(path) if path is not None else previous
    try:
        yield _results_dir
    finally:
        _results_dir = previous


def backend_names(argument: str | None) -> list[str]:
    """Executors named by a ``--backends`` value: comma-separated, default ``cpu`` (plus ``pycuda`` with a GPU).

    Unknown names fail here, before any benchmark has run, rather than after
    minutes of work.
    """
    from warp_drive.runtime.backends import gpu_available

    if not argument:
        return ["cpu"] + (["pycuda"] if gpu_available() else [])
    names = [name.strip().lower() for name in argument.split(",") if name.strip()]
    unknown = [name for name in names if name not in ("cpu", "pycuda")]
    if not names or unknown:
        raise SystemExit(f"--backends {argument!r}: executors are 'cpu' and 'pycuda' (comma-separated), "
                         f"e.g. --backends cpu,pycuda")
    if "pycuda" in names and not gpu_available():
        raise SystemExit("--backends pycuda: no usable GPU here (torch sees no CUDA device, or PyCUDA does not "
                         "import; pip install -e '.[cuda]' on a GPU machine); use --backends cpu")
    return list(dict.fromkeys(names))


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
    """CPU model and core count, plus the GPU's name when torch sees one."""
    import os

    import torch

    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    description = f"{cpu}, {os.cpu_count()} cores"
    if torch.cuda.is_available():
        return f"{description}, GPU: {torch.cuda.get_device_name(0)}"
    return f"{description}, no GPU"


def columns_of(rows: list[dict]) -> list[str]:
    """Every column of ``rows``, in first-seen order (rows of one table may differ in their keys)."""
    return list(dict.fromkeys(key for row in rows for key in row))


def print_table(title: str, rows: list[dict]) -> None:
    if not rows:
        return
    columns = columns_of(rows)
    cells = [[_fmt(row.get(c, "")) for c in columns] for row in rows]
    widths = [max(len(c), *(len(r[i]) for r in cells)) for i, c in enumerate(columns)]
    print(f"\n{title}")
    print("  ".join(c.ljust(w) for c, w in zip(columns, widths)))
    print("  ".join("-" * w for w in widths))
    for row, r in zip(rows, cells):  # text left, numbers right
        print("  ".join(v.ljust(w) if isinstance(row.get(c), str) else v.rjust(w)
                        for c, v, w in zip(columns, r, widths)))


def markdown_table(rows: list[dict]) -> str:
    """``rows`` as a Markdown table, each cell formatted as :func:`print_table` prints it."""
    columns = columns_of(rows)
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    for row in rows:
        lines.append("| " + " | ".join(_fmt(row.get(c, "")).replace("|", "\\|") for c in columns) + " |")
    return "\n".join(lines)


def _fmt(value) -> str:
    if isinstance(value, float):
        if value == 0 or 0.01 <= abs(value) < 1e6:
            return f"{value:,.2f}"
        return f"{value:,.3g}"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)


def write_csv(name: str, rows: list[dict]) -> Path:
    """Write ``rows`` to ``<results dir>/<name>.csv`` (full precision; a missing cell is left empty)."""
    directory = results_dir()
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{name}.csv"
    with path.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=columns_of(rows), restval="")
        writer.writeheader()
        writer.writerows(rows)
    return path
