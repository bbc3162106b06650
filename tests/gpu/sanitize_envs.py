"""Drive env kernels briefly, for compute-sanitizer on a GPU.

    compute-sanitizer --tool memcheck python tests/gpu/sanitize_envs.py --backend pycuda --target tag_continuous
    python tests/gpu/sanitize_envs.py --list-targets

Not a test (pytest does not collect it): a small workload whose kernels
memcheck, initcheck, racecheck and synccheck watch. ``--target`` (repeatable)
picks what runs, at sizes small enough that each tool finishes in seconds:

* ``tag_continuous``: a small TagContinuous (2 taggers, 5 runners, partial
  observations of 2 neighbours), a few steps with resets of done envs;
* ``tag_gridworld``: a small TagGridWorld (4 taggers, random starts), the same;
* ``cooperative``: a DummyEnv of 200 agents in 4 blocks per env, so that its
  step is a cooperative launch and ``wd_sync_env()`` is the grid-wide barrier.
  On an executor that runs an env as one block (the cpu executors) it runs in
  one block per env and says so; on a GPU executor it fails unless the step
  really was launched cooperatively over several blocks.

Without ``--target`` it drives every built-in env, the cooperative DummyEnv and
(unless ``--no-training``) two training iterations of two run configs, as the
README's sanitizer runs did. Each target prints ``target NAME: begin`` and one
result line; the last line is ``sanitizer driver: done``. It runs on the cpu
executor too, so it is kept working here (``tests/runtime/test_sanitizer_driver.py``,
``tests/project/test_gpu_checklist.py``).
"""

from __future__ import annotations

import argparse
import sys
import time

import numpy as np

# (env, num_envs, env_config, blocks_per_env) of each selectable target. Episodes
# of 4 steps, so that the default 6 steps also reset done envs.
TARGETS = {
    "tag_continuous": ("TagContinuous", 3, {"num_taggers": 2, "num_runners": 5, "use_full_observation": False,
                                             "num_other_agents_observed": 2, "episode_length": 4}, None),
    "tag_gridworld": ("TagGridWorld", 3, {"num_taggers": 4, "grid_length": 8, "random_starts": True,
                                           "episode_length": 4}, None),
    "cooperative": ("DummyEnv", 2, {"num_agents": 200, "episode_length": 4}, 4),
}
TRAINING_CONFIGS = ("tag_continuous_small", "cartpole")


def all_env_workloads():
    """Every built-in env at its defaults (a few replicas), then the cooperative DummyEnv."""
    from warp_drive.env.registry import BUILTIN_ENVS

    return [(name, 3, {}, None) for name in BUILTIN_ENVS] + [("DummyEnv", 2, {"num_agents": 200}, 4)]


def drive_env(name: str, num_envs: int, config: dict, blocks_per_env, backend: str, steps: int,
              require_cooperative: bool = False) -> str:
    import torch

    from warp_drive.runtime.backends import get_backend
    from warp_drive.env.consistency import random_action_arrays
    from warp_drive.env.wrapper import EnvWrapper

    executor = get_backend(backend)
    note = ""
    if blocks_per_env is not None and executor.capabilities.max_blocks_per_env == 1:
        # the cpu executors run an env as one block (no grid-wide barrier)
        note = f" (the {executor.name} executor runs an env as one block: no cooperative launch)"
        blocks_per_env = None
    wrapper = EnvWrapper(name, num_envs, backend=executor, seed=0, env_config=config, blocks_per_env=blocks_per_env,
                         reset_pool_size=4)
    step = wrapper._step  # the bound step launch: its geometry and whether it is cooperative
    grid, block = getattr(step, "grid", None), getattr(step, "block", None)
    cooperative = bool(getattr(step, "cooperative", wrapper.blocks_per_env > 1))
    if require_cooperative and not note and not (cooperative and wrapper.blocks_per_env > 1):
        raise SystemExit(f"{name}: asked for {blocks_per_env} blocks per env on {executor.name}, but the step launch "
                         f"is grid={grid} block={block} cooperative={cooperative}: the cooperative path did not run")
    rng = np.random.default_rng(0)
    device = wrapper.data_manager.data_on_device_via_torch
    for _ in range(steps):
        for array, actions in random_action_arrays(wrapper, rng).items():  # the shared array, groups' own
            device(array).copy_(torch.from_numpy(actions).to(device(array).device))
        wrapper.step_all_envs()
        wrapper.reset_only_done_envs()
    wrapper.backend.synchronize()
    launch = f", grid={tuple(grid)} block={tuple(block)}" if grid is not None and block is not None else ""
    kind = ", cooperative launch" if cooperative else ""
    return (f"{name}: {num_envs} envs x {wrapper.num_agents} agents, {wrapper.blocks_per_env} block(s) per env"
            f"{launch}{kind}, {steps} steps{note}")


def drive_training(config_name: str, backend: str) -> str:
    from warp_drive.training.config import load_config
    from warp_drive.training.run import build

    cfg = load_config(config_name, ["trainer.num_envs=4", f"trainer.backend={backend}", "trainer.rollout_length=4",
                                    "trainer.total_steps=64"])
    trainer = build(cfg)
    trainer.iterate()
    trainer.iterate()
    return f"training {config_name}: 2 iterations"


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--backend", default="auto", help="executor: auto, cpu, cpu-gpu or pycuda")
    parser.add_argument("--target", action="append", choices=sorted(TARGETS), default=None,
                        help="run only this target (repeatable); without it: every built-in env and training")
    parser.add_argument("--steps", type=int, default=6, help="env steps per env (default 6)")
    parser.add_argument("--no-training", action="store_true", help="env kernels only (no torch kernels)")
    parser.add_argument("--list-targets", action="store_true", help="print the target names and exit")
    args = parser.parse_args(argv)
    if args.steps < 1:
        parser.error("--steps must be at least 1")
    return args


def main(argv=None) -> int:
    args = parse_args(argv)
    if args.list_targets:
        print("\n".join(TARGETS))
        return 0
    if args.target:
        for target in dict.fromkeys(args.target):  # in the order given, once each
            print(f"target {target}: begin", flush=True)
            started = time.perf_counter()
            name, num_envs, config, blocks = TARGETS[target]
            line = drive_env(name, num_envs, config, blocks, backend=args.backend, steps=args.steps,
                             require_cooperative=blocks is not None)
            print(f"target {target}: {line} ({time.perf_counter() - started:.1f} s)", flush=True)
    else:
        for workload in all_env_workloads():
            started = time.perf_counter()
            print(drive_env(*workload, backend=args.backend, steps=args.steps),
                  f"({time.perf_counter() - started:.1f} s)", flush=True)
        if not args.no_training:
            for config_name in TRAINING_CONFIGS:
                print(drive_training(config_name, args.backend), flush=True)
    print("sanitizer driver: done")
    return 0


if __name__ == "__main__":
    sys.exit(main())
