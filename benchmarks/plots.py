"""Log-log throughput plots from benchmark rows (matplotlib, no display needed).

A *sweep* is the rows of one workload on one executor whose env count (or
agent count) varies while the other stays fixed: "paper: discrete Tag N envs
× 5 agents" on ``cpu`` is a sweep over envs, "paper: continuous Tag 1 env × N
agents" one over agents. Any suite's rows that carry ``workload``,
``backend``, ``envs``, ``agents`` and ``env steps/s`` columns are plotted this
way, so a new suite gets plots by naming its columns alike. Where rows also
carry the NumPy reference's rates (``numpy 1-by-1 steps/s``, ``numpy vectorised
steps/s``), those are drawn beside the kernel's, dashed and dotted.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

KERNEL = "env steps/s"
NUMPY_ONE_BY_ONE = "numpy 1-by-1 steps/s"
NUMPY_VECTORISED = "numpy vectorised steps/s"
AXES = ("envs", "agents")


@dataclass
class Sweep:
    workload: str
    backend: str
    axis: str  # "envs" or "agents": the count that varies
    points: list[tuple[float, dict]] = field(default_factory=list)  # (x, row), sorted by x

    def series(self, column: str) -> tuple[list[float], list[float]]:
        """The (x, y) pairs of ``column`` where it holds a positive number (log axes)."""
        pairs = [(x, _number(row.get(column))) for x, row in self.points]
        pairs = [(x, y) for x, y in pairs if y is not None and y > 0]
        return [x for x, _ in pairs], [y for _, y in pairs]


def _number(value) -> float | None:
    """A float from a cell (a number, or a CSV string), None for blanks and 'n/a'."""
    if isinstance(value, bool) or value is None:
        return None
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


def find_sweeps(rows: list[dict]) -> list[Sweep]:
    """The sweeps in ``rows``: per (workload, backend), at least two points varying in one count only."""
    groups: dict[tuple[str, str], list[dict]] = {}
    for row in rows:
        if all(_number(row.get(column)) is not None for column in (*AXES, KERNEL)) and "workload" in row:
            groups.setdefault((str(row["workload"]), str(row.get("backend", ""))), []).append(row)
    sweeps = []
    for (workload, backend), members in groups.items():
        varying = [axis for axis in AXES if len({_number(row[axis]) for row in members}) > 1]
        if len(varying) != 1:  # a single point, or two counts changing at once: no line to draw
            continue
        axis = varying[0]
        points = sorted(((_number(row[axis]), row) for row in members), key=lambda point: point[0])
        sweeps.append(Sweep(workload, backend, axis, points))
    return sweeps


def plot_sweeps(sweeps: list[Sweep], axis: str, title: str, path: Path) -> Path:
    """One log-log PNG of env steps/s against ``axis``: a solid line per (workload, executor),
    the NumPy reference of each workload dashed (one by one) and dotted (vectorised)."""
    from matplotlib.figure import Figure  # no pyplot: no global state, no display backend

    figure = Figure(figsize=(8, 5.5), layout="constrained")
    ax = figure.add_subplot()
    colours = iter(f"C{i}" for i in range(1000))
    references_drawn = set()
    for sweep in sweeps:
        colour = next(colours)
        ax.plot(*sweep.series(KERNEL), "-o", color=colour, label=f"{sweep.workload} [{sweep.backend}]")
        if sweep.workload in references_drawn:
            continue  # the reference does not depend on the executor: draw it once
        references_drawn.add(sweep.workload)
        xs, ys = sweep.series(NUMPY_ONE_BY_ONE)
        if xs:
            ax.plot(xs, ys, "--x", color=colour, alpha=0.7, label=f"{sweep.workload} [NumPy, 1 by 1]")
        if axis == "envs":  # with one env, vectorised over replicas is the same as one by one
            xs, ys = sweep.series(NUMPY_VECTORISED)
            if xs:
                ax.plot(xs, ys, ":+", color=colour, alpha=0.7, label=f"{sweep.workload} [NumPy, vectorised]")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel(f"number of {axis}" + (" (agents per env fixed)" if axis == "envs" else " per env (envs fixed)"))
    ax.set_ylabel("env steps / s")
    ax.set_title(title, fontsize=10)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7, loc="best")
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=110)
    return path


def plot_suite(suite: str, rows: list[dict], out_dir: Path, machine: str) -> list[Path]:
    """``<suite>_vs_envs.png`` and ``<suite>_vs_agents.png`` for the sweeps in a suite's rows (none: no file)."""
    sweeps = find_sweeps(rows)
    written = []
    for axis in AXES:
        chosen = [sweep for sweep in sweeps if sweep.axis == axis]
        if chosen:
            title = f"{suite}: env steps/s vs {axis}\n{machine}"
            written.append(plot_sweeps(chosen, axis, title, Path(out_dir) / f"{suite}_vs_{axis}.png"))
    return written
