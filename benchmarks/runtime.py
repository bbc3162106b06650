"""Runtime micro-benchmarks, per executor (issue: core runtime).

    python -m benchmarks.runtime [--quick] [--backends cpu,pycuda] [--out DIR]

Prints and writes ``runtime.csv`` into ``benchmarks/results/`` (or ``--out``):
* launch overhead (µs) of a tiny barrier-free kernel and of a 30-argument kernel;
* cpu executor only: fast-path cost per thread and fiber-barrier cost per thread;
* sampler throughput (samples/s) at 2000 envs x 1000 agents x 10 actions;
* reset throughput (env resets/s) at 2000 envs x 1000 agents, four arrays.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import torch

from benchmarks.common import (
    backend_names,
    machine_description,
    print_table,
    results_dir_set_to,
    time_per_call,
    write_csv,
)
from warp_drive.runtime.backends import get_backend
from warp_drive.runtime.data_feed import DataFeed
from warp_drive.runtime.data_manager import DataManager
from warp_drive.runtime.function_manager import FunctionManager
from warp_drive.services.reset import EnvironmentReset
from warp_drive.services.sampler import Sampler

KERNELS = Path(__file__).resolve().parent / "kernels" / "runtime_bench.cu"


def bench_backend(name: str, quick: bool) -> list[dict]:
    backend = get_backend(name)
    sync = backend.synchronize
    seconds = 0.2 if quick else 1.0
    rows = []

    def add(metric: str, value: float, unit: str, target: str = "") -> None:
        rows.append({"backend": name, "metric": metric, "value": value, "unit": unit, "target": target})

    module = backend.build([KERNELS])
    x = torch.zeros(1 << 22, dtype=torch.int32, device=backend.device)
    noop = module.get_function("bench_noop").bind(x)
    add("launch overhead, tiny kernel (1 block x 32)", time_per_call(lambda: noop.launch(1, 32), seconds, sync) * 1e6,
        "us", "<= 10" if name == "cpu" else "")
    many = module.get_function("bench_30_args").bind(
        *[torch.zeros(4, device=backend.device) for _ in range(10)], *range(10), *[1.0] * 10)
    add("launch overhead, 30-argument kernel", time_per_call(lambda: many.launch(1, 32), seconds, sync) * 1e6, "us",
        "<= 10" if name == "cpu" else "")
    if name == "cpu":
        touch = module.get_function("bench_touch").bind(x)
        blocks, threads = 4000, 1000
        t = time_per_call(lambda: touch.launch(blocks, threads), seconds, sync)
        add("fast path (barrier-free), per thread", t / (blocks * threads) * 1e9, "ns", "<= 10")
        rounds, blocks = 100, 200
        for threads in (32, 1000):
            barriers = module.get_function("bench_barriers").bind(x, rounds)
            t = time_per_call(lambda: barriers.launch(blocks, threads), seconds, sync)
            add(f"fiber barrier, per thread (block of {threads})", t / (blocks * threads * rounds) * 1e9, "ns",
                "<= 60")

    envs, agents, actions = (500, 1000, 10) if quick else (2000, 1000, 10)
    dm = DataManager(envs, agents, 100, backend=backend)
    feed = DataFeed()
    feed.add_data("sampled_actions", np.zeros((envs, agents), np.int32))
    for i in range(3):
        feed.add_data(f"state_{i}", np.random.rand(envs, agents).astype(np.float32), save_copy_and_apply_at_reset=True)
    feed.add_data("obs", np.random.rand(envs, agents, 4).astype(np.float32), save_copy_and_apply_at_reset=True)
    dm.push_data_to_device(feed)
    fm = FunctionManager(envs, agents, backend=backend)
    sampler = Sampler(fm, seed=0)
    sampler.register_actions(dm, "sampled_actions", actions)
    probs = torch.softmax(torch.randn(envs, agents, actions, device=backend.device), dim=-1)
    t = time_per_call(lambda: sampler.sample(dm, probs, "sampled_actions"), seconds, sync)
    add(f"sampler, categorical ({envs} envs x {agents} agents x {actions} actions)", envs * agents / t, "samples/s")
    t = time_per_call(lambda: sampler.sample(dm, probs, "sampled_actions", argmax=True), seconds, sync)
    add(f"sampler, argmax ({envs} x {agents} x {actions})", envs * agents / t, "samples/s")
    resetter = EnvironmentReset(fm, seed=0)
    t = time_per_call(lambda: resetter.reset_when_done(dm, mode="force_reset"), seconds, sync)
    add(f"reset, forced ({envs} envs x {agents} agents, 4 arrays)", envs / t, "env resets/s")
    done = dm.data_on_device_via_torch("_done_")

    def reset_tenth():
        done[::10] = 1
        resetter.reset_when_done(dm)

    t = time_per_call(reset_tenth, seconds, sync)
    add(f"reset, 10% of envs done ({envs} envs)", envs / t, "envs scanned/s")
    return rows


def main(argv=None) -> list[dict]:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="smaller sizes, shorter timing")
    parser.add_argument("--backends", default=None, help="comma-separated; default: cpu, plus pycuda with a GPU")
    parser.add_argument("--out", default=None, help="folder for the CSV (default: benchmarks/results/)")
    args = parser.parse_args(argv)
    rows = [row for name in backend_names(args.backends) for row in bench_backend(name, args.quick)]
    print_table(f"Runtime benchmarks on {machine_description()}", rows)
    with results_dir_set_to(args.out):
        print(f"\nwrote {write_csv('runtime', rows)}")
    return rows


if __name__ == "__main__":
    main()
