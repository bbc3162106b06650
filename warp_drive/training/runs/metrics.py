"""Run metrics: the CSV file, a progress bar and a summary table.

The CSV (``<run_dir>/metrics.csv``) is the source of truth -- it needs no extra
package and loads with one ``pandas.read_csv``. TensorBoard and W&B are
loggers beside it (``runs/loggers.py``). Metric names follow CleanRL (``charts/SPS``, ``charts/episodic_return/<policy>``,
``losses/policy_loss/<policy>``, ...) so TensorBoard groups them into sections.
"""

from __future__ import annotations

import csv
import math
import numbers
import os
from pathlib import Path
from typing import Any, Iterable, Mapping

from warp_drive.training.config import RunError
from warp_drive.training.runs.layout import open_run_file

__all__ = ["MetricsWriter", "Progress", "format_summary", "format_value"]

CSV_NAME = "metrics.csv"
STEP_KEY = "global_step"


def _scalar(value: Any) -> Any:
    """Plain Python number from a tensor / numpy scalar; other objects unchanged."""
    if hasattr(value, "item") and getattr(value, "ndim", 0) == 0:
        value = value.item()
    return value


def _csv_cell(value: Any) -> str:
    """repr-level precision for floats (round-trips exactly through ``float()``)."""
    value = _scalar(value)
    if value is None:
        return ""
    if isinstance(value, bool):
        return str(int(value))
    if isinstance(value, numbers.Integral):
        return str(int(value))
    if isinstance(value, numbers.Real):
        return "" if math.isnan(value) else repr(float(value))  # no value yet: an empty cell, as a missing key
    return str(value)


class MetricsWriter:
    """Appends one row per ``write`` to ``metrics.csv``.

    Columns are ``global_step`` then the metric keys in order of first
    appearance. A key first seen mid-run (e.g. an episodic return that only
    exists once an episode has ended) triggers a rewrite of the file with the
    expanded header, earlier rows getting empty cells; the rewrite goes through
    a temp file and ``os.replace`` so a crash never leaves a truncated CSV.

    ``purge_step`` (for resumed runs) drops the rows at or after that step,
    which the crashed run wrote after its last checkpoint.
    """

    def __init__(self, run_dir: str | os.PathLike, purge_step: int | None = None):
        self.run_dir = Path(run_dir)
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self.csv_path = self.run_dir / CSV_NAME
        self.keys: list[str] = []
        self._closed = False
        if self.csv_path.exists():  # resuming: keep the existing columns (and rows)
            header, rows = self._read()
            if header[:1] != [STEP_KEY]:
                raise RunError(f"{self.csv_path}: its first line is not a metrics header ({STEP_KEY},...), so its "
                               f"columns are unknown; it is not a file a run wrote: move it away and resume (the "
                               f"run then starts a new metrics.csv)")
            self.keys = [k for k in header if k != STEP_KEY]
            torn = self._ends_mid_row()  # a process killed while appending: the last row is incomplete
            if torn:
                rows = rows[:-1]
            if purge_step is not None:
                kept = [r for r in rows if not r.get(STEP_KEY) or float(r[STEP_KEY]) < purge_step]
                torn = torn or len(kept) != len(rows)
                rows = kept
            if torn:
                self._rewrite(rows)

    # ------------------------------------------------------------------ CSV helpers
    def _read(self) -> tuple[list[str], list[dict[str, str]]]:
        with open(self.csv_path, newline="") as f:
            reader = csv.DictReader(f)
            rows = list(reader)
            return list(reader.fieldnames or []), rows

    def _ends_mid_row(self) -> bool:
        with open(self.csv_path, "rb") as f:
            f.seek(0, os.SEEK_END)
            if f.tell() == 0:
                return False
            f.seek(-1, os.SEEK_END)
            return f.read(1) not in (b"\n", b"\r")

    def _rewrite(self, rows: Iterable[Mapping[str, str]]) -> None:
        tmp = self.csv_path.with_name(f".{CSV_NAME}.tmp{os.getpid()}")
        with os.fdopen(open_run_file(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC), "w", newline="") as f:
            writer = csv.DictWriter(f, fieldnames=[STEP_KEY, *self.keys], restval="")
            writer.writeheader()
            writer.writerows(rows)
        os.replace(tmp, self.csv_path)

    # ------------------------------------------------------------------ public API
    def write(self, step: int, metrics: Mapping[str, Any]) -> None:
        """Record ``metrics`` at env step ``step`` (keys must be strings; values numbers)."""
        if self._closed:
            raise RuntimeError("MetricsWriter.write() after close()")
        step = int(_scalar(step))
        new_keys = [k for k in metrics if k not in self.keys and k != STEP_KEY]
        if new_keys:
            old_rows = self._read()[1] if self.csv_path.exists() else []
            self.keys.extend(new_keys)
            self._rewrite(old_rows)
        elif not self.csv_path.exists():
            self._rewrite([])
        row = {STEP_KEY: str(step), **{k: _csv_cell(v) for k, v in metrics.items() if k != STEP_KEY}}
        with os.fdopen(open_run_file(self.csv_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND), "a", newline="") as f:
            csv.DictWriter(f, fieldnames=[STEP_KEY, *self.keys], restval="").writerow(row)

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True

    def __enter__(self) -> "MetricsWriter":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


# ====================================================================== console
def format_value(value: Any) -> str:
    """Short human-readable form: 4 significant digits, fixed point where readable."""
    value = _scalar(value)
    if isinstance(value, bool) or value is None:
        return str(value)
    if isinstance(value, numbers.Integral):
        return str(int(value))
    if isinstance(value, numbers.Real):
        x = float(value)
        if math.isnan(x) or math.isinf(x):
            return str(x)
        ax = abs(x)
        if ax == 0:
            return "0"
        if 1e3 <= ax < 1e6:
            return f"{x:.1f}"
        if 1e-3 <= ax < 1e3:
            return f"{x:.4g}"
        return f"{x:.3e}"
    return str(value)


class Progress:
    """A tqdm bar over training iterations with a live postfix (SPS, returns, ...).

    ``enabled=False`` (or ``--no-progress``) produces no output at all, so logs
    of batch jobs are not filled with carriage returns.
    """

    def __init__(self, total_iterations: int, enabled: bool = True, desc: str = "train", initial: int = 0):
        from tqdm.auto import tqdm

        self.enabled = bool(enabled)
        self._bar = tqdm(
            total=total_iterations,
            initial=initial,
            desc=desc,
            unit="it",
            disable=not self.enabled,
            dynamic_ncols=True,
            leave=True,
        )

    def update(self, n: int = 1, postfix: Mapping[str, Any] | None = None) -> None:
        if not self.enabled:
            return
        if postfix:
            self._bar.set_postfix({k: format_value(v) for k, v in postfix.items()}, refresh=False)
        self._bar.update(n)

    def write(self, message: str) -> None:
        """Print above the bar without breaking it (plain print when disabled)."""
        if self.enabled:
            self._bar.write(message)
        else:
            print(message)

    def close(self) -> None:
        self._bar.close()

    def __enter__(self) -> "Progress":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def format_summary(rows: Iterable[Mapping[str, Any]]) -> str:
    """An aligned text table: one column per key (in first-seen order), numbers right-aligned."""
    rows = list(rows)
    if not rows:
        return ""
    columns: list[str] = []
    for row in rows:
        columns.extend(k for k in row if k not in columns)
    cells = [[format_value(row[c]) if c in row else "" for c in columns] for row in rows]
    numeric = [
        all(isinstance(_scalar(row.get(c)), numbers.Real) or c not in row for row in rows) for c in columns
    ]
    widths = [max(len(c), *(len(r[i]) for r in cells)) for i, c in enumerate(columns)]

    def line(values: list[str]) -> str:
        parts = [v.rjust(w) if num else v.ljust(w) for v, w, num in zip(values, widths, numeric)]
        return "  ".join(parts).rstrip()

    out = [line(columns), "  ".join("-" * w for w in widths)]
    out += [line(r) for r in cells]
    return "\n".join(out)
