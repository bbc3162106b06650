"""End-to-end training throughput and time to solve CartPole (issue: training).

    python -m benchmarks.training [--quick] [--backends cpu,pycuda] [--skip-solve] [--out DIR]

1. Env steps/s of whole training iterations (inference, sampling, env step,
   reset, update) for CartPole and Tag at several env counts, with the share
   of time in each phase (the framework's own overhead should not dominate:
   model forward/backward is "inference" + "update").
2. CartPole solved: PPO until the greedy policy's mean return over 100
   episodes (one in each of 100 envs) reaches 475; reports wall time and env
   steps (evaluation time excluded).
A GPU executor gets larger env counts (a GPU needs many envs to fill); the
target "end-to-end PPO training on Tag >= 2 M env steps/s" applies there.
Writes ``training.csv`` and ``training_cartpole_solve.csv`` into
``benchmarks/results/`` (or ``--out``).
"""

from __future__ import annotations

import argparse
import time

from benchmarks.common import backend_names, machine_description, print_table, results_dir_set_to, write_csv
from warp_drive.runtime.backends import resolve_backend_name
from warp_drive.training.config import load_config
from warp_drive.training.run import build

# (label, config, env counts on the cpu executor, env counts on a GPU, GPU target, config overrides)
WORKLOADS = [
    ("CartPole", "cartpole", [32, 256, 2048], [2048, 16_384, 100_000], "", []),
    ("TagContinuous 2 taggers + 5 runners, PPO", "tag_continuous_small", [100, 500, 2000], [2000, 10_000, 50_000],
     ">= 2,000,000 (GPU)", []),
    ("TagGridWorld 4 taggers + 1 runner, A2C", "tag_gridworld", [100, 1000], [1000, 10_000, 50_000], "", []),
]
PHASES = ("inference", "sampling", "env_step", "reset", "update")


def workload_config(config_name: str, num_envs: int, backend: str, iterations: int, extra: list[str]):
    """The shipped config at ``num_envs``, with total_steps for exactly ``iterations`` + 1 (warm-up) iterations.

    total_steps is set from the config's rollout length: the shipped value can
    be less than one iteration at a GPU's env counts, which the config refuses.
    """
    rollout_length = load_config(config_name, extra).trainer.rollout_length
    steps = num_envs * rollout_length * (iterations + 1)
    return load_config(config_name, [f"trainer.num_envs={num_envs}", f"trainer.backend={backend}",
                                     f"trainer.total_steps={steps}", *extra])


def throughput(config_name: str, num_envs: int, backend: str, iterations: int, extra: list[str]) -> dict:
    trainer = build(workload_config(config_name, num_envs, backend, iterations, extra))
    trainer.iterate()  # warm-up: first-touch allocations
    totals = dict.fromkeys(PHASES, 0.0)
    elapsed = 0.0
    for _ in range(iterations):
        m = trainer.iterate()
        elapsed += m["time/iteration"]
        for phase in PHASES:
            totals[phase] += m[f"time/{phase}"]
    row = {"envs": num_envs, "agents": trainer.env.num_agents,
           "env steps/s": trainer.batch_env_steps * iterations / elapsed}
    row.update({f"% {phase}": 100.0 * totals[phase] / elapsed for phase in PHASES})
    row["% model fwd+bwd"] = row["% inference"] + row["% update"]
    return row


def solve_cartpole(backend: str, max_steps: int = 2_000_000, target: float = 475.0) -> dict:
    cfg = load_config("cartpole", [f"trainer.backend={backend}", "trainer.num_envs=100", "trainer.rollout_length=16",
                                   f"trainer.total_steps={max_steps}", "policy.shared.lr=2.5e-4"])
    trainer = build(cfg)
    training_time, score = 0.0, float("nan")
    while trainer.iteration < trainer.num_iterations:
        started = time.perf_counter()
        for _ in range(10):
            trainer.iterate()
        training_time += time.perf_counter() - started
        score = trainer.run_episodes(greedy=True)["mean_return"]["shared"]
        if score >= target:
            break
    return {"solved": score >= target, "greedy mean return (100 episodes)": score, "env steps": trainer.env_steps,
            "training seconds": training_time, "target": f">= {target} within 600 s"}


def main(argv=None) -> list[dict]:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--backends", default=None, help="comma-separated; default: cpu, plus pycuda with a GPU")
    parser.add_argument("--backend", default=None, help="one executor (cpu, pycuda or auto); kept for old commands")
    parser.add_argument("--skip-solve", action="store_true")
    parser.add_argument("--out", default=None, help="folder for the CSVs (default: benchmarks/results/)")
    args = parser.parse_args(argv)
    if args.backend and args.backends:
        parser.error("give --backends or --backend, not both")
    names = [resolve_backend_name(args.backend)] if args.backend else backend_names(args.backends)
    rows = []
    for backend in names:
        for label, name, cpu_envs, gpu_envs, target, extra in WORKLOADS:
            env_counts = cpu_envs if backend == "cpu" else gpu_envs
            for num_envs in env_counts[:2] if args.quick else env_counts:
                row = throughput(name, num_envs, backend, 1 if args.quick else 3, extra)
                rows.append({"workload": label, "backend": backend, **row, "target": target})
    print_table(f"End-to-end training throughput on {machine_description()}", rows)
    with results_dir_set_to(args.out):
        print(f"\nwrote {write_csv('training', rows)}")
        if not args.skip_solve and not args.quick:
            solves = [{"backend": backend, **solve_cartpole(backend)} for backend in names]
            print_table("CartPole with PPO until solved", solves)
            print(f"\nwrote {write_csv('training_cartpole_solve', solves)}")
    return rows


if __name__ == "__main__":
    main()
