"""The WarpDrive paper's throughput workloads, named as the paper ran them.

    python -m benchmarks.paper [--quick] [--backends cpu,pycuda] [--out DIR]

The paper (Lan et al., arXiv 2108.13976; JMLR 23(316), 2022) measured env
steps/s on one A100 for:

* "paper: discrete Tag 2000 envs × 1000 agents": TagGridWorld with partial
  observations, 999 taggers + 1 runner (TagGridWorld counts its single runner
  as an agent, N = num_taggers + 1), on the original run config's grid
  (``grid_length`` 100, 101 x 101 cells), 100-step episodes, fixed starts as in
  the original. Paper: 2.9 M env steps/s.
* "paper: discrete Tag N envs × 5 agents": the same game with 4 taggers + 1
  runner (the original run config) for N = 1 .. 2000, actions copied in;
  and at 2000 envs "rollout with sampling": the actions drawn by the sampler
  kernel each step, as in a rollout. Paper: 8.3 M env steps/s at 2000 envs
  with sampling and resets.
* "paper: continuous Tag 1 env × N agents": TagContinuous with partial
  observations of the K = min(10, N - 1) nearest agents, N = 5 .. 820, a tenth
  of them taggers (the original run config's 10 taggers : 100 runners), on the
  original's 20 x 20 field with 500-step episodes, acceleration and turn tables
  of 20 levels. One start state drawn once (``random_starts=False``), as the
  original replayed one snapshot at every reset.

Each row: the kernel's env steps/s per executor (step + on-device reset of
done envs, as in ``benchmarks.envs``), agent steps/s, the NumPy reference one
replica at a time and vectorised over the replicas, and where there is one
the paper's figure and this project's GPU target. The targets are for the
``pycuda`` executor on a GPU ("target met" says so only on those rows); on the
``cpu`` executor they are context, not a goal.

``--quick`` shrinks the 2000-env × 1000-agent workload to 500 envs (the label
says so) and times each point for less long. Writes ``paper.csv`` into
``benchmarks/results/`` (or ``--out``).
"""

from __future__ import annotations

import argparse

from benchmarks.common import backend_names, machine_description, print_table, results_dir_set_to, write_csv
from benchmarks.envs import measure_workload

ENV_SWEEP = (1, 10, 100, 1000, 2000)
AGENT_SWEEP = (5, 10, 50, 100, 250, 500, 820)
QUICK_BIG_ENVS = 500

# The paper's A100 figures and this project's GPU targets, env steps/s.
PAPER_2000x1000, TARGET_2000x1000 = 2_900_000, 20_000_000
PAPER_2000x5, TARGET_2000x5 = 8_300_000, 30_000_000


def discrete_tag_config(num_agents: int) -> dict:
    """TagGridWorld as the paper ran it: ``num_agents - 1`` taggers chase one runner."""
    return {"num_taggers": num_agents - 1, "grid_length": 100, "episode_length": 100,
            "use_full_observation": False}


def continuous_tag_config(num_agents: int) -> dict:
    """TagContinuous on the original run config's field, a tenth of the agents taggers."""
    taggers = max(1, num_agents // 10)
    return {"num_taggers": taggers, "num_runners": num_agents - taggers, "grid_length": 20.0,
            "episode_length": 500, "max_acceleration": 0.1, "min_acceleration": -0.1,
            "max_turn": 2.356, "min_turn": -2.356, "num_acceleration_levels": 20, "num_turn_levels": 20,
            "use_full_observation": False, "num_other_agents_observed": min(10, num_agents - 1),
            "tagging_distance": 0.02, "random_starts": False, "seed": 274880}


def workloads(quick: bool, smoke: bool = False) -> list[tuple]:
    """(label, env name, config, num_envs, paper figure, GPU target, sampled) for every point.

    ``sampled``: the step draws its actions with the sampler kernel, as a
    rollout does (the paper's 8.3 M at 2000 x 5 counts sampling and resets).
    ``smoke`` (tests only) keeps the workloads' shapes at toy sizes.
    """
    big_envs, big_agents = (2, 20) if smoke else ((QUICK_BIG_ENVS if quick else 2000), 1000)
    env_sweep = (1, 2, 4) if smoke else ENV_SWEEP
    agent_sweep = (5, 10) if smoke else AGENT_SWEEP
    big_label = "paper: discrete Tag 2000 envs × 1000 agents"
    if smoke:
        big_label += f" (smoke: {big_envs} envs × {big_agents} agents)"
    elif quick:
        big_label += f" (quick: {big_envs} envs)"
    points = [(big_label, "TagGridWorld", discrete_tag_config(big_agents), big_envs,
               PAPER_2000x1000, TARGET_2000x1000, False)]
    for num_envs in env_sweep:
        points.append(("paper: discrete Tag N envs × 5 agents", "TagGridWorld", discrete_tag_config(5), num_envs,
                       None, None, False))
    rollout_envs = env_sweep[-1]
    points.append((f"paper: discrete Tag {rollout_envs} envs × 5 agents, rollout with sampling", "TagGridWorld",
                   discrete_tag_config(5), rollout_envs, PAPER_2000x5, TARGET_2000x5, True))
    for num_agents in agent_sweep:
        points.append(("paper: continuous Tag 1 env × N agents", "TagContinuous", continuous_tag_config(num_agents),
                       1, None, None, False))
    return points


def target_met(row: dict, target: float | None) -> str:
    """'yes' / 'no' on GPU rows with a target; the cpu executor's rows are not held to GPU targets."""
    if target is None:
        return ""
    if row["backend"] == "cpu":
        return "GPU target"
    return "yes" if row["env steps/s"] >= target else "no"


def main(argv=None) -> list[dict]:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="500 envs instead of 2000 at 1000 agents; shorter timing")
    parser.add_argument("--backends", default=None, help="comma-separated; default: cpu, plus pycuda with a GPU")
    parser.add_argument("--out", default=None, help="folder for the CSV (default: benchmarks/results/)")
    parser.add_argument("--smoke", action="store_true", help=argparse.SUPPRESS)  # toy sizes, for the tests
    args = parser.parse_args(argv)
    names = backend_names(args.backends)
    seconds = 0.02 if args.smoke else 0.25 if args.quick else 1.0
    rows = []
    for label, env_name, config, num_envs, paper, target, sampled in workloads(args.quick, args.smoke):
        extra = {"paper (A100) env steps/s": paper if paper is not None else "",
                 "target (GPU) env steps/s": f">= {target:,}" if target is not None else ""}
        for row in measure_workload(label, env_name, config, num_envs, names, seconds, extra, sampled=sampled):
            row["target met"] = target_met(row, target)
            rows.append(row)
    print_table(f"The WarpDrive paper's workloads on {machine_description()}", rows)
    with results_dir_set_to(args.out):
        print(f"\nwrote {write_csv('paper', rows)}")
    return rows


if __name__ == "__main__":
    main()
