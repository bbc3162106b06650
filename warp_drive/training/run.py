"""Entry points behind ``warp-drive train`` and ``warp-drive evaluate``.

``train`` builds the env and the trainer from a validated config, writes the run
directory (resolved ``config.yaml``, ``metrics.csv``, TensorBoard events,
atomic checkpoints with a ``latest`` pointer), shows a progress bar and ends
with a summary table; for Tag envs it also renders a GIF of a trained episode.
``resume`` continues a run from its last checkpoint with the same subsequent
metrics as an uninterrupted run (cpu executor).
"""

from __future__ import annotations

import os
import time
from datetime import datetime
from pathlib import Path
from typing import Any

import torch
import yaml

from warp_drive.backends import get_backend
from warp_drive.env_wrapper import EnvWrapper
from warp_drive.training.checkpoint import latest_checkpoint, load_checkpoint, resolve_run_dir, save_checkpoint
from warp_drive.training.config import ConfigError, RunConfig
from warp_drive.training.metrics import MetricsWriter, Progress, format_summary
from warp_drive.training.trainer import Trainer

RENDERABLE = {"TagContinuous", "TagGridWorld"}


def new_run_dir(config: RunConfig) -> Path:
    base = Path(config.saving.basedir) / (config.saving.name or config.name) / config.saving.tag
    stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
    for n in range(1000):
        path = base / (stamp if n == 0 else f"{stamp}-{n}")
        try:
            path.mkdir(parents=True)
            return path
        except FileExistsError:
            continue
    raise RuntimeError(f"cannot create a run directory under {base}")


def limit_torch_threads(backend_name: str) -> None:
    """On the cpu executor, give torch one thread unless ``$WARP_DRIVE_TORCH_THREADS`` says otherwise.

    The kernels' worker pool already uses every core; torch's own intra-op
    threads competing with it made a small policy forward ~10x slower on a
    2-core machine (measured: 3.1 ms vs 0.27 ms for a 64x64 MLP on 32 rows).
    """
    if backend_name == "cpu":
        torch.set_num_threads(int(os.environ.get("WARP_DRIVE_TORCH_THREADS", "1")))


def build(config: RunConfig) -> Trainer:
    limit_torch_threads(get_backend(config.trainer.backend).name)
    env = EnvWrapper(config.env.name, config.trainer.num_envs, backend=config.trainer.backend,
                     seed=config.trainer.seed, env_config=dict(config.env.config))
    return Trainer(env, config)


def train(config: RunConfig, resume: str | None = None, progress: bool = True) -> Path:
    if resume:
        run_dir = resolve_run_dir(resume, Path(config.saving.basedir))
        config = RunConfig.from_dict(yaml.safe_load((run_dir / "config.yaml").read_text()))
    else:
        run_dir = new_run_dir(config)
        (run_dir / "config.yaml").write_text(yaml.safe_dump(config.to_dict(), sort_keys=False))
    trainer = build(config)
    if resume:
        checkpoint = latest_checkpoint(run_dir)
        if checkpoint is None:
            raise FileNotFoundError(f"{run_dir} has no checkpoint to resume from")
        trainer.load_state_dict(load_checkpoint(checkpoint))
    saving = config.saving
    # A full episode in every env with the untrained policies, to compare with
    # the end (returns logged during training favour the episodes that end first).
    before = None if resume else trainer.run_episodes(greedy=False)["mean_return"]
    # A resumed run drops the rows its interrupted predecessor wrote after the checkpoint.
    writer = MetricsWriter(run_dir, purge_step=trainer.env_steps + 1 if resume else None)
    bar = Progress(trainer.num_iterations, enabled=progress)
    bar.update(trainer.iteration, {})
    started = time.perf_counter()
    try:
        while trainer.iteration < trainer.num_iterations:
            metrics = trainer.iterate()
            is_last = trainer.iteration == trainer.num_iterations
            if trainer.iteration % saving.metrics_log_freq == 0 or is_last:
                metrics.update(trainer.episode_metrics())
                writer.write(trainer.env_steps, metrics)
                returns = {k.rsplit("/", 1)[-1]: v for k, v in metrics.items()
                           if k.startswith("charts/episodic_return/")}
                bar.update(0, {"SPS": f"{metrics['charts/SPS']:,.0f}",
                               **{k: f"{v:.2f}" for k, v in returns.items()}})
            if trainer.iteration % saving.model_params_save_freq == 0 or is_last:
                save_checkpoint(run_dir, trainer.iteration, trainer.state_dict())
            bar.update(1, {})
    finally:
        bar.close()
        writer.close()
    elapsed = time.perf_counter() - started
    after = trainer.run_episodes(greedy=False)["mean_return"]
    gif = render_episode(trainer, run_dir / "episode.gif") if config.env.name in RENDERABLE else None
    print(summary(config, trainer, elapsed, before, after, gif))
    return run_dir


def summary(config, trainer, elapsed, before, after, gif) -> str:
    rows = [{"policy": tag,
             "trained": "yes" if config.policy[tag].to_train else "no",
             "episode return before training": (before or {}).get(tag, float("nan")),
             "after training": after[tag]}
            for tag in trainer.policies]
    steps = trainer.env_steps
    lines = [
        "",
        f"Trained {config.env.name} on the {trainer.env.backend.name} backend: {steps:,} env steps "
        f"({trainer.iteration} iterations of {trainer.num_envs} envs x {trainer.rollout_length} steps) "
        f"in {elapsed:.1f} s ({steps / max(elapsed, 1e-9):,.0f} env steps/s this session)",
        "Mean return per agent over one full episode in every env, actions sampled from the policy:",
        format_summary(rows),
    ]
    if gif is not None:
        lines.append(f"episode of the trained policies: {gif}")
    return "\n".join(lines)


def render_episode(trainer: Trainer, out: Path, greedy: bool = False) -> Path:
    from warp_drive.training import render

    env = trainer.env.env
    if env.name == "TagContinuous":
        episode = trainer.run_episodes(greedy=greedy, record=("loc_x", "loc_y", "still_in_the_game"))
        frames = episode["frames"]
        is_tagger = trainer.env.data_manager.pull_data_from_device("agent_types") == 1
        return render.render_tag_episode(out, frames["loc_x"], frames["loc_y"], is_tagger,
                                         frames["still_in_the_game"].astype(bool), float(env.grid_length),
                                         title="TagContinuous")
    episode = trainer.run_episodes(greedy=greedy, record=("loc_x", "loc_y"))
    frames = episode["frames"]
    is_tagger = trainer.env.data_manager.pull_data_from_device("agent_types") == 0
    return render.render_gridworld_episode(out, frames["loc_x"], frames["loc_y"], is_tagger, int(env.grid_length),
                                           title="TagGridWorld")


def evaluate(run_dir: str, episodes: int = 10, render: str | None = None, greedy: bool = True,
             backend: str | None = None) -> dict[str, Any]:
    """Mean return per policy over ``episodes`` episodes of the run's latest checkpoint."""
    path = resolve_run_dir(run_dir, Path("runs"))
    raw = yaml.safe_load((path / "config.yaml").read_text())
    raw["trainer"]["num_envs"] = int(episodes)
    raw["trainer"]["total_steps"] = max(int(raw["trainer"]["total_steps"]), episodes * raw["trainer"]["rollout_length"])
    if backend:
        raw["trainer"]["backend"] = backend
    config = RunConfig.from_dict(raw)
    trainer = build(config)
    state = load_checkpoint(path)
    for tag, p in trainer.policies.items():
        p.model.load_state_dict(state["models"][tag])
    result = trainer.run_episodes(greedy=greedy)
    gif = None
    if render:
        if config.env.name not in RENDERABLE:
            raise ConfigError(f"--render draws Tag episodes; {config.env.name} has no renderer")
        gif = str(render_episode(trainer, Path(render), greedy=greedy))
    return {"episodes": int(episodes), "mean_return": result["mean_return"], "gif": gif}
