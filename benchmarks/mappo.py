"""What a centralised critic costs: training env steps/s of MAPPO against independent PPO, side by side.

    python -m benchmarks.mappo [--quick] [--backends cpu,pycuda] [--envs N] [--rounds R] [--out DIR]

TagContinuous with 2 taggers and 3 runners (5 agents), both policies training,
in ``--envs`` environments (default 2000): the same config with
``critic_input`` ``local`` (IPPO), ``state`` (the env's state arrays) and
``concat_obs`` (the policy's agents' observations side by side). Each round
runs every variant in turn, so drifts of the machine's speed hit them alike;
the table gives each variant's median over the rounds and its ratio to IPPO's
(the multi-agent issue's target: MAPPO >= 0.7x IPPO). Writes ``mappo.csv``.
"""

from __future__ import annotations

import argparse
import statistics

from benchmarks.common import backend_names, machine_description, print_table, results_dir_set_to, write_csv
from benchmarks.training import throughput
from warp_drive.runtime.backends import resolve_backend_name

VARIANTS = ("local", "state", "concat_obs")
TAG_5_AGENTS = ["env.config.num_taggers=2", "env.config.num_runners=3", "policy.runner.to_train=true"]


def variant_overrides(critic_input: str) -> list[str]:
    return [*TAG_5_AGENTS, f"policy.tagger.critic_input={critic_input}", f"policy.runner.critic_input={critic_input}"]


def main(argv=None) -> list[dict]:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.mappo", description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer envs, iterations and rounds")
    parser.add_argument("--backends", default=None, help="comma-separated executors (default: cpu, and pycuda "
                                                         "when a GPU is usable)")
    parser.add_argument("--envs", type=int, default=None, help="environments (default 2000; --quick 200)")
    parser.add_argument("--rounds", type=int, default=None, help="rounds of all variants (default 3; --quick 1)")
    parser.add_argument("--out", default=None, help="directory for mappo.csv (default benchmarks/results)")
    args = parser.parse_args(argv)
    envs = args.envs or (200 if args.quick else 2000)
    rounds = args.rounds or (1 if args.quick else 3)
    iterations = 2 if args.quick else 4
    rows = []
    for backend in backend_names(args.backends):
        backend = resolve_backend_name(backend)
        rates: dict[str, list[float]] = {v: [] for v in VARIANTS}
        for _ in range(rounds):
            for variant in VARIANTS:
                result = throughput("tag_continuous_small", envs, backend, iterations, variant_overrides(variant))
                rates[variant].append(result["env steps/s"])
        ippo = statistics.median(rates["local"])
        for variant in VARIANTS:
            median = statistics.median(rates[variant])
            rows.append({"workload": "TagContinuous 2 taggers + 3 runners, PPO", "backend": backend, "envs": envs,
                         "critic_input": variant, "env steps/s (median)": round(median, 1),
                         "rounds": rounds, "x IPPO": round(median / ippo, 3),
                         "target": "" if variant == "local" else ">= 0.7x IPPO"})
    print_table(f"MAPPO vs IPPO, training env steps/s on {machine_description()}", rows)
    with results_dir_set_to(args.out):
        print(f"wrote {write_csv('mappo', rows)}")
    return rows


if __name__ == "__main__":
    main()
