"""End-to-end demo of the runtime (what ``make train`` runs until the trainer lands).

Pushes a small multi-agent env's arrays once, then loops entirely through
kernels: sample actions on the device, step every env with one launch, reset
the envs that are done, and log one env's trajectory. It prints what it did.

    python -m warp_drive.env.demo [--envs 1000] [--agents 32] [--steps 2000] [--backend auto]
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np
import torch

from warp_drive.runtime.data_feed import DataFeed
from warp_drive.runtime.data_manager import DataManager
from warp_drive.runtime.function_manager import FunctionManager
from warp_drive.services.log import LogController
from warp_drive.services.reset import EnvironmentReset
from warp_drive.services.sampler import Sampler

WALK_SOURCE = Path(__file__).resolve().parents[1] / "cuda" / "demo" / "walk.cu"
STEP_ARGS = ["positions", "sampled_actions", "rewards", "reached", "_done_", "_timestep_", "n_agents",
             "ring_size", "goal", "episode_length"]


def run(num_envs: int, num_agents: int, steps: int, backend: str = "auto", seed: int = 0) -> dict:
    episode_length, ring_size = 50, 16
    rng = np.random.default_rng(seed)
    dm = DataManager(num_envs, num_agents, episode_length, backend=backend)
    feed = DataFeed()
    start = rng.integers(0, ring_size, size=(num_envs, num_agents), dtype=np.int32)
    feed.add_data("positions", start, save_copy_and_apply_at_reset=True, log_data_across_episode=True)
    feed.add_data("reached", np.zeros((num_envs, num_agents), np.int32), save_copy_and_apply_at_reset=True)
    feed.add_data("rewards", np.zeros((num_envs, num_agents), np.float32), log_data_across_episode=True)
    feed.add_data("sampled_actions", np.ones((num_envs, num_agents), np.int32))
    feed.add_data("ring_size", ring_size)
    feed.add_data("goal", 0)
    dm.push_data_to_device(feed)

    fm = FunctionManager(num_envs, num_agents, backend=dm.backend)
    fm.compile_and_load(WALK_SOURCE)
    step = fm.bind("WalkStep", [dm.device_data(name) for name in STEP_ARGS])
    sampler = Sampler(fm, seed=seed)
    sampler.register_actions(dm, "sampled_actions", 3)
    resetter = EnvironmentReset(fm, seed=seed)
    logger = LogController(fm)

    # A biased random policy: mostly "step right", so agents reach the goal.
    probs = torch.tensor([0.2, 0.2, 0.6], device=dm.device).expand(num_envs, num_agents, 3).contiguous()
    rewards = dm.data_on_device_via_torch("rewards")
    done = dm.data_on_device_via_torch("_done_")

    resetter.reset_when_done(dm, mode="force_reset")
    logger.reset_log(dm, env_id=0)
    episode_return = torch.zeros(num_envs, device=dm.device)
    finished_returns, terminated, truncated = [], 0, 0
    logging_env0 = True
    started = time.perf_counter()
    for _ in range(steps):
        sampler.sample(dm, probs, "sampled_actions")
        step()
        episode_return += rewards.sum(dim=1)
        if logging_env0:  # follow env 0 through its first episode only
            logger.update_log(dm, int(dm.data_on_device_via_torch("_timestep_")[0]))
            logging_env0 = int(done[0]) == 0
        ended = done > 0
        terminated += int((done == 1).sum())
        truncated += int((done == 2).sum())
        finished_returns.append(episode_return[ended].clone())
        episode_return[ended] = 0.0
        resetter.reset_when_done(dm)
    dm.backend.synchronize()
    elapsed = time.perf_counter() - started
    returns = torch.cat(finished_returns)
    log = logger.fetch_log(dm, ["positions"])["positions_for_log"]
    return {
        "backend": dm.backend.name,
        "envs": num_envs,
        "agents": num_agents,
        "steps": steps,
        "seconds": elapsed,
        "env_steps_per_s": num_envs * steps / elapsed,
        "episodes": int(returns.numel()),
        "terminated": terminated,
        "truncated": truncated,
        "mean_return": float(returns.mean()) if returns.numel() else float("nan"),
        "env0_positions_agent0": log[:, 0].tolist(),
    }


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--envs", type=int, default=1000)
    parser.add_argument("--agents", type=int, default=32)
    parser.add_argument("--steps", type=int, default=2000)
    parser.add_argument("--backend", default="auto", choices=["auto", "cpu", "pycuda"])
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    print(f"warp_drive runtime demo: {args.envs} envs x {args.agents} agents, {args.steps} steps "
          f"(backend {args.backend})")
    r = run(args.envs, args.agents, args.steps, args.backend, args.seed)
    print(f"  backend:            {r['backend']}")
    print(f"  throughput:         {r['env_steps_per_s']:,.0f} env steps/s "
          f"({r['env_steps_per_s'] * r['agents']:,.0f} agent steps/s) over {r['seconds']:.2f} s")
    print(f"  episodes finished:  {r['episodes']} ({r['terminated']} terminated: all agents at the goal; "
          f"{r['truncated']} truncated at the time limit)")
    print(f"  mean episode return (summed over agents): {r['mean_return']:.2f}")
    trail = r["env0_positions_agent0"]
    print(f"  env 0, agent 0 positions over its first logged episode: {trail[:20]}{' ...' if len(trail) > 20 else ''}")
    print("Sampling, stepping, resets and logging all ran as kernels; torch only summed rewards and done flags for this summary.")


if __name__ == "__main__":
    main()
