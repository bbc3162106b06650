"""Learning on simple_spread (N = L = 3): our IPPO and MAPPO against JaxMARL's ``ippo_ff_mpe``, same machine.

    python -m benchmarks.learning_simple_spread [--seeds 5] [--steps 3000000] [--episodes 100]
        [--only ours|jaxmarl] [--jaxmarl-python /tmp/jaxmarl-venv/bin/python]
        [--jaxmarl-baselines JAXMARL_CHECKOUT] [--runs DIR] [--out DIR]

The multi-agent issue's learning acceptance: with ``--steps`` env steps per run
(3M), each variant trains ``--seeds`` seeds (5), then plays ``--episodes`` (100)
episodes per seed with greedy actions; the score of an episode is the team's
return (the rewards of the 3 agents summed over the episode's 25 steps; random
play scores about -79 so, and -82.7 over JaxMARL's 26-step episodes). A
variant's IQM over all its episodes and the 95% bootstrap CI over seeds
(``warp_drive.training.evaluation``) must reach

* IQM >= -65, and
* IQM >= JaxMARL ``ippo_ff_mpe``'s IQM minus the half-width of its CI.

Ours: the shipped configs ``simple_spread_ippo`` and ``simple_spread_mappo``
(``trainer.total_steps`` set to ``--steps``), each seed trained by ``warp-drive
train`` in a child process and evaluated by ``warp-drive evaluate --json``.

JaxMARL: its baseline script ``baselines/IPPO/ippo_ff_mpe.py`` is not in the pip
package, so ``--jaxmarl-baselines`` names a JaxMARL checkout (or its
``baselines`` folder). A driver run by ``--jaxmarl-python`` (a side venv with
jaxmarl and distrax) imports that script (hydra, wandb and omegaconf stubbed:
only its ``main`` uses them), calls ``make_train`` with the config of
``config/ippo_ff_mpe.yaml`` but ``TOTAL_TIMESTEPS`` = ``--steps``, ``ENV_NAME`` =
``MPE_simple_spread_v3`` and ``NUM_SEEDS`` = ``--seeds`` (vmapped over seeds, as
the script does), then plays the greedy (``pi.mode()``) policy of each seed in
JaxMARL's own env. JaxMARL's episodes have 26 transitions (``done`` is tested
before the step counter is incremented); the team return scored is the sum over
the first 25, as ours, and the full 26-step return is reported beside it, as is
the last training return JaxMARL logs (``returned_episode_returns``, scaled by
N per agent by ``MPELogWrapper`` and averaged over agents: the team sum, with
sampled actions). Per-seed wall-clock of JaxMARL is its vmapped total / seeds.
Without the side venv or the checkout, JaxMARL is skipped with a note on how to
get them. Writes ``learning_simple_spread.csv``.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.common import machine_description, print_table, results_dir_set_to, write_csv
from warp_drive.training.evaluation import summarize

TARGET = -65.0
OURS = {"ours IPPO": "simple_spread_ippo", "ours MAPPO": "simple_spread_mappo"}
JAXMARL = "JaxMARL ippo_ff_mpe"
INSTALL_HINT = """\
JaxMARL skipped: {why}.
To run it, make a side venv with JaxMARL and get JaxMARL's baselines (not part of the pip package):
    python -m venv /tmp/jaxmarl-venv && /tmp/jaxmarl-venv/bin/pip install jaxmarl distrax
    git clone https://github.com/FLAIROx/JaxMARL /tmp/JaxMARL
    python -m benchmarks.learning_simple_spread --jaxmarl-baselines /tmp/JaxMARL
"""

# Run by the side venv's python: argv = baselines dir, output JSON, steps, seeds, episodes.
DRIVER = r'''
import importlib.util, json, sys, time, types
import jax, jax.experimental, jax.numpy as jnp, yaml
import jaxmarl
baselines, out_path, steps, seeds, episodes = sys.argv[1], sys.argv[2], *map(int, sys.argv[3:6])
for name in ("hydra", "wandb", "omegaconf"):  # only the script's main() uses them
    stub = sys.modules[name] = types.ModuleType(name)
    stub.main, stub.log, stub.OmegaConf = (lambda *a, **k: (lambda f: f)), (lambda *a, **k: None), None
spec = importlib.util.spec_from_file_location("ippo_ff_mpe", f"{baselines}/IPPO/ippo_ff_mpe.py")
script = importlib.util.module_from_spec(spec)
spec.loader.exec_module(script)

def number(v):  # PyYAML reads 1e7 and 2.5e-4 (no dot) as strings, OmegaConf (hydra) as floats
    try:
        return float(v) if isinstance(v, str) and v.strip() else v
    except ValueError:
        return v

config = {k: number(v) for k, v in yaml.safe_load(open(f"{baselines}/IPPO/config/ippo_ff_mpe.yaml")).items()}
config.update(TOTAL_TIMESTEPS=steps, ENV_NAME="MPE_simple_spread_v3", NUM_SEEDS=seeds)
train = jax.jit(script.make_train(config))  # as the script's main()
started = time.perf_counter()
out = jax.block_until_ready(jax.vmap(train)(jax.random.split(jax.random.PRNGKey(config["SEED"]), seeds)))
train_s = time.perf_counter() - started

env = jaxmarl.make(config["ENV_NAME"], **config["ENV_KWARGS"])
network = script.ActorCritic(env.action_space(env.agents[0]).n, activation=config["ACTIVATION"])

def episode(params, key):  # greedy; step_env: no auto-reset, so the done step is seen
    obs, state = env.reset(key)
    def step(carry, key):
        obs, state = carry
        pi, _ = network.apply(params, jnp.stack([obs[a] for a in env.agents]))
        action = pi.mode()
        obs, state, reward, done, _ = env.step_env(key, state, {a: action[i] for i, a in enumerate(env.agents)})
        return (obs, state), (sum(reward[a] for a in env.agents), done["__all__"])
    _, (team, done) = jax.lax.scan(step, (obs, state), jax.random.split(key, env.max_steps + 1))
    return team, done

started = time.perf_counter()
keys = jax.random.split(jax.random.PRNGKey(12345), (seeds, episodes))
params = out["runner_state"][0].params
team, done = jax.block_until_ready(jax.vmap(jax.vmap(episode, (None, 0)), (0, 0))(params, keys))
assert bool(done[..., -1].all()) and not bool(done[..., :-1].any()), "episodes must end on their last step"
eval_s = time.perf_counter() - started
json.dump({"returns_25": team[..., :25].sum(-1).tolist(), "returns_full": team.sum(-1).tolist(),
           "steps_per_episode": int(team.shape[-1]), "train_s": train_s, "eval_s": eval_s,
           "env_steps": config["NUM_UPDATES"] * config["NUM_STEPS"] * config["NUM_ENVS"],
           "final_training_return": out["metrics"]["returned_episode_returns"][:, -1].tolist(),
           "jax": jax.__version__, "jaxmarl": getattr(jaxmarl, "__version__", "?")}, open(out_path, "w"))
'''


def run_child(command: list[str], log: Path) -> float:
    """Run ``command`` with its output in ``log``; its wall-clock in seconds (a failure shows the log's tail)."""
    started = time.perf_counter()
    with log.open("w") as handle:
        code = subprocess.call(command, stdout=handle, stderr=subprocess.STDOUT)
    if code:
        tail = "\n".join(log.read_text(errors="replace").splitlines()[-30:])
        raise SystemExit(f"{' '.join(command)} failed ({code}); the end of {log}:\n{tail}")
    return time.perf_counter() - started


def run_ours(label: str, config: str, args, runs: Path) -> dict:
    """Train ``--seeds`` seeds of ``config`` one after another, then evaluate them greedily."""
    warp_drive = [sys.executable, "-m", "warp_drive"]
    train_s, run_dirs = [], []
    for seed in range(args.seeds):
        run_dir = runs / config / "experiment" / f"seed_{seed}"
        print(f"{label}: training seed {seed} ({args.steps:,} env steps) -> {run_dir}", flush=True)
        train_s.append(run_child([*warp_drive, "train", "--config", config, "--set", f"trainer.seed={seed}",
                                  f"trainer.total_steps={args.steps}", f"saving.basedir={runs}",
                                  "--run-name", f"seed_{seed}", "--no-evaluate", "--no-progress"],
                                 runs / f"{config}_seed_{seed}.log"))
        print(f"  {train_s[-1]:.0f} s", flush=True)
        run_dirs.append(str(run_dir))
    scores = runs / f"{config}_eval.json"
    eval_s = run_child([*warp_drive, "evaluate", *run_dirs, "--episodes", str(args.episodes), "--json", str(scores)],
                       runs / f"{config}_eval.log")
    tasks = json.loads(scores.read_text())["SimpleSpread"]  # task "shared[<env settings>]", algorithm: the config
    (task,) = [name for name in tasks if name.split("[")[0] == "shared"]
    block = tasks[task][config]
    returns = [block[f"run_{i}"]["absolute_metrics"]["return"] for i in range(args.seeds)]
    return {"returns": returns, "train_s": train_s, "eval_s": eval_s,
            "env_steps": block["run_0"]["step_0"]["step_count"]}  # whole iterations: a little under --steps


def find_baselines(path: str | None) -> Path | None:
    """The ``baselines`` folder of a JaxMARL checkout given as the checkout or that folder."""
    for candidate in ([Path(path), Path(path) / "baselines"] if path else []):
        if (candidate / "IPPO" / "ippo_ff_mpe.py").is_file():
            return candidate
    return None


def run_jaxmarl(args, runs: Path) -> dict | None:
    baselines = find_baselines(args.jaxmarl_baselines)
    why = (f"no python at {args.jaxmarl_python}" if not Path(args.jaxmarl_python).is_file()
           else "no --jaxmarl-baselines given" if not args.jaxmarl_baselines
           else f"{args.jaxmarl_baselines} has no (baselines/)IPPO/ippo_ff_mpe.py" if baselines is None else None)
    if why:
        print(INSTALL_HINT.format(why=why))
        return None
    driver, result = runs / "jaxmarl_driver.py", runs / "jaxmarl.json"
    driver.write_text(DRIVER)
    print(f"{JAXMARL}: training {args.seeds} seeds (vmapped, {args.steps:,} env steps each) with "
          f"{args.jaxmarl_python}", flush=True)
    wall_s = run_child([args.jaxmarl_python, str(driver), str(baselines), str(result), str(args.steps),
                        str(args.seeds), str(args.episodes)], runs / "jaxmarl.log")
    data = json.loads(result.read_text())
    print(f"  {wall_s:.0f} s (jax {data['jax']}, jaxmarl {data['jaxmarl']})", flush=True)
    return {"returns": data["returns_25"], "train_s": [data["train_s"] / args.seeds] * args.seeds,
            "eval_s": data["eval_s"], "env_steps": data["env_steps"], "wall_s": wall_s, "extra": data}


def table_row(label: str, result: dict, reference: float | None) -> dict:
    s = summarize({f"seed_{i}": r for i, r in enumerate(result["returns"])})
    per_seed = [sum(r) / len(r) for r in result["returns"]]
    train_total = sum(result["train_s"])
    row = {"variant": label, "env steps/run": result["env_steps"], "seeds": s["runs"], "episodes": s["episodes"],
           "IQM": round(s["iqm"], 2), "95% CI": f"[{s['ci_low']:.2f}, {s['ci_high']:.2f}]",
           "CI half-width": round((s["ci_high"] - s["ci_low"]) / 2, 2), "mean": round(s["mean"], 2),
           "per-seed mean": " ".join(f"{v:.1f}" for v in per_seed),
           "train s/run": " ".join(f"{v:.0f}" for v in result["train_s"]),
           "train s total": round(train_total, 1), "eval s": round(result["eval_s"], 1),
           f"IQM >= {TARGET:g}": "pass" if s["iqm"] >= TARGET else "FAIL"}
    row["IQM >= JaxMARL IQM - half-width"] = ("n/a" if reference is None
                                              else "pass" if s["iqm"] >= reference else "FAIL")
    return row


def main(argv=None) -> list[dict]:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.learning_simple_spread",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=5, help="training seeds per variant (default 5)")
    parser.add_argument("--steps", type=int, default=3_000_000, help="env steps per run (default 3,000,000)")
    parser.add_argument("--episodes", type=int, default=100, help="greedy episodes per seed (default 100)")
    parser.add_argument("--only", choices=("ours", "jaxmarl"), default=None, help="run one side only")
    parser.add_argument("--jaxmarl-python", default="/tmp/jaxmarl-venv/bin/python",
                        help="python of a side venv with jaxmarl and distrax (default /tmp/jaxmarl-venv/bin/python)")
    parser.add_argument("--jaxmarl-baselines", default=None, help="a JaxMARL checkout, or its baselines/ folder")
    parser.add_argument("--runs", default=None, help="folder for run directories and logs (default: a new temp dir)")
    parser.add_argument("--out", default=None, help="directory for learning_simple_spread.csv "
                                                    "(default benchmarks/results)")
    args = parser.parse_args(argv)
    runs = Path(args.runs or tempfile.mkdtemp(prefix="learning_simple_spread_")).resolve()
    runs.mkdir(parents=True, exist_ok=True)
    print(f"runs and logs: {runs}", flush=True)

    started = time.perf_counter()
    results = {}
    if args.only != "jaxmarl":
        for label, config in OURS.items():
            results[label] = run_ours(label, config, args, runs)
    if args.only != "ours":
        jaxmarl = run_jaxmarl(args, runs)
        if jaxmarl is not None:
            results[JAXMARL] = jaxmarl

    if not results:
        print("nothing ran")
        return []
    reference = None
    if JAXMARL in results:
        j = summarize({f"seed_{i}": r for i, r in enumerate(results[JAXMARL]["returns"])})
        reference = j["iqm"] - (j["ci_high"] - j["ci_low"]) / 2
    rows = [table_row(label, result, reference) for label, result in results.items()]
    for row in rows:
        if row["variant"] == JAXMARL:
            row["IQM >= JaxMARL IQM - half-width"] = "(reference)"
    print_table(f"simple_spread N = L = 3, greedy team return over 25 steps (random play about -79; "
                f"-82.7 over JaxMARL's 26), "
                f"on {machine_description()}", rows)
    if JAXMARL in results:
        extra = results[JAXMARL]["extra"]
        full = summarize({f"seed_{i}": r for i, r in enumerate(extra["returns_full"])})
        print(f"\nJaxMARL bar for ours: IQM - CI half-width = {reference:.2f}")
        print(f"JaxMARL, its full {extra['steps_per_episode']}-step episodes: IQM {full['iqm']:.2f} "
              f"[{full['ci_low']:.2f}, {full['ci_high']:.2f}]; its last logged training return per seed "
              f"(sampled actions): {' '.join(f'{v:.1f}' for v in extra['final_training_return'])}")
        print(f"JaxMARL wall-clock: {results[JAXMARL]['wall_s']:.0f} s in all (process start; training "
              f"{extra['train_s']:.0f} s for all seeds vmapped, jit compilation included; "
              f"evaluation {extra['eval_s']:.0f} s)")
    print(f"\nbenchmark wall-clock: {time.perf_counter() - started:.0f} s")
    with results_dir_set_to(args.out):
        print(f"wrote {write_csv('learning_simple_spread', rows)}")
    return rows


if __name__ == "__main__":
    main()
