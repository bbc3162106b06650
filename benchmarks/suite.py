"""The benchmark suite: every benchmark script in one run, with CSV, Markdown and plots.

    python -m benchmarks [--quick] [--suites runtime,envs,paper,training,scaling,lightning,mappo,ddpg]
                         [--backends cpu,pycuda] [--out DIR]

Runs each suite's ``main(argv) -> list[dict]`` (which prints its table), then
writes into ``--out`` (default ``benchmarks/results/``):

* ``<suite>.csv`` for every suite (plus any extra CSV a suite writes itself);
* ``<suite>_vs_envs.png`` / ``<suite>_vs_agents.png``: log-log env steps/s
  against the number of envs / agents, per executor, with the NumPy reference
  beside the kernel (see :mod:`benchmarks.plots`);
* ``summary.md``: every table in Markdown, headed by the machine, the date,
  the executors and the exact command, ready to paste into the README.

A suite whose module is not there (yet) is skipped with a note; one that
fails is reported and the others still run (the exit status is then 1).
"""

from __future__ import annotations

import argparse
import datetime
import importlib
import importlib.util
import shlex
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path

from benchmarks.common import (
    RESULTS_DIR,
    backend_names,
    machine_description,
    markdown_table,
    results_dir_set_to,
    write_csv,
)
from benchmarks.plots import plot_suite


@dataclass(frozen=True)
class Suite:
    name: str
    module: str
    what: str
    # How its command line names executors: "--backends" (a list), "--backend" (one: the suite then runs
    # once per executor), or None (it picks its own).
    backends_flag: str | None
    takes_smoke: bool = False  # its command line has the hidden --smoke (toy sizes, for the tests)


SUITES = (
    Suite("runtime", "benchmarks.runtime", "executor micro-benchmarks: launch overhead, barriers, sampler, reset",
          "--backends"),
    Suite("envs", "benchmarks.envs", "env steps/s of each example env against its NumPy reference", "--backends"),
    Suite("paper", "benchmarks.paper", "the WarpDrive paper's Tag workloads", "--backends", takes_smoke=True),
    Suite("training", "benchmarks.training", "end-to-end training iterations (env steps/s, time per phase)",
          "--backends"),
    Suite("scaling", "benchmarks.scaling", "training env steps/s vs processes and envs; the auto-scaler's choices", "--backends"),
    Suite("lightning", "benchmarks.lightning", "training through PyTorch Lightning vs the plain Trainer", "--backend"),
    Suite("mappo", "benchmarks.mappo", "MAPPO's centralised critics vs independent PPO, training env steps/s",
          "--backends"),
    Suite("ddpg", "benchmarks.ddpg", "DDPG's learning curve on Pendulum (env steps vs mean episode return)",
          "--backends", takes_smoke=True),
)
SUITES_BY_NAME = {suite.name: suite for suite in SUITES}


@dataclass
class Outcome:
    suite: Suite
    command: str
    rows: list[dict] = field(default_factory=list)
    seconds: float = 0.0
    note: str = ""  # why it was skipped or how it failed; empty when it ran
    files: list[Path] = field(default_factory=list)

    @property
    def ran(self) -> bool:
        return not self.note


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="suites: " + "; ".join(f"{s.name}: {s.what}" for s in SUITES))
    parser.add_argument("--quick", action="store_true", help="every suite's --quick (smaller sizes, shorter timing)")
    parser.add_argument("--suites", default=",".join(SUITES_BY_NAME),
                        help="comma-separated, run in the order given (default: all, in the order below)")
    parser.add_argument("--backends", default=None, help="comma-separated executors: cpu, pycuda "
                        "(default: each suite's own, which is cpu plus pycuda with a GPU)")
    parser.add_argument("--out", default=str(RESULTS_DIR), help="folder for CSV, PNG and summary.md "
                        "(default: benchmarks/results/)")
    parser.add_argument("--smoke", action="store_true", help=argparse.SUPPRESS)  # toy sizes, for the tests
    args = parser.parse_args(argv)
    names = [name.strip() for name in args.suites.split(",") if name.strip()]
    unknown = [name for name in names if name not in SUITES_BY_NAME]
    if not names or unknown:
        parser.error(f"--suites {args.suites!r}: unknown {', '.join(map(repr, unknown)) or 'empty list'}; "
                     f"choose from {','.join(SUITES_BY_NAME)}")
    args.suites = [SUITES_BY_NAME[name] for name in dict.fromkeys(names)]
    if args.smoke:
        unsupported = [suite.name for suite in args.suites if not suite.takes_smoke]
        if unsupported:
            parser.error(f"--smoke (toy sizes) works with --suites {','.join(s.name for s in SUITES if s.takes_smoke)} "
                         f"only, not {', '.join(unsupported)}")
    if args.backends is not None:
        args.backends = ",".join(backend_names(args.backends))  # fail on a bad name before anything runs
    return args


def suite_argvs(suite: Suite, args: argparse.Namespace) -> list[list[str]]:
    """The command line(s) to run ``suite`` with: one, or one per executor for a ``--backend`` suite."""
    argv = ["--quick"] if args.quick else []
    if args.smoke:
        argv.append("--smoke")
    if args.backends is None or suite.backends_flag is None:
        return [argv]
    if suite.backends_flag == "--backends":
        return [argv + ["--backends", args.backends]]
    return [argv + [suite.backends_flag, name] for name in args.backends.split(",")]


def run_suite(suite: Suite, args: argparse.Namespace, out_dir: Path, machine: str) -> Outcome:
    """Run one suite into ``out_dir``; a missing module or a failure becomes the outcome's note."""
    argvs = suite_argvs(suite, args)
    outcome = Outcome(suite, "; ".join(shlex.join(["python", "-m", suite.module, *argv]) for argv in argvs))
    print(f"\n=== {suite.name}: {outcome.command}", flush=True)
    if importlib.util.find_spec(suite.module) is None:
        outcome.note = f"skipped: {suite.module.replace('.', '/')}.py is not there"
        print(outcome.note)
        return outcome
    if args.backends is not None and suite.backends_flag is None:
        print(f"note: {suite.name} takes no executor option; it runs on its own default executor")
    started = time.perf_counter()
    try:
        with results_dir_set_to(out_dir):
            for argv in argvs:
                rows = list(importlib.import_module(suite.module).main(argv) or [])
                if suite.backends_flag == "--backend" and args.backends is not None:  # say which run a row is from
                    rows = [{"backend": argv[-1], **row} if "backend" not in row else row for row in rows]
                outcome.rows += rows
    except (Exception, SystemExit) as error:  # noqa: BLE001 - report any failure (argparse: SystemExit), run the rest
        traceback.print_exc()
        outcome.note = f"FAILED: {type(error).__name__}: {error}"
    outcome.seconds = time.perf_counter() - started
    if outcome.rows:
        with results_dir_set_to(out_dir):
            outcome.files.append(write_csv(suite.name, outcome.rows))
        outcome.files += plot_suite(suite.name, outcome.rows, out_dir, machine)
    return outcome


def summary_markdown(outcomes: list[Outcome], args: argparse.Namespace, command: str, machine: str,
                     started: datetime.datetime, seconds: float) -> str:
    """The tables of every suite that ran, headed by where, when and how they were measured."""
    executors = args.backends or ",".join(backend_names(None))
    lines = [
        "# Benchmark results",
        "",
        f"- **Machine:** {machine}",
        f"- **Date:** {started:%Y-%m-%d %H:%M} UTC",
        f"- **Executors:** {executors}",
        f"- **Command:** `{command}`" + (" (quick: smaller sizes, shorter timing)" if args.quick else ""),
        f"- **Wall time:** {seconds:,.0f} s (" + ", ".join(
            f"{o.suite.name} {o.seconds:,.0f} s" for o in outcomes if o.ran) + ")",
        "",
    ]
    for outcome in outcomes:
        lines += [f"## {outcome.suite.name}: {outcome.suite.what}", "", f"`{outcome.command}`", ""]
        if outcome.note:
            lines += [f"*{outcome.note}*", ""]
        if outcome.rows:
            lines += [markdown_table(outcome.rows), ""]
        for path in outcome.files:
            if path.suffix == ".png":
                lines += [f"![{path.stem}]({path.name})", ""]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Run the chosen suites; returns the exit status (1 when a suite failed)."""
    import sys

    argv = list(sys.argv[1:] if argv is None else argv)
    args = parse_args(argv)
    command = shlex.join(["python", "-m", "benchmarks", *argv])
    out_dir = Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    machine = machine_description()
    started_at = datetime.datetime.now(datetime.timezone.utc)
    started = time.perf_counter()
    outcomes = [run_suite(suite, args, out_dir, machine) for suite in args.suites]
    seconds = time.perf_counter() - started
    summary = out_dir / "summary.md"
    summary.write_text(summary_markdown(outcomes, args, command, machine, started_at, seconds))
    print(f"\n=== {len(outcomes)} suites in {seconds:,.0f} s on {machine}")
    for outcome in outcomes:
        status = outcome.note or f"{len(outcome.rows)} rows, {outcome.seconds:,.0f} s"
        print(f"  {outcome.suite.name:10s} {status}")
        for path in outcome.files:
            print(f"  {'':10s} wrote {path}")
    print(f"  wrote {summary}")
    return 1 if any(o.note.startswith("FAILED") for o in outcomes) else 0
