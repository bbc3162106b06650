"""How this project's weights for WarpDrive's tutorial 5 were made, and how to remake them.

    WARP_DRIVE_CPU_THREADS=1 OMP_NUM_THREADS=1 taskset -c 0 \\
        .venv/bin/python -m benchmarks.train_tutorial5_weights [--minutes 12] [--num-envs 40] [--out DIR]

WarpDrive 2.7.1's tutorial 5 ends by loading pretrained weights from
``get_project_root()/tutorials/assets/tag_continuous_training/{tagger,runner}_1000010000.state_dict``.
Those files of WarpDrive's are not this project's to ship; this script trains
this project's own. It builds the trainer as the tutorial does -- the
tutorial's YAML run config (every key and value; here :data:`CFG`), WarpDrive's
``EnvWrapper(env_obj=TagContinuous(**run_config["env"]), num_envs=...,
env_backend="cpu")``, ``policy_tag_to_agent_id_map`` from the env's taggers and
runners, ``Trainer(env_wrapper, run_config, policy_tag_to_agent_id_map)`` --
with ``--num-envs`` envs instead of the tutorial's 400 (one CPU core), then
runs training iterations until ``--minutes`` of wall time are used and writes
each policy's model parameters as the compat Trainer's ``save_model_checkpoint``
does (this project's actor-critic state dict, ``torch.save``), under the
tutorial's file names, into ``--out`` (default:
``warp_drive/compat/assets/tutorial5/``, where the package ships them).

Before and after training it plays one episode in every env (sampled actions,
and greedy ones) and prints the taggers' and runners' mean episodic reward per
agent and the runners tagged per episode (the taggers' summed reward divided by
``tag_reward_for_tagger``: the tutorial's config gives taggers no other reward).
"""

from __future__ import annotations

import argparse
import io
import json
import os
import tempfile
import time
from pathlib import Path

import torch
import yaml

# Tutorial 5's run config (WarpDrive 2.7.1's tutorials/tutorial-5-training_with_warp_drive.ipynb): its keys and
# values; only num_envs is set from --num-envs (and saving.basedir from --out's temporary results) below.
CFG = """
name: "tag_continuous"
env:
    num_taggers: 5
    num_runners: 100
    grid_length: 20
    episode_length: 500
    max_acceleration: 0.1
    min_acceleration: -0.1
    max_turn: 2.35
    min_turn: -2.35
    num_acceleration_levels: 10
    num_turn_levels: 10
    skill_level_runner: 1
    skill_level_tagger: 1
    seed: 274880
    use_full_observation: False
    runner_exits_game_after_tagged: True
    num_other_agents_observed: 10
    tag_reward_for_tagger: 10.0
    tag_penalty_for_runner: -10.0
    step_penalty_for_tagger: -0.00
    step_reward_for_runner: 0.00
    edge_hit_penalty: -0.0
    end_of_game_reward_for_runner: 1.0
    tagging_distance: 0.02
trainer:
    num_envs: 400
    train_batch_size: 10000
    num_episodes: 500
policy:
    runner:
        to_train: True
        algorithm: "A2C"
        gamma: 0.98
        lr: 0.005
        vf_loss_coeff: 1
        entropy_coeff:
        - [0, 0.5]
        - [2000000, 0.05]
        model:
            type: "fully_connected"
            fc_dims: [256, 256]
            model_ckpt_filepath: ""
    tagger:
        to_train: True
        algorithm: "A2C"
        gamma: 0.98
        lr: 0.002
        vf_loss_coeff: 1
        model:
            type: "fully_connected"
            fc_dims: [256, 256]
            model_ckpt_filepath: ""
saving:
    metrics_log_freq: 100
    model_params_save_freq: 5000
    basedir: "/tmp"
    name: "tag_continuous"
    tag: "100runners_5taggers"
"""

# The tutorial's file names (WarpDrive's: 1000010000 is WarpDrive's env step count, not this training's).
FILE_NAMES = {"tagger": "tagger_1000010000.state_dict", "runner": "runner_1000010000.state_dict"}
DEFAULT_OUT = Path(__file__).resolve().parents[1] / "warp_drive" / "compat" / "assets" / "tutorial5"


def run_config(num_envs: int, basedir: str) -> dict:
    config = yaml.safe_load(CFG)
    config["trainer"]["num_envs"] = int(num_envs)
    config["saving"]["basedir"] = basedir
    return config


def build_trainer(config: dict, verbose: bool = False):
    """The tutorial's calls (WarpDrive's import paths, the cpu backend)."""
    from example_envs.tag_continuous.tag_continuous import TagContinuous
    from warp_drive.env_wrapper import EnvWrapper
    from warp_drive.training.trainer import Trainer

    env_wrapper = EnvWrapper(env_obj=TagContinuous(**config["env"]), num_envs=config["trainer"]["num_envs"],
                             env_backend="cpu")
    policy_tag_to_agent_id_map = {"tagger": list(env_wrapper.env.taggers), "runner": list(env_wrapper.env.runners)}
    return Trainer(env_wrapper, config, policy_tag_to_agent_id_map, verbose=verbose)


def measure(trainer, tag_reward: float) -> dict:
    """One episode in every env, sampled and greedy: mean episodic reward per agent, runners tagged per episode."""
    out = {}
    for mode, greedy in (("sampled", False), ("greedy", True)):
        sums, _ = trainer.evaluate_episodes(1, use_argmax=greedy)
        out[mode] = {"tagger_reward_per_agent": float(sums["tagger"].mean()),
                     "runner_reward_per_agent": float(sums["runner"].mean()),
                     "runners_tagged_per_episode": float(sums["tagger"].sum(axis=1).mean() / tag_reward)}
    return out


def save(trainer, out: Path) -> list[Path]:
    """Each policy's parameters as the compat Trainer's save_model_checkpoint writes them."""
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for tag, name in FILE_NAMES.items():
        buffer = io.BytesIO()
        torch.save({k: v.detach().cpu() for k, v in trainer.policies[tag].model.state_dict().items()}, buffer)
        (out / name).write_bytes(buffer.getvalue())
        written.append(out / name)
    return written


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--minutes", type=float, default=12.0, help="wall time for the training iterations")
    parser.add_argument("--num-envs", type=int, default=40, help="env replicas (the tutorial's: 400, on a GPU)")
    parser.add_argument("--threads", type=int, default=1, help="torch threads (default 1: one core)")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="where the two .state_dict files go")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as basedir:
        config = run_config(args.num_envs, basedir)
        trainer = build_trainer(config)
        tag_reward = float(config["env"]["tag_reward_for_tagger"])
        before = measure(trainer, tag_reward)
        print("before:", json.dumps(before), flush=True)
        trainer.env.reset_all_envs()
        train_started = time.perf_counter()
        iterations = 0
        while time.perf_counter() - train_started < args.minutes * 60:
            trainer.iterate()
            iterations += 1
            if iterations % 10 == 0:
                print(f"iteration {iterations}: env steps {trainer.env_steps}, "
                      f"{time.perf_counter() - train_started:.0f} s", flush=True)
        train_seconds = time.perf_counter() - train_started
        after = measure(trainer, tag_reward)
        print("after:", json.dumps(after), flush=True)
        written = save(trainer, args.out)
        summary = {"num_envs": args.num_envs, "iterations": iterations, "env_steps": int(trainer.env_steps),
                   "train_seconds": round(train_seconds, 1), "total_seconds": round(time.perf_counter() - started, 1),
                   "threads": torch.get_num_threads(), "cpu_threads_env": os.environ.get("WARP_DRIVE_CPU_THREADS"),
                   "before": before, "after": after, "files": [str(p) for p in written]}
        trainer.graceful_close()
    print(json.dumps(summary, indent=1))
    return summary


if __name__ == "__main__":
    main()
