"""Drive every example env's kernels briefly, for compute-sanitizer on a GPU.

    compute-sanitizer --tool memcheck python tests/gpu/sanitize_envs.py [--backend pycuda]

Not a test (pytest does not collect it): a small workload that launches each
built-in env's step and reset kernels, the sampler, and a cooperative launch
(an env whose agents span several blocks), so that memcheck, racecheck,
synccheck and initcheck see every kernel the example envs use. It runs on the
cpu executor too, so it is kept working here; ``tests/runtime/test_sanitizer_driver.py``
runs it that way.
"""

from __future__ import annotations

import argparse
import sys
import time

import numpy as np

from warp_drive.backends import get_backend
from warp_drive.consistency import random_action_arrays
from warp_drive.wrapper import EnvWrapper
from warp_drive.registry import BUILTIN_ENVS

# (env, num_envs, env_config, blocks_per_env): a few replicas each; the last
# row spreads one env's agents over several blocks (a cooperative launch
# through wd_sync_env).
WORKLOADS = [(name, 3, {}, None) for name in BUILTIN_ENVS] + [
    ("DummyEnv", 2, {"num_agents": 200}, 4),
]
TRAINING_CONFIGS = ("tag_continuous_small", "cartpole")


def drive_env(name: str, num_envs: int, config: dict, blocks_per_env, backend: str, steps: int) -> str:
    if blocks_per_env is not None and get_backend(backend).name == "cpu":
        blocks_per_env = None  # the cpu executor runs an env as one block (no grid-wide barrier)
    wrapper = EnvWrapper(name, num_envs, backend=backend, seed=0, env_config=config, blocks_per_env=blocks_per_env,
                         reset_pool_size=4)
    rng = np.random.default_rng(0)
    import torch

    device = wrapper.data_manager.data_on_device_via_torch
    for _ in range(steps):
        for array, actions in random_action_arrays(wrapper, rng).items():  # the shared array, groups' own
            device(array).copy_(torch.from_numpy(actions).to(device(array).device))
        wrapper.step_all_envs()
        wrapper.reset_only_done_envs()
    wrapper.backend.synchronize()
    return f"{name}: {num_envs} envs x {wrapper.num_agents} agents, {wrapper.blocks_per_env} block(s) per env"


def drive_training(config_name: str, backend: str) -> str:
    from warp_drive.training.config import load_config
    from warp_drive.training.run import build

    cfg = load_config(config_name, ["trainer.num_envs=4", f"trainer.backend={backend}", "trainer.rollout_length=4",
                                    "trainer.total_steps=64"])
    trainer = build(cfg)
    trainer.iterate()
    trainer.iterate()
    return f"training {config_name}: 2 iterations"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--backend", default="auto")
    parser.add_argument("--steps", type=int, default=6)
    parser.add_argument("--no-training", action="store_true", help="env kernels only (no torch kernels)")
    args = parser.parse_args(argv)
    for workload in WORKLOADS:
        started = time.perf_counter()
        print(drive_env(*workload, backend=args.backend, steps=args.steps), f"({time.perf_counter() - started:.1f} s)",
              flush=True)
    if not args.no_training:
        for config_name in TRAINING_CONFIGS:
            print(drive_training(config_name, args.backend), flush=True)
    print("sanitizer driver: done")
    return 0


if __name__ == "__main__":
    sys.exit(main())
