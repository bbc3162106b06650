"""PandemicEconomy training acceptance: do both policies learn, beat fixed baselines, and close when infected?

    python -m benchmarks.pandemic_training [--seeds 3] [--steps N] [--eval-envs 20] [--runs DIR] [--reuse]
        [--out DIR]

The pandemic issue's training acceptance on the CPU config ``pandemic_economy``
(51 synthetic regions + 1 planner, 20 envs, 540-day episodes; a systems
benchmark, not a policy model: see the env's docstring):

1. **Training.** ``--seeds`` runs (seeds 0 .. N-1), each ``warp-drive train
   --config pandemic_economy --set trainer.seed=S [trainer.total_steps=N]
   saving.basedir=RUNS --run-name seed_S --no-evaluate --no-progress`` in a
   child process, one after another (wall-clock per run reported). ``--steps``
   overrides ``trainer.total_steps`` (default: the config's, 1,080,000).
   ``--reuse`` keeps a run directory that already holds a finished run of the
   same seed and steps (its wall-clock then comes from its files' times).
2. **Rise.** Per group (``regions``, ``planner``), from each run's
   ``metrics.csv`` column ``charts/episodic_return/<group>`` (the mean
   per-agent return of the episodes that ended since the previous log row;
   rows where none ended have an empty cell and are skipped): the mean of the
   first 10% and of the last 10% of the non-empty rows (``max(1, n // 10)``
   rows each). Across seeds: the mean rise (last - first) and the **seed
   spread = sample standard deviation (ddof 1) of the per-seed last-10% means**
   (max - min of them is printed too). Pass: mean rise > 2 x spread.
3. **Baselines.** Each run's latest checkpoint plays one episode in each of
   ``--eval-envs`` envs (default 20) of the run's env config, deterministic
   (greedy) trained actions, and the returns are compared as mean per-agent
   episode returns per group (rewards summed over the 540 steps):

   * ``trained``: both policies greedy (the learned regions and planner);
   * ``regions random``: regions draw uniformly from their 11 actions every
     step (torch generator seeded by the run's seed; during a region's
     cooldown the env ignores the action, as it does the policy's), planner
     greedy-trained;
   * ``regions all-open``: regions always action 0 (keep level 1), planner
     greedy-trained;
   * ``regions all-closed``: regions set level 10 at step 1, then action 0
     (keep), planner greedy-trained;
   * ``planner subsidy 0`` / ``planner subsidy 20``: the planner's action is
     fixed at 0 / 20 (no / maximum subsidy), regions greedy-trained.

   Pass (means over seeds): trained regions > regions random, and trained
   regions > the worse of all-open / all-closed (beats at least one); the
   trained planner matches the better of subsidy 0 / subsidy 20: it is not
   below it by more than the sample std over seeds of its own return (the
   seeds' noise; the note gives the strict comparison too).
4. **Correlation.** Over the ``trained`` greedy episodes, the Pearson
   correlation between a region's stringency level (1..10, after the step) and
   its infected share (``infected``, after the step) pooled over all (env,
   region, step) samples of a seed; also the mean over regions of per-region
   correlations over time (regions whose level never changes are left out).
   Pass: the pooled correlation averaged over seeds > 0.

Writes ``pandemic_training.csv`` (the acceptance table),
``pandemic_training_rise.csv`` (per seed and group) and
``pandemic_training_eval.csv`` (per seed, scenario and group).
"""

from __future__ import annotations

import argparse
import csv
import math
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import torch

from benchmarks.common import machine_description, print_table, results_dir_set_to, write_csv

CONFIG = "pandemic_economy"
GROUPS = ("regions", "planner")
SCENARIOS = {  # name -> (regions controller, planner controller)
    "trained": ("trained", "trained"),
    "regions random": ("random", "trained"),
    "regions all-open": ("open", "trained"),
    "regions all-closed": ("closed", "trained"),
    "planner subsidy 0": ("trained", "subsidy 0"),
    "planner subsidy max": ("trained", "subsidy max"),
}


# ---------------------------------------------------------------- training
def run_child(command: list[str], log: Path) -> float:
    """Run ``command`` with its output in ``log``; its wall-clock in seconds (a failure shows the log's tail)."""
    started = time.perf_counter()
    with log.open("w") as handle:
        code = subprocess.call(command, stdout=handle, stderr=subprocess.STDOUT)
    if code:
        tail = "\n".join(log.read_text(errors="replace").splitlines()[-30:])
        raise SystemExit(f"{' '.join(command)} failed ({code}); the end of {log}:\n{tail}")
    return time.perf_counter() - started


def metrics_rows(run_dir: Path) -> list[dict]:
    with (run_dir / "metrics.csv").open(newline="") as handle:
        return list(csv.DictReader(handle))


def finished_run(run_dir: Path, seed: int, steps: int | None) -> bool:
    """Whether ``run_dir`` holds a finished run of ``seed`` (and ``steps``, None: the config's)."""
    from warp_drive.training.runs.config_file import saved_config

    if not (run_dir / "config.yaml").is_file() or not (run_dir / "metrics.csv").is_file():
        return False
    trainer = saved_config(run_dir)["trainer"]
    if int(trainer["seed"]) != seed or (steps is not None and int(trainer["total_steps"]) != steps):
        return False
    batch = int(trainer["num_envs"]) * int(trainer["rollout_length"])
    rows = metrics_rows(run_dir)
    return bool(rows) and int(float(rows[-1]["global_step"])) >= (int(trainer["total_steps"]) // batch) * batch


def train_seeds(args, runs: Path) -> tuple[list[Path], list[float]]:
    """Train (or, with ``--reuse``, find) one run per seed; their directories and wall-clock seconds."""
    run_dirs, walls = [], []
    for seed in range(args.seeds):
        run_dir = runs / CONFIG / "experiment" / f"seed_{seed}"
        if args.reuse and finished_run(run_dir, seed, args.steps):
            wall = (run_dir / "metrics.csv").stat().st_mtime - (run_dir / "config.yaml").stat().st_mtime
            print(f"seed {seed}: reusing the finished run {run_dir} (about {wall:.0f} s by its files' times)",
                  flush=True)
        else:
            steps = [] if args.steps is None else [f"trainer.total_steps={args.steps}"]
            command = [sys.executable, "-m", "warp_drive", "train", "--config", CONFIG, "--set",
                       f"trainer.seed={seed}", *steps, f"saving.basedir={runs}", "--run-name", f"seed_{seed}",
                       "--no-evaluate", "--no-progress"]
            print(f"seed {seed}: training ({args.steps or 'the config’s'} env steps) -> {run_dir}", flush=True)
            wall = run_child(command, runs / f"{CONFIG}_seed_{seed}.log")
            print(f"  {wall:.0f} s", flush=True)
        run_dirs.append(run_dir)
        walls.append(wall)
    return run_dirs, walls


# ---------------------------------------------------------------- rise
def rise_of(run_dir: Path, group: str) -> dict:
    column = f"charts/episodic_return/{group}"
    logged = [(int(float(r["global_step"])), float(r[column])) for r in metrics_rows(run_dir)
              if r.get(column) not in (None, "")]
    logged = [(s, v) for s, v in logged if math.isfinite(v)]
    if not logged:
        raise SystemExit(f"{run_dir / 'metrics.csv'}: no {column} values (did an episode end?)")
    k = max(1, len(logged) // 10)
    first, last = logged[:k], logged[-k:]
    return {"rows logged": len(logged), "rows per 10%": k,
            "first rows (global_step)": f"{first[0][0]}-{first[-1][0]}",
            "last rows (global_step)": f"{last[0][0]}-{last[-1][0]}",
            "first 10%": statistics.fmean(v for _, v in first), "last 10%": statistics.fmean(v for _, v in last)}


# ---------------------------------------------------------------- evaluation
def load_trainer(run_dir: Path, num_envs: int):
    from warp_drive.training.runs.checkpoint import load_checkpoint
    from warp_drive.training.config import RunConfig
    from warp_drive.training.run import build
    from warp_drive.training.runs.config_file import saved_config

    raw = saved_config(run_dir)
    raw["trainer"]["num_envs"] = int(num_envs)
    raw["trainer"]["total_steps"] = max(int(raw["trainer"]["total_steps"]), num_envs * raw["trainer"]["rollout_length"])
    trainer = build(RunConfig.from_dict(raw))
    state = load_checkpoint(run_dir)
    for tag, p in trainer.policies.items():
        p.model.load_state_dict(state["models"][tag])
        p.model.eval()
    return trainer, int(state["env_steps"]), int(raw["trainer"]["seed"])


@torch.no_grad()
def play(trainer, regions: str, planner: str, generator: torch.Generator, record: bool = False) -> dict:
    """One episode in every env with the given controllers; mean per-agent returns per group (and, with
    ``record``, the (steps, envs, regions) levels and infected shares after each step)."""
    from warp_drive.training.policies import policy_obs, policy_rewards, write_env_actions

    env = trainer.env
    dm = env.data_manager
    controllers = {"regions": regions, "planner": planner}
    policies = trainer.policies
    E = env.num_envs
    num_levels = int(env.env.num_levels)
    num_subsidies = int(env.env.num_subsidy_levels)
    env.reset_all_envs()
    trainer.algorithm.restart()
    returns = {tag: torch.zeros((E, len(p.agent_ids)), dtype=torch.float64) for tag, p in policies.items()}
    levels, infected, subsidy = [], [], []
    finished = torch.zeros(E, dtype=torch.bool)
    for step in range(env.episode_length):
        for tag, p in policies.items():
            how, n = controllers[tag], len(p.agent_ids)
            if how == "trained":
                trainer.algorithm.act(p, policy_obs(env, p), greedy=True)
                continue
            if how == "random":
                actions = torch.randint(0, num_levels + 1, (E * n,), generator=generator)
            elif how == "open":
                actions = torch.zeros(E * n, dtype=torch.long)
            elif how == "closed":
                actions = torch.full((E * n,), num_levels if step == 0 else 0, dtype=torch.long)
            elif how == "subsidy 0":
                actions = torch.zeros(E * n, dtype=torch.long)
            elif how == "subsidy max":
                actions = torch.full((E * n,), num_subsidies, dtype=torch.long)
            else:
                raise ValueError(how)
            write_env_actions(env, p, actions.to(trainer.device))
        env.step_all_envs()
        active = (~finished).unsqueeze(1)
        for tag, p in policies.items():
            returns[tag] += policy_rewards(env, p).double().cpu() * active
        if record:
            env.backend.synchronize()
            levels.append(dm.data_on_device_via_torch("level").cpu().numpy().copy())
            infected.append(dm.data_on_device_via_torch("infected").cpu().numpy().copy())
            subsidy.append(dm.data_on_device_via_torch("subsidy_level").cpu().numpy().copy())
        finished |= (env.done > 0).cpu()
        if bool(finished.all()):
            break
    env.reset_all_envs()
    per_env = {tag: r.mean(dim=1).numpy() for tag, r in returns.items()}  # each env's mean over its agents
    out = {"mean": {tag: float(v.mean()) for tag, v in per_env.items()},
           "env std": {tag: float(v.std()) for tag, v in per_env.items()}, "steps": step + 1}
    if record:
        out["level"], out["infected"], out["subsidy"] = np.stack(levels), np.stack(infected), np.stack(subsidy)
        period = int(env.env.subsidy_period)  # the levels the planner set at its decisions (t = 1, P + 1, ...), env 0
        out["subsidy decisions"] = " ".join(str(int(v)) for v in out["subsidy"][::period, 0])
    return out


def correlations(level: np.ndarray, infected: np.ndarray) -> dict:
    """Pooled Pearson over every (step, env, region) sample and the mean of per-region ones (over steps and envs)."""
    x, y = level.astype(np.float64), infected.astype(np.float64)
    pooled = float(np.corrcoef(x.ravel(), y.ravel())[0, 1]) if x.std() > 0 and y.std() > 0 else float("nan")
    per_region = []
    for s in range(x.shape[-1]):
        xs, ys = x[..., s].ravel(), y[..., s].ravel()
        if xs.std() > 0 and ys.std() > 0:
            per_region.append(float(np.corrcoef(xs, ys)[0, 1]))
    return {"pooled": pooled, "per-region mean": statistics.fmean(per_region) if per_region else float("nan"),
            "regions that changed level": len(per_region), "mean level": float(x.mean()),
            "level changes per region": float((np.diff(x, axis=0) != 0).sum() / (x.shape[1] * x.shape[2]))}


def evaluate_run(run_dir: Path, num_envs: int) -> dict:
    trainer, env_steps, seed = load_trainer(run_dir, num_envs)
    generator = torch.Generator().manual_seed(seed)
    results = {}
    for name, (regions, planner) in SCENARIOS.items():
        results[name] = play(trainer, regions, planner, generator, record=name == "trained")
    return {"env_steps": env_steps, "scenarios": results,
            "correlation": correlations(results["trained"]["level"], results["trained"]["infected"])}


# ---------------------------------------------------------------- main
def spread(values: list[float]) -> tuple[float, float]:
    """(sample std, max - min) of ``values`` (std 0 for a single value)."""
    return (statistics.stdev(values) if len(values) > 1 else 0.0), max(values) - min(values)


def main(argv=None) -> list[dict]:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.pandemic_training",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=3, help="training runs, seeds 0..N-1 (default 3)")
    parser.add_argument("--steps", type=int, default=None, help="env steps per run (default: the config's)")
    parser.add_argument("--eval-envs", type=int, default=20, help="envs (one episode each) per evaluation")
    parser.add_argument("--runs", default="/tmp/pandemic_training",
                        help="saving.basedir of the runs (default /tmp/pandemic_training)")
    parser.add_argument("--reuse", action="store_true", help="keep finished runs of the same seed and steps")
    parser.add_argument("--out", default=None, help="directory for the CSVs (default benchmarks/results)")
    args = parser.parse_args(argv)
    if args.seeds < 1:
        parser.error("--seeds must be >= 1")
    runs = Path(args.runs).resolve()
    runs.mkdir(parents=True, exist_ok=True)
    torch.set_num_threads(1)

    run_dirs, walls = train_seeds(args, runs)

    # Rise per group.
    rise_rows, acceptance = [], []
    for group in GROUPS:
        per_seed = [rise_of(d, group) for d in run_dirs]
        for seed, (r, wall) in enumerate(zip(per_seed, walls)):
            rise_rows.append({"group": group, "seed": seed, **r, "rise": r["last 10%"] - r["first 10%"],
                              "train wall s": round(wall, 1)})
        rises = [r["last 10%"] - r["first 10%"] for r in per_seed]
        std, rng = spread([r["last 10%"] for r in per_seed])
        mean_rise = statistics.fmean(rises)
        acceptance.append({"criterion": f"{group} return rises", "value": mean_rise,
                           "reference": 2 * std, "test": "mean rise > 2 x std of last-10% means",
                           "pass": "PASS" if mean_rise > 2 * std else "FAIL",
                           "note": f"first {statistics.fmean(r['first 10%'] for r in per_seed):.2f} -> last "
                                   f"{statistics.fmean(r['last 10%'] for r in per_seed):.2f}; std {std:.2f}, "
                                   f"max-min {rng:.2f} (x2 {'passes' if mean_rise > 2 * rng else 'fails'})"})

    # Evaluation against fixed baselines.
    eval_rows, evaluations = [], []
    for seed, run_dir in enumerate(run_dirs):
        started = time.perf_counter()
        ev = evaluate_run(run_dir, args.eval_envs)
        evaluations.append(ev)
        print(f"seed {seed}: evaluated {len(SCENARIOS)} scenarios x {args.eval_envs} envs in "
              f"{time.perf_counter() - started:.0f} s", flush=True)
        for name, res in ev["scenarios"].items():
            regions, planner = SCENARIOS[name]
            eval_rows.append({"seed": seed, "checkpoint env steps": ev["env_steps"], "scenario": name,
                              "regions": regions, "planner": planner,
                              "regions return": res["mean"]["regions"], "planner return": res["mean"]["planner"],
                              "regions env std": res["env std"]["regions"],
                              "planner env std": res["env std"]["planner"], "steps": res["steps"]})
            if name == "trained":
                c = ev["correlation"]
                eval_rows[-1].update({"mean level": c["mean level"],
                                      "level changes/region": c["level changes per region"],
                                      "subsidy at decisions (env 0)": res["subsidy decisions"]})

    def mean_over_seeds(scenario: str, group: str) -> float:
        return statistics.fmean(ev["scenarios"][scenario]["mean"][group] for ev in evaluations)

    summary = []
    for name, (regions, planner) in SCENARIOS.items():
        values = {g: [ev["scenarios"][name]["mean"][g] for ev in evaluations] for g in GROUPS}
        summary.append({"scenario": name, "regions": regions, "planner": planner,
                        "regions return": statistics.fmean(values["regions"]),
                        "regions seed std": spread(values["regions"])[0],
                        "planner return": statistics.fmean(values["planner"]),
                        "planner seed std": spread(values["planner"])[0]})
    trained_r, trained_p = mean_over_seeds("trained", "regions"), mean_over_seeds("trained", "planner")
    random_r = mean_over_seeds("regions random", "regions")
    open_r, closed_r = mean_over_seeds("regions all-open", "regions"), mean_over_seeds("regions all-closed", "regions")
    p0, pmax = mean_over_seeds("planner subsidy 0", "planner"), mean_over_seeds("planner subsidy max", "planner")
    per_seed_note = lambda key: ", ".join(f"{ev['scenarios'][key[0]]['mean'][key[1]]:.1f}" for ev in evaluations)
    acceptance.append({"criterion": "regions beat uniform-random", "value": trained_r, "reference": random_r,
                       "test": "trained > random (regions return, planner trained)",
                       "pass": "PASS" if trained_r > random_r else "FAIL",
                       "note": f"per seed trained {per_seed_note(('trained', 'regions'))}; "
                               f"random {per_seed_note(('regions random', 'regions'))}"})
    worse = min(open_r, closed_r)
    beats = "both" if trained_r > max(open_r, closed_r) else "one" if trained_r > worse else "none"
    acceptance.append({"criterion": "regions beat all-open or all-closed", "value": trained_r, "reference": worse,
                       "test": "trained > min(all-open, all-closed)",
                       "pass": "PASS" if trained_r > worse else "FAIL",
                       "note": f"all-open {open_r:.2f}, all-closed {closed_r:.2f}; beats {beats}"})
    better = max(p0, pmax)
    # "Matches": not below the better fixed policy by more than the trained planner's own seed spread. Where the
    # subsidy barely moves the planner's return (the default scale), a strict >= is a coin toss at the 0.1% level.
    noise, _ = spread([ev["scenarios"]["trained"]["mean"]["planner"] for ev in evaluations])
    strict = "above" if trained_p >= better else f"{better - trained_p:.2f} below"
    acceptance.append({"criterion": "planner matches better fixed subsidy", "value": trained_p,
                       "reference": better - noise,
                       "test": "trained >= max(subsidy 0, subsidy 20) - seed std of trained (regions trained)",
                       "pass": "PASS" if trained_p >= better - noise else "FAIL",
                       "note": f"subsidy 0 {p0:.2f}, subsidy 20 {pmax:.2f}; trained {strict} the better one, seed std "
                               f"{noise:.2f}; per seed trained {per_seed_note(('trained', 'planner'))}"})
    pooled = [ev["correlation"]["pooled"] for ev in evaluations]
    per_region = [ev["correlation"]["per-region mean"] for ev in evaluations]
    mean_pooled = statistics.fmean(pooled)
    undefined = "undefined where the greedy regions never change level; " if math.isnan(mean_pooled) else ""
    acceptance.append({"criterion": "stringency ~ infected share", "value": mean_pooled, "reference": 0.0,
                       "test": "pooled Pearson (env, region, step) > 0, mean over seeds",
                       "pass": "PASS" if mean_pooled > 0 else "FAIL",
                       "note": undefined + "per seed pooled " + ", ".join(f"{c:.3f}" for c in pooled)
                               + "; per-region mean " + ", ".join(f"{c:.3f}" for c in per_region)
                               + "; level changes/region " + ", ".join(
                                   f"{ev['correlation']['level changes per region']:.2f}" for ev in evaluations)})

    steps = args.steps or "config default"
    print_table(f"Training returns per seed (metrics.csv charts/episodic_return/<group>; first/last 10% of "
                f"logged rows), {steps} env steps", rise_rows)
    print_table(f"Greedy evaluation, mean per-agent episode return ({args.eval_envs} envs x 1 episode per seed), "
                f"per seed", eval_rows)
    print_table(f"Greedy evaluation, mean over {len(run_dirs)} seeds", summary)
    print_table(f"PandemicEconomy training acceptance ({len(run_dirs)} seeds, {steps} env steps, "
                f"wall-clock per run {', '.join(f'{w:.0f}' for w in walls)} s) on {machine_description()}",
                acceptance)
    with results_dir_set_to(args.out):
        for name, rows in (("pandemic_training", acceptance), ("pandemic_training_rise", rise_rows),
                           ("pandemic_training_eval", eval_rows)):
            print(f"wrote {write_csv(name, rows)}")
    return acceptance


if __name__ == "__main__":
    main()
