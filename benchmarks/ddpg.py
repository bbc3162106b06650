"""DDPG's learning curve on Pendulum (issue 15): env steps vs mean episode return.

    python -m benchmarks.ddpg [--quick] [--backends cpu,pycuda] [--seeds 1,2,3] [--steps N] [--out DIR]

Trains the shipped ``pendulum_ddpg`` config (16 envs x 8 steps per iteration,
32 gradient steps of 256 transitions each) for each seed and, every
``--every`` env steps, records

* ``training return``: the mean return of the episodes that ended since the
  last point (actions with exploration noise; NaN when none ended),
* ``greedy return``: one fresh episode in every env with the actor's own
  actions (no noise), timed apart from training.

Prints the per-seed rows and the mean over seeds, writes ``ddpg.csv`` (every
row) into ``benchmarks/results/`` (or ``--out``) and ``ddpg_pendulum.png``
(greedy return vs env steps, each seed and their mean, with the -400 bar of
the issue's acceptance) beside it and into ``benchmarks/figures/``.
A swung-up pendulum scores about -150; a random policy about -1200.
"""

from __future__ import annotations

import argparse
import math
import shutil
import time
from pathlib import Path

from benchmarks.common import (backend_names, machine_description, print_table, results_dir, results_dir_set_to,
                               write_csv)
from warp_drive.training.config import load_config
from warp_drive.training.run import build

FIGURES_DIR = Path(__file__).resolve().parent / "figures"
TARGET = -400.0


def curve(backend: str, seed: int, steps: int, every: int, extra: list[str]) -> list[dict]:
    """One training run's points (the first before any training)."""
    cfg = load_config("pendulum_ddpg", [f"trainer.backend={backend}", f"trainer.seed={seed}",
                                        f"trainer.total_steps={steps}", *extra])
    trainer = build(cfg)
    per_iteration = trainer.batch_env_steps
    every = max(per_iteration, every // per_iteration * per_iteration)
    rows, training_seconds = [], 0.0

    def point(training_return: float) -> None:
        greedy = trainer.run_episodes(greedy=True)["mean_return"]["shared"]
        # run_episodes leaves every env freshly reset: the episodes in progress start over, so do their tallies.
        trainer.rollout.forget_partial_episodes()
        rows.append({"backend": backend, "seed": seed, "env steps": trainer.env_steps,
                     "training return": training_return, "greedy return": greedy,
                     "training seconds": training_seconds})

    point(float("nan"))
    trainer.episode_metrics()  # counts only this run's episodes from here
    while trainer.iteration < trainer.num_iterations:
        started = time.perf_counter()
        trainer.iterate()
        training_seconds += time.perf_counter() - started
        if trainer.env_steps % every == 0 or trainer.iteration == trainer.num_iterations:
            point(trainer.episode_metrics()["charts/episodic_return/shared"])
    return rows


def mean_rows(rows: list[dict]) -> list[dict]:
    """The mean over seeds at each (backend, env steps)."""
    out = []
    for key in dict.fromkeys((r["backend"], r["env steps"]) for r in rows):
        same = [r for r in rows if (r["backend"], r["env steps"]) == key]
        finite = [r["training return"] for r in same if not math.isnan(r["training return"])]
        out.append({"backend": key[0], "env steps": key[1], "seeds": len(same),
                    "mean training return": sum(finite) / len(finite) if finite else float("nan"),
                    "mean greedy return": sum(r["greedy return"] for r in same) / len(same),
                    "worst greedy return": min(r["greedy return"] for r in same),
                    "mean training seconds": sum(r["training seconds"] for r in same) / len(same)})
    return out


def plot(rows: list[dict], means: list[dict], path: Path, title: str) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.5))
    for backend in dict.fromkeys(r["backend"] for r in rows):
        for seed in dict.fromkeys(r["seed"] for r in rows if r["backend"] == backend):
            mine = [r for r in rows if (r["backend"], r["seed"]) == (backend, seed)]
            ax.plot([r["env steps"] for r in mine], [r["greedy return"] for r in mine], lw=0.8, alpha=0.5,
                    label=f"{backend} seed {seed}")
        mine = [m for m in means if m["backend"] == backend]
        ax.plot([m["env steps"] for m in mine], [m["mean greedy return"] for m in mine], lw=2.2,
                label=f"{backend} mean")
    ax.axhline(TARGET, color="grey", ls="--", lw=1, label=f"acceptance: {TARGET:.0f}")
    ax.set_xlabel("env steps")
    ax.set_ylabel("mean episode return (greedy, 16 envs)")
    ax.set_title(title, fontsize=9)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, loc="lower right")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def main(argv=None) -> list[dict]:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="one seed")
    parser.add_argument("--backends", default=None, help="comma-separated; default: cpu, plus pycuda with a GPU")
    parser.add_argument("--seeds", default="1,2,3")
    parser.add_argument("--steps", type=int, default=38_400, help="env steps per run (default 38,400)")
    parser.add_argument("--every", type=int, default=3_200,
                        help="env steps between points (default 3,200: one 200-step episode in each of the 16 "
                             "envs, so the greedy episodes, which reset every env, cut no training episode short)")
    parser.add_argument("--out", default=None, help="folder for ddpg.csv and the PNG (default: benchmarks/results/)")
    parser.add_argument("--smoke", action="store_true", help=argparse.SUPPRESS)  # toy sizes, for the tests
    args = parser.parse_args(argv)
    seeds = [int(s) for s in args.seeds.split(",") if s.strip()]
    steps, every, extra = args.steps, args.every, []
    if args.quick:
        seeds = seeds[:1]
    if args.smoke:
        seeds, steps, every = seeds[:1], 512, 256
        extra = ["policy.shared.warmup_steps=256", "policy.shared.updates_per_iteration=2"]
    rows = [row for backend in backend_names(args.backends) for seed in seeds
            for row in curve(backend, seed, steps, every, extra)]
    means = mean_rows(rows)
    print_table(f"DDPG on Pendulum, per seed ({machine_description()})", rows)
    print_table("DDPG on Pendulum, mean over seeds", means)
    out = Path(args.out) if args.out else results_dir()
    out.mkdir(parents=True, exist_ok=True)
    with results_dir_set_to(out):
        csv_path = write_csv("ddpg", rows)
    title = f"DDPG on Pendulum (pendulum_ddpg, {len(seeds)} seed(s))\n{machine_description()}"
    png = plot(rows, means, out / "ddpg_pendulum.png", title)
    print(f"\nwrote {csv_path}\nwrote {png}")
    if not args.smoke and out.resolve() != FIGURES_DIR.resolve():
        for path in (png, csv_path):
            shutil.copyfile(path, FIGURES_DIR / path.name.replace("ddpg.csv", "ddpg_pendulum.csv"))
        print(f"copied both into {FIGURES_DIR}")
    return rows


if __name__ == "__main__":
    main()
