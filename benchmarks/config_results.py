"""What every shipped config reaches within its own budget, and the check that says so.

    python -m benchmarks.config_results [--configs acrobot,pendulum] [--seeds 5] [--first-seed 1] [--out DIR]

``CLAIMS`` states, for every config ``warp-drive configs`` lists, the result
the README promises (``tests/project/test_config_results.py`` fails when a
config has none, or when the README's table and this one differ). A claim is
checked either here or by the benchmark or test it names (CartPole's time to
solved: ``benchmarks/learning.py``; SimpleSpread's return against JaxMARL:
``benchmarks/learning_simple_spread.py``; ...). Here, for each of its seeds, the
shipped config trains as ``warp-drive train`` runs it (cpu executor unless the
claim needs a GPU) and then plays 100 episodes, one per env:

* ``at_least``: the trained policy's mean return over them reaches the bar;
* ``rise``: it beats the untrained policy's (the same 100 episodes' count,
  before training) by at least that much.

The return is the mean per agent of the claim's policy, or its team return
(summed over its agents, JaxMARL's number) where the claim says ``team``.

Greedy (most likely actions) or sampled, as the claim says. A claim holds
when every seed meets it. Writes ``config_results.csv`` (one row per config
and seed) into ``benchmarks/results/`` (or ``--out``).
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from benchmarks.common import machine_description, print_table, results_dir_set_to, write_csv

EPISODES = 100
HERE = "benchmarks/config_results.py"


@dataclass(frozen=True)
class Claim:
    """A config's stated result. ``checked_by`` is this script (``HERE``) or the benchmark/test that checks it."""

    config: str
    result: str
    checked_by: str = HERE
    policy: str = "shared"
    greedy: bool = True
    at_least: float | None = None
    rise: float | None = None
    team: bool = False  # score the team return (summed over the policy's agents), not the mean per agent
    gpu: bool = False  # sized for a GPU: checked by a GPU run of checked_by


CLAIMS = [
    Claim("cartpole", "solved (rolling 20 training episodes and a greedy 100-episode evaluation >= 475), every seed, "
          "median 5.9 s from launch", "benchmarks/learning.py"),
    Claim("acrobot", "greedy return >= -150 (random play -500; Gymnasium's 'solved' bar is -100)", at_least=-150.0),
    Claim("mountain_car", "greedy return rises >= 20 above the untrained policy's (about -200)", rise=20.0),
    Claim("continuous_mountain_car", "greedy return >= 80 (the flag reached)", at_least=80.0),
    Claim("continuous_mountain_car_ddpg", "greedy return >= 80 (the flag reached)", at_least=80.0),
    Claim("pendulum", "greedy return >= -250 (swung up and balanced; random play about -1200)", at_least=-250.0),
    Claim("pendulum_ddpg", "greedy return >= -400 within 25.6k env steps (about -150 at 38.4k)",
          "tests/learning/test_learning.py, benchmarks/ddpg.py"),
    Claim("dummy_env", "greedy return rises >= 10 above the untrained policy's", rise=10.0),
    Claim("tag_gridworld", "the taggers' sampled return rises >= 1 above the untrained policy's", policy="tagger",
          greedy=False, rise=1.0),
    Claim("tag_continuous", "the taggers' sampled return rises >= 20 above the untrained policy's (50: every "
          "runner tagged)", policy="tagger", greedy=False, rise=20.0),
    Claim("tag_continuous_small", "the taggers' sampled return rises from about 1.0 to about 1.9 (make train)",
          "tests/learning/test_learning.py (taggers learn to tag), benchmarks/learning.py --config "
          "tag_continuous_small"),
    Claim("simple_spread_ippo", "team return IQM -33 over 5 seeds x 100 greedy episodes (random play -79; "
          "JaxMARL's IPPO -61.5 at the same steps)", "benchmarks/learning_simple_spread.py"),
    Claim("simple_spread_mappo", "team return IQM -41 over 5 seeds x 100 greedy episodes (random play -79)",
          "benchmarks/learning_simple_spread.py"),
    Claim("simple_spread_mappo_gru", "greedy team return >= -60 (random play -79)", at_least=-60.0, team=True),
    Claim("pandemic_economy", "the regions' and the planner's returns rise, 3 seeds (see the README's "
          "PandemicEconomy section)", "benchmarks/pandemic_training.py"),
    Claim("pandemic_economy_paper", "the paper's shape, for a GPU: its env steps 341 k/s at 60 envs on one H200; "
          "its training speed on a GPU is not measured yet", "benchmarks/envs.py", gpu=True),
]
BY_CONFIG = {claim.config: claim for claim in CLAIMS}


def mean_return(trainer, claim: Claim) -> float:
    """The untrained policy's score: as ``score`` below, on the trainer's envs."""
    played = trainer.run_episodes(greedy=claim.greedy)
    return float(played["returns"][claim.policy].sum(axis=1).mean()) if claim.team \
        else played["mean_return"][claim.policy]


def score(result: dict, claim: Claim) -> float:
    """The claim's number from ``run.evaluate``'s result: the mean return per agent, or the team return."""
    team = result["team_returns"][claim.policy]
    return sum(team) / len(team) if claim.team else result["mean_return"][claim.policy]


def check(claim: Claim, seed: int, basedir: Path) -> dict:
    """Train ``claim.config`` at ``seed`` as the CLI would, then score it against the claim."""
    from warp_drive.training.config import load_config
    from warp_drive.training.run import build, evaluate, train

    backend = "pycuda" if claim.gpu else "cpu"
    config = load_config(claim.config, [f"trainer.seed={seed}", f"trainer.backend={backend}",
                                        f"saving.basedir={basedir}"])
    before = None
    if claim.rise is not None:  # the untrained policy (the model the run starts from: same seed) on 100 envs
        before = mean_return(build(load_config(claim.config, [f"trainer.seed={seed}", f"trainer.backend={backend}",
                                                              f"trainer.num_envs={EPISODES}",
                                                              f"trainer.total_steps={10 ** 9}"])), claim)
    started = time.perf_counter()
    run_dir = train(config, progress=False, evaluate=False)
    seconds = time.perf_counter() - started
    result = evaluate(str(run_dir), episodes=EPISODES, greedy=claim.greedy)
    after = score(result, claim)
    met = (claim.at_least is None or after >= claim.at_least) and (claim.rise is None or after - before >= claim.rise)
    return {"config": claim.config, "seed": seed, "env steps": result["env_steps"], "train seconds": seconds,
            "before": before, "after": after, "met": met}


def main(argv=None) -> list[dict]:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--configs", default=None, help="comma-separated (default: every claim this script checks)")
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--first-seed", type=int, default=1)
    parser.add_argument("--out", default=None, help="folder for the CSV (default: benchmarks/results/)")
    args = parser.parse_args(argv)
    from warp_drive.runtime.backends import gpu_available

    names = args.configs.split(",") if args.configs else [c.config for c in CLAIMS if c.checked_by == HERE]
    unknown = [n for n in names if n not in BY_CONFIG]
    if unknown:
        raise SystemExit(f"--configs: no claim for {unknown}; configs with one: {sorted(BY_CONFIG)}")
    rows, summary = [], []
    with tempfile.TemporaryDirectory() as tmp:
        for name in names:
            claim = BY_CONFIG[name]
            if claim.checked_by != HERE:
                print(f"{name}: checked by {claim.checked_by}, not here")
                continue
            if claim.gpu and not gpu_available():
                print(f"{name}: needs a GPU (pycuda); skipped")
                continue
            runs = []
            for seed in range(args.first_seed, args.first_seed + args.seeds):
                runs.append(check(claim, seed, Path(tmp) / name))
                print(runs[-1], flush=True)
            rows += runs
            summary.append({"config": name, "claim": claim.result, "met": f"{sum(r['met'] for r in runs)}/{len(runs)}",
                            "after (median)": statistics.median(r["after"] for r in runs),
                            "train seconds (median)": statistics.median(r["train seconds"] for r in runs)})
    print_table(f"Shipped configs against their stated results, {EPISODES} episodes each, on {machine_description()}",
                summary)
    with results_dir_set_to(args.out):
        print(f"\nwrote {write_csv('config_results', rows)}")
    return rows


if __name__ == "__main__":
    main()
