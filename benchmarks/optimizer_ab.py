"""The trainers' Adam (training/optim.py) against torch.optim.Adam, same process, interleaved.

    python -m benchmarks.optimizer_ab [--config tag_continuous_small] [--envs 10000] [--rounds 3] [--iterations 5]

Builds the config once per optimizer (same seed), swaps ``torch.optim.Adam`` (foreach, as torch picks on a
GPU; on a CPU torch would step one tensor at a time) into one trainer's policies, and times whole
training iterations in alternating rounds, so that a drifting machine affects both alike.
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

from benchmarks.common import machine_description, print_table
from warp_drive.training.config import load_config
from warp_drive.training.run import build


def timed_iterations(trainer, n: int) -> float:
    sync = trainer.env.backend.synchronize
    sync()
    started = time.perf_counter()
    for _ in range(n):
        trainer.iterate()
    sync()
    return n * trainer.batch_env_steps / (time.perf_counter() - started)


def main(argv=None) -> list[dict]:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", default="tag_continuous_small")
    parser.add_argument("--envs", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--iterations", type=int, default=5)
    parser.add_argument("--backend", default="auto")
    args = parser.parse_args(argv)
    overrides = [f"trainer.num_envs={args.envs}", f"trainer.backend={args.backend}"]
    rollout_length = load_config(args.config, [*overrides, "trainer.total_steps=1000000000000"]).trainer.rollout_length
    steps = args.envs * rollout_length * (args.rounds * args.iterations + 2)  # + the warm-up, + one to spare
    cfg = load_config(args.config, [*overrides, f"trainer.total_steps={steps}"])
    trainers = {"warp_drive Adam": build(cfg), "torch.optim.Adam (foreach)": build(cfg)}
    for p in trainers["torch.optim.Adam (foreach)"].policies.values():
        lr = p.optimizer.param_groups[0]["lr"]
        p.optimizer = torch.optim.Adam(p.model.parameters(), lr=lr, eps=1e-5, foreach=True)
    rates = {name: [] for name in trainers}
    for trainer in trainers.values():
        trainer.iterate()  # warm-up
    for _ in range(args.rounds):
        for name, trainer in trainers.items():
            rates[name].append(timed_iterations(trainer, args.iterations))
    rows = [{"optimizer": name, "env steps/s (median)": statistics.median(r), "rounds": " ".join(f"{x:,.0f}" for x in r)}
            for name, r in rates.items()]
    print_table(f"{args.config}, {args.envs} envs, on {machine_description()}", rows)
    return rows


if __name__ == "__main__":
    main()
