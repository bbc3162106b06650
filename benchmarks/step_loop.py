"""A paper workload's step loop, for a profiler (``ncu``, ``nsys``, ``compute-sanitizer``) to watch.

    ncu --kernel-name TagGridWorldStep --launch-skip 10 --launch-count 1 \\
        python -m benchmarks.step_loop --workload discrete --envs 2000 --agents 1000

Builds the workload as ``benchmarks.paper`` does and runs ``--steps`` loops of
new actions, env step and on-device reset of done envs, then prints the
mean time per loop (profilers slow it; the figure is for orientation only).
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import torch

from benchmarks.paper import continuous_tag_config, discrete_tag_config
from warp_drive.env.consistency import random_actions
from warp_drive.env.wrapper import EnvWrapper

WORKLOADS = {"discrete": ("TagGridWorld", discrete_tag_config), "continuous": ("TagContinuous", continuous_tag_config)}


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workload", choices=sorted(WORKLOADS), default="discrete")
    parser.add_argument("--envs", type=int, default=2000)
    parser.add_argument("--agents", type=int, default=1000)
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--backend", default="auto")
    args = parser.parse_args(argv)
    env_name, config = WORKLOADS[args.workload]
    wrapper = EnvWrapper(env_name, args.envs, backend=args.backend, seed=0, env_config=config(args.agents))
    actions = torch.from_numpy(random_actions(wrapper, np.random.default_rng(0))).to(wrapper.actions.device)
    sync = wrapper.backend.synchronize
    started = None
    for step in range(args.steps):
        if step == 1:  # the first loop pays for first-touch work
            sync()
            started = time.perf_counter()
        wrapper.actions.copy_(actions)
        wrapper.step_all_envs()
        wrapper.reset_only_done_envs()
    sync()
    if started is not None:
        per_loop = (time.perf_counter() - started) / (args.steps - 1)
        print(f"{env_name} {args.envs} envs x {wrapper.num_agents} agents on {wrapper.backend.name}: "
              f"{per_loop * 1e6:,.1f} us per loop, {args.envs / per_loop:,.0f} env steps/s")


if __name__ == "__main__":
    main()
