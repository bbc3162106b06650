"""Two commits of this project timed side by side: each one's own ``benchmarks.training`` in interleaved rounds.

    python -m benchmarks.compare_commits BASE [HEAD] [--rounds 5] [--args "--quick --skip-solve"]

Why: a refactor claims "benchmarks unchanged within noise"; only the same machine, the same run and
interleaved rounds (A, B, A, B, ...) make that claim fair, since the load of a shared machine drifts over
minutes. Each commit is checked out into a temporary git worktree and run in a child process with that
worktree first on ``PYTHONPATH`` (this interpreter's packages otherwise), so each side runs its own code and
its own benchmark script. Prints, per workload row, the median env steps/s of each commit over the rounds
and their ratio; writes ``compare_commits.csv`` into ``benchmarks/results/`` (or ``--out``).
"""

from __future__ import annotations

import argparse
import csv
import os
import shlex
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from benchmarks.common import machine_description, print_table, results_dir_set_to, write_csv

ROOT = Path(__file__).resolve().parents[1]
KEY = ("workload", "backend", "envs")


def worktree(commit: str, parent: Path) -> Path:
    path = parent / commit.replace("/", "_")
    subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", "-f", str(path), commit], check=True,
                   capture_output=True, text=True)
    return path


def one_round(tree: Path, args: list[str], out: Path) -> dict[tuple, float]:
    """Run ``benchmarks.training`` of ``tree``; return env steps/s by (workload, backend, envs)."""
    env = dict(os.environ, PYTHONPATH=str(tree))
    subprocess.run([sys.executable, "-m", "benchmarks.training", *args, "--out", str(out)], cwd=tree, env=env,
                   check=True, capture_output=True, text=True, timeout=3600)
    with (out / "training.csv").open() as handle:
        return {tuple(row[k] for k in KEY): float(row["env steps/s"]) for row in csv.DictReader(handle)}


def main(argv=None) -> list[dict]:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("base")
    parser.add_argument("head", nargs="?", default="HEAD")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--args", default="--quick --skip-solve", help="arguments of benchmarks.training")
    parser.add_argument("--out", default=None, help="folder for the CSV (default: benchmarks/results/)")
    args = parser.parse_args(argv)
    bench_args = shlex.split(args.args)
    with tempfile.TemporaryDirectory() as tmp:
        trees = {name: worktree(name, Path(tmp)) for name in (args.base, args.head)}
        runs: dict[str, list[dict]] = {name: [] for name in trees}
        try:
            for r in range(args.rounds):
                for name, tree in trees.items():  # interleaved: base, head, base, head, ...
                    runs[name].append(one_round(tree, bench_args, Path(tmp) / f"out-{r}-{tree.name}"))
                    print(f"round {r + 1}/{args.rounds}: {name} done", flush=True)
        finally:
            for tree in trees.values():
                subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(tree)],
                               capture_output=True)
    base, head = args.base, args.head
    rows = []
    for key in runs[base][0]:
        a = statistics.median(run[key] for run in runs[base])
        b = statistics.median(run[key] for run in runs[head] if key in run)
        spread = [min(run[key] for run in runs[n]) / max(run[key] for run in runs[n]) for n in (base, head)]
        rows.append({**dict(zip(KEY, key)), f"{base} env steps/s": round(a), f"{head} env steps/s": round(b),
                     "head / base": round(b / a, 3), "min/max within a commit": round(min(spread), 2)})
    print_table(f"{head} vs {base}, median of {args.rounds} interleaved rounds, on {machine_description()}", rows)
    with results_dir_set_to(args.out):
        print(f"\nwrote {write_csv('compare_commits', rows)}")
    return rows


if __name__ == "__main__":
    main()
