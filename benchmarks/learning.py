"""Time to a solved CartPole: ``warp-drive train --config cartpole`` against SB3's and CleanRL's PPO, same machine.

    python -m benchmarks.learning [--seeds 5] [--first-seed 1] [--only ours|sb3|cleanrl]
        [--sb3-python /tmp/sb3-venv/bin/python] [--cleanrl-python /tmp/cleanrl-venv/bin/python]
        [--cleanrl-ppo /tmp/cleanrl/cleanrl/ppo.py] [--runs DIR] [--out DIR] [--set KEY=VALUE ...]

One rule for everyone (the issue's): a run is **solved** at the first moment the
mean return of its most recent training episodes (20 or more) reaches 475, and
only if its greedy policy then averages >= 475 over 100 episodes. Reported per
run: env steps and wall seconds **from the process's launch** (imports, env and
model construction included) to that moment, the greedy score, and the whole
command's wall time. Medians over ``--seeds`` seeds (1 .. N; ``--first-seed`` moves the range, e.g. to
check a tuning on seeds it was not tuned on).

* **Ours**: each seed is a child ``python -m warp_drive train --config cartpole
  --set trainer.seed=S`` (the shipped config, which stops itself once its
  training episodes reach 475 and a greedy evaluation of 100 episodes on envs of
  its own agrees: ``trainer.stop_at_return``, ``trainer.stop_eval_episodes``; that
  evaluation is on the clock). The solve moment is the launch -> first iteration
  time plus the training time the summary prints; the greedy score is
  ``warp_drive.training.run.evaluate`` of the run's final checkpoint, 100
  episodes on the run's own seed (outside the timed command).
* **SB3**: ``stable_baselines3.PPO("MlpPolicy", "CartPole-v1", seed=S)`` with its
  defaults (its CartPole-tuned zoo settings are not used: neither side is tuned
  per seed), run by the side venv's python (``--sb3-python``). A callback after
  every rollout checks the rolling rule on its Monitor episodes, then runs the
  greedy evaluation (not timed: the clock pauses for it) and stops when both
  hold; 1 M steps at most.

* **CleanRL**: its ``ppo.py`` (``--cleanrl-ppo``, a checkout's ``cleanrl/ppo.py``)
  as written, with its defaults (``--seed S --total-timesteps 1000000 --no-cuda``),
  by the side venv's python (``--cleanrl-python``). A script, not a library: the
  driver (``CLEANRL_DRIVER``) watches the episode returns it prints and plays the
  same greedy check with its live actor weights, clock paused, at most once per
  512 env steps (its rollout), and ends the script once both hold.

``--config pendulum`` or ``--config tag_continuous_small``: ours alone on that
shipped config, by the same rule at its ``OTHER_TARGETS`` target (passed to the
run as ``trainer.stop_at_return`` and ``trainer.stop_eval_episodes``).

Writes ``learning.csv`` and ``learning_runs.csv`` (``learning_<config>*.csv`` for another
config). The peers are never test dependencies; a peer whose venv (or script) is
missing is skipped with a message:
    python -m venv /tmp/sb3-venv && /tmp/sb3-venv/bin/pip install torch==2.13.0 stable-baselines3 gymnasium
    git clone https://github.com/vwxyzjn/cleanrl /tmp/cleanrl && python -m venv /tmp/cleanrl-venv &&
        /tmp/cleanrl-venv/bin/pip install torch==2.13.0 gymnasium==0.29.1 tyro tensorboard "numpy<2"
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.common import machine_description, print_table, results_dir_set_to, write_csv

TARGET = 475.0
# Ours on other shipped configs (--config), by the same rule: (target, the policy whose return counts). The
# peers' drivers are CartPole's. Pendulum: swung up and balanced (random play about -1200); Tag: the taggers'
# return per agent halfway from the untrained policy's 1.0 to the 1.9 its budget ends at.
OTHER_TARGETS = {"pendulum": (-250.0, "shared"), "tag_continuous_small": (1.5, "tagger")}
ROLLING = 20
EVAL_EPISODES = 100

# Run by the SB3 side venv's python: argv = seed, output JSON path.
SB3_DRIVER = r'''
import json, os, sys, time
def age():  # seconds since this process was launched (Linux), as warp_drive.runtime.launch_clock does
    fields = open("/proc/self/stat", "rb").read().rsplit(b")", 1)[1].split()
    return float(open("/proc/uptime").read().split()[0]) - int(fields[19]) / os.sysconf("SC_CLK_TCK")
import gymnasium as gym
import numpy as np
from stable_baselines3 import PPO
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.evaluation import evaluate_policy
from stable_baselines3.common.monitor import Monitor
seed, out = int(sys.argv[1]), sys.argv[2]
TARGET, ROLLING, EPISODES = %(target)r, %(rolling)r, %(episodes)r
class Solved(BaseCallback):
    """After each rollout: the rolling rule on the Monitor's episodes, then the greedy check (clock paused)."""
    def __init__(self):
        super().__init__()
        self.paused, self.result, self.eval_env = 0.0, None, Monitor(gym.make("CartPole-v1"))
    def _on_step(self):
        return self.result is None
    def _on_rollout_end(self):
        episodes = [e["r"] for e in self.model.ep_info_buffer][-ROLLING:]
        if len(episodes) < ROLLING or np.mean(episodes) < TARGET:
            return
        at, steps = age() - self.paused, self.model.num_timesteps
        started = time.perf_counter()
        score, _ = evaluate_policy(self.model, self.eval_env, n_eval_episodes=EPISODES, deterministic=True)
        self.paused += time.perf_counter() - started
        if score >= TARGET:
            self.result = {"env steps": steps, "seconds from launch": at, "greedy": float(score)}
solved = Solved()
model = PPO("MlpPolicy", "CartPole-v1", seed=seed, verbose=0)
model.learn(total_timesteps=1_000_000, callback=solved)
json.dump({"solved": solved.result is not None, **(solved.result or {"env steps": model.num_timesteps}),
           "command seconds": age()}, open(out, "w"))
'''


# Run by the CleanRL side venv's python: argv = path of CleanRL's ppo.py, seed, output JSON path. ppo.py is a
# script, so it runs as written (runpy, its own defaults, CPU); the driver only watches: print() sees each
# "global_step=..., episodic_return=..." line the script prints, applies the rolling rule, and -- at most once
# per 512 env steps, its rollout size -- plays the greedy check with the live actor weights (CleanRL's Agent
# holds its critic's three layers, then its actor's: the optimizer's parameters 6..11), clock paused.
CLEANRL_DRIVER = r"""
import builtins, json, os, re, runpy, sys, time
def age():
    fields = open("/proc/self/stat", "rb").read().rsplit(b")", 1)[1].split()
    return float(open("/proc/uptime").read().split()[0]) - int(fields[19]) / os.sysconf("SC_CLK_TCK")
import gymnasium as gym
import numpy as np
import torch
path, seed, out = sys.argv[1], int(sys.argv[2]), sys.argv[3]
TARGET, ROLLING, EPISODES = %(target)r, %(rolling)r, %(episodes)r
params, returns = [], []
state = {"paused": 0.0, "checked": -10 ** 9, "result": None, "steps": 0}
class Solved(Exception):
    pass
class WatchedAdam(torch.optim.Adam):
    def __init__(self, parameters, *args, **kwargs):
        parameters = list(parameters)
        params.extend(parameters)
        super().__init__(parameters, *args, **kwargs)
torch.optim.Adam = WatchedAdam
def greedy_score():
    w = [p.detach() for p in params[6:12]]
    env, scores = gym.make("CartPole-v1"), []
    for episode in range(EPISODES):
        obs, _ = env.reset(seed=10_000 + episode)
        total, done = 0.0, False
        while not done:
            with torch.no_grad():
                h = torch.tanh(w[0] @ torch.as_tensor(obs, dtype=torch.float32) + w[1])
                h = torch.tanh(w[2] @ h + w[3])
                action = int((w[4] @ h + w[5]).argmax())
            obs, reward, terminated, truncated, _ = env.step(action)
            total, done = total + float(reward), terminated or truncated
        scores.append(total)
    return float(np.mean(scores))
real_print = builtins.print
def watching_print(*args, **kwargs):
    real_print(*args, **kwargs)
    line = re.match(r"global_step=(\d+), episodic_return=\[?([-\d.e+]+)", " ".join(map(str, args)))
    if line is None:
        return
    step = state["steps"] = int(line.group(1))
    returns.append(float(line.group(2)))
    if len(returns) < ROLLING or np.mean(returns[-ROLLING:]) < TARGET or step - state["checked"] < 512:
        return
    assert len(params) == 12, "not CleanRL's ppo.py Agent (critic, then actor: 3 layers each)"
    state["checked"], at, started = step, age() - state["paused"], time.perf_counter()
    score = greedy_score()
    state["paused"] += time.perf_counter() - started
    if score >= TARGET:
        state["result"] = {"env steps": step, "seconds from launch": at, "greedy": score}
        raise Solved
builtins.print = watching_print
sys.argv = [path, "--seed", str(seed), "--total-timesteps", "1000000", "--no-cuda"]
try:
    runpy.run_path(path, run_name="__main__")
except Solved:
    pass
json.dump({"solved": state["result"] is not None, **(state["result"] or {"env steps": state["steps"]}),
           "command seconds": age()}, open(out, "w"))
"""


def run_ours(seed: int, runs: Path, overrides: list[str] = (), config: str = "cartpole") -> dict:
    """One seed of ``warp-drive train --config <config>``; its solve moment and the final policy's greedy score.
    ``overrides``: more ``--set`` items (tuning experiments; the shipped cartpole config has none). Other configs
    get the rule as ``trainer.stop_at_return`` and ``trainer.stop_eval_episodes`` (OTHER_TARGETS)."""
    from warp_drive.training.run import evaluate

    target, policy = OTHER_TARGETS.get(config, (TARGET, "shared"))
    if config != "cartpole":
        overrides = [f"trainer.stop_at_return={target}", f"trainer.stop_eval_episodes={EVAL_EPISODES}", *overrides]
    started = time.perf_counter()
    out = subprocess.run([sys.executable, "-m", "warp_drive", "train", "--config", config, "--set",
                          f"trainer.seed={seed}", f"saving.basedir={runs}", *overrides, "--run-name", f"seed_{seed}",
                          "--no-progress"], capture_output=True, text=True)
    command = time.perf_counter() - started
    if out.returncode:
        raise SystemExit(f"warp-drive train (seed {seed}) failed:\n{out.stdout[-2000:]}\n{out.stderr[-2000:]}")
    text = out.stdout
    stopped = re.search(r"stopping early: after ([\d,]+) env steps", text)
    trained = re.search(r"in ([\d.]+) s \(", text)
    startup = re.search(r"first iteration ([\d.]+) s after launch", text)
    run_dir = Path(re.search(r"run directory: (.+)", text).group(1).strip())
    greedy = evaluate(str(run_dir), episodes=EVAL_EPISODES, greedy=True)["mean_return"][policy]
    solved = stopped is not None and greedy >= target
    return {"solved": solved, "env steps": int(stopped.group(1).replace(",", "")) if stopped else None,
            "seconds from launch": float(startup.group(1)) + float(trained.group(1)) if stopped else None,
            "greedy": greedy, "command seconds": command}


def run_sb3(seed: int, python: str) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        driver, out = Path(tmp) / "sb3_driver.py", Path(tmp) / "out.json"
        driver.write_text(SB3_DRIVER % {"target": TARGET, "rolling": ROLLING, "episodes": EVAL_EPISODES})
        done = subprocess.run([python, str(driver), str(seed), str(out)], capture_output=True, text=True)
        if done.returncode:
            raise SystemExit(f"the SB3 driver (seed {seed}) failed:\n{done.stderr[-2000:]}")
        return json.loads(out.read_text())


def run_cleanrl(seed: int, python: str, ppo: str) -> dict:
    with tempfile.TemporaryDirectory() as tmp:  # also its cwd: ppo.py writes runs/ (TensorBoard) there
        driver, out = Path(tmp) / "cleanrl_driver.py", Path(tmp) / "out.json"
        driver.write_text(CLEANRL_DRIVER % {"target": TARGET, "rolling": ROLLING, "episodes": EVAL_EPISODES})
        done = subprocess.run([python, str(driver), str(Path(ppo).resolve()), str(seed), str(out)], cwd=tmp,
                              capture_output=True, text=True)
        if done.returncode:
            raise SystemExit(f"the CleanRL driver (seed {seed}) failed:\n{done.stderr[-2000:]}")
        return json.loads(out.read_text())


def summary_row(name: str, results: list[dict]) -> dict:
    solved = [r for r in results if r["solved"]]
    median = (lambda key: statistics.median(r[key] for r in solved) if solved else float("nan"))
    return {"framework": name, "solved": f"{len(solved)}/{len(results)}",
            "median seconds from launch to solved": median("seconds from launch"),
            "median env steps to solved": median("env steps"),
            "median command seconds": statistics.median(r["command seconds"] for r in results),
            "greedy scores": " ".join(f"{r['greedy']:.0f}" if r.get("greedy") is not None else "-" for r in results)}


def main(argv=None) -> list[dict]:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--first-seed", type=int, default=1, help="seeds first-seed .. first-seed + seeds - 1")
    parser.add_argument("--only", choices=("ours", "sb3", "cleanrl"), default=None)
    parser.add_argument("--config", default="cartpole", choices=("cartpole", *OTHER_TARGETS),
                        help="ours on another shipped config, to its OTHER_TARGETS target (no peers: CartPole only)")
    parser.add_argument("--sb3-python", default="/tmp/sb3-venv/bin/python")
    parser.add_argument("--cleanrl-python", default="/tmp/cleanrl-venv/bin/python")
    parser.add_argument("--cleanrl-ppo", default="/tmp/cleanrl/cleanrl/ppo.py", help="CleanRL's ppo.py")
    parser.add_argument("--runs", default=None, help="saving.basedir of our runs (default: a temporary folder)")
    parser.add_argument("--out", default=None, help="folder for the CSV (default: benchmarks/results/)")
    parser.add_argument("--set", nargs="*", default=[], metavar="KEY=VALUE",
                        help="config overrides for our runs, as the CLI's --set (to try a tuning; labelled in the table)")
    args = parser.parse_args(argv)
    seeds = range(args.first_seed, args.first_seed + args.seeds)
    rows, per_run = [], []
    with tempfile.TemporaryDirectory() as tmp:
        runs = Path(args.runs or tmp)
        if args.only in (None, "ours"):
            results = []
            for seed in seeds:
                results.append(run_ours(seed, runs, args.set, args.config))
                per_run.append({"framework": "warp_drive", "seed": seed, **results[-1]})
                print(per_run[-1], flush=True)
            label = f"{args.config} config" + (f" with {' '.join(args.set)}" if args.set else "")
            rows.append(summary_row(f"warp_drive ({label})", results))
    peers = args.config == "cartpole"
    if peers and args.only in (None, "sb3"):
        if not Path(args.sb3_python).exists():
            print(f"SB3 skipped: no side venv at {args.sb3_python}. Make one with\n"
                  "    python -m venv /tmp/sb3-venv && /tmp/sb3-venv/bin/pip install torch stable-baselines3 "
                  "gymnasium\nor pass --sb3-python.")
        else:
            results = []
            for seed in seeds:
                results.append(run_sb3(seed, args.sb3_python))
                per_run.append({"framework": "sb3", "seed": seed, **results[-1]})
                print(per_run[-1], flush=True)
            rows.append(summary_row("Stable-Baselines3 PPO (defaults)", results))
    if peers and args.only in (None, "cleanrl"):
        missing = [path for path in (args.cleanrl_python, args.cleanrl_ppo) if not Path(path).exists()]
        if missing:
            print(f"CleanRL skipped: {' and '.join(missing)} not found. Get them with\n"
                  "    git clone https://github.com/vwxyzjn/cleanrl /tmp/cleanrl && python -m venv /tmp/cleanrl-venv "
                  "&& /tmp/cleanrl-venv/bin/pip install torch==2.13.0 gymnasium==0.29.1 tyro tensorboard 'numpy<2'\n"
                  "or pass --cleanrl-python and --cleanrl-ppo.")
        else:
            results = []
            for seed in seeds:
                results.append(run_cleanrl(seed, args.cleanrl_python, args.cleanrl_ppo))
                per_run.append({"framework": "cleanrl", "seed": seed, **results[-1]})
                print(per_run[-1], flush=True)
            rows.append(summary_row("CleanRL ppo.py (defaults)", results))
    target = OTHER_TARGETS.get(args.config, (TARGET,))[0]
    print_table(f"{args.config} to solved (rolling {ROLLING}+ training episodes >= {target:g}, greedy {EVAL_EPISODES} "
                f"episodes >= {target:g}) on {machine_description()}", rows)
    suffix = "" if args.config == "cartpole" else f"_{args.config}"
    with results_dir_set_to(args.out):
        print(f"\nwrote {write_csv('learning' + suffix, rows)}")
        print(f"wrote {write_csv('learning_runs' + suffix, per_run)}")
    return rows


if __name__ == "__main__":
    main()
