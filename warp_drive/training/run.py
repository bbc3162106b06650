"""Entry points behind ``warp-drive train`` and ``warp-drive evaluate``.

``train`` builds the env and the trainer from a validated config, writes the run
directory (resolved ``config.yaml``, ``metrics.csv``, TensorBoard events,
atomic checkpoints with a ``latest`` pointer), shows a progress bar and ends
with a summary table; for Tag envs it also renders a GIF of a trained episode.
``resume`` continues a run from its last checkpoint with the same subsequent
metrics as an uninterrupted run (cpu executor).

Under ``torchrun`` (or ``warp-drive train --nproc N``) ``train`` is one rank of
a data-parallel run (see ``distributed.py``): every rank trains on its own
envs (seed ``seed + rank``) and logs metrics aggregated over ranks; rank 0
alone creates the run directory, writes metrics, checkpoints and the GIF, and
prints the summary. A checkpoint of an N-rank run is rank 0's ordinary trainer
state (it loads into a single-process ``build(config)`` trainer unchanged)
plus ``ranks``: every rank's env arrays, sampler/reset counters, RNG states
and episode tallies, from which an N-rank resume restores each rank's own.
Resuming needs the same number of ranks as the run that saved it.

A run directory is held by one process (rank 0) at a time (``checkpoint.RunLock``);
a resumed run takes its config from the run's ``config.yaml``, and a config
passed along may differ from it only in ``config.RESUMABLE_KEYS``.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from dataclasses import dataclass, replace
from datetime import datetime
from pathlib import Path
from typing import Any, Callable

import torch
import yaml

from warp_drive.backends import Backend, backend_class, get_backend
from warp_drive.training import distributed
from warp_drive.env_wrapper import EnvWrapper
from warp_drive.training.checkpoint import (
    RunLock,
    load_checkpoint,
    load_latest,
    remove_stale_temp_files,
    resolve_run_dir,
    save_checkpoint,
)
from warp_drive.training.config import RESUMABLE_KEYS, ConfigError, RunConfig, RunError, parse_yaml
from warp_drive.training.metrics import MetricsWriter, Progress, format_summary
from warp_drive.training.distributed import Distributed
from warp_drive.training.trainer import Trainer

RENDERABLE = {"TagContinuous", "TagGridWorld"}
FAIL_RANK_ENV = "WARP_DRIVE_TEST_FAIL_RANK"  # test hook: that rank raises after its first iteration
DUMP_ENV = "WARP_DRIVE_TEST_DUMP_PARAMS"  # test hook: each rank writes rank<r>.json (param hashes, local counts)


def new_run_dir(config: RunConfig, results_dir: str | None = None) -> Path:
    """``<basedir>/<name>/<tag>/<timestamp>``, or ``.../<results_dir>`` (WarpDrive's ``--results_dir``),
    which must be new or empty: a second run's checkpoints beside the first's would be resumed as one run."""
    root = Path(config.saving.basedir)
    base = root / (config.saving.name or config.name) / config.saving.tag
    # The config refuses absolute and '..' parts; this catches anything that still resolves outside.
    if not base.resolve().is_relative_to(root.resolve()):
        raise ConfigError(f"saving: the run directory {base} is outside saving.basedir {root}")
    if results_dir is not None:
        path = base / str(results_dir)
        if Path(str(results_dir)).is_absolute() or ".." in Path(str(results_dir)).parts or path == base:
            raise ConfigError(f"results_dir: a directory name inside {base}, got {results_dir!r}")
        if path.exists() and any(path.iterdir()):
            raise RunError(f"results_dir: {path} exists and is not empty; pick another name, or continue that "
                           f"run with --resume {path}")
        path.mkdir(parents=True, exist_ok=True)
        return path
    stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
    for n in range(1000):
        path = base / (stamp if n == 0 else f"{stamp}-{n}")
        try:
            path.mkdir(parents=True)
            return path
        except FileExistsError:
            continue
    raise RuntimeError(f"cannot create a run directory under {base}")


def limit_torch_threads(backend: str | Backend | None) -> None:
    """Where the kernels' worker pool runs on the host's cores (the cpu executor,
    either shape: ``capabilities.shares_host_cores``), give torch one thread
    unless ``$WARP_DRIVE_TORCH_THREADS`` says otherwise. ``backend`` is a
    backend name (``auto`` included) or a backend.

    The kernels' worker pool already uses every core; torch's own intra-op
    threads competing with it made a small policy forward ~10x slower on a
    2-core machine (measured: 3.1 ms vs 0.27 ms for a 64x64 MLP on 32 rows).
    """
    if backend_class(backend).capabilities.shares_host_cores:
        torch.set_num_threads(int(os.environ.get("WARP_DRIVE_TORCH_THREADS", "1")))


def build(config: RunConfig, dist: Distributed | None = None) -> Trainer:
    """The env and the trainer of ``config``; with ``dist``, rank r's envs, sampler and torch RNG use ``seed + r``."""
    limit_torch_threads(get_backend(config.trainer.backend))
    if dist is not None:
        config = replace(config, trainer=replace(config.trainer, seed=config.trainer.seed + dist.rank))
    env = EnvWrapper(config.env.name, config.trainer.num_envs, backend=config.trainer.backend,
                     seed=config.trainer.seed, env_config=dict(config.env.config))
    from warp_drive.training.ddpg import trainer_class  # DDPG policies get the DDPG trainer

    return trainer_class(config)(env, config, distributed=dist)


def train(config: RunConfig, resume: str | None = None, progress: bool = True,
          results_dir: str | None = None) -> Path:
    """Train ``config`` (or resume a run); a rank of a distributed run when started by torchrun.

    ``results_dir``: the run directory's last part instead of a timestamp (WarpDrive's ``--results_dir``).
    """
    if not distributed.launched_by_torchrun():
        return _train(config, resume, progress, None, results_dir)
    dist = distributed.init(config.trainer.backend)
    run_dir = _train(config, resume, progress, dist, results_dir)
    # Only on success: after a failure a peer may be gone, and torchrun tears the group down anyway.
    distributed.shutdown()
    return run_dir


def saved_config(run_dir: Path) -> dict:
    """A run's ``config.yaml`` as parsed YAML (with the config loader's size and alias limits)."""
    raw = parse_yaml((run_dir / "config.yaml").read_text(encoding="utf-8"))
    if not isinstance(raw, dict):
        raise ConfigError(f"{run_dir / 'config.yaml'}: not a run config (the top level must be a mapping)")
    return raw


def resumed_config(run_dir: Path, config: RunConfig) -> RunConfig:
    """The config a resumed run continues with: the run's own, with ``config``'s values of ``RESUMABLE_KEYS``.

    Anything else that differs is refused rather than ignored: a resume that
    silently dropped a changed ``num_envs`` or ``lr`` trained something else
    than the user asked for.
    """
    saved = RunConfig.from_dict(saved_config(run_dir), source=str(run_dir / "config.yaml"))
    mine, theirs = _flatten(config.to_dict()), _flatten(saved.to_dict())
    differ = sorted(k for k in mine.keys() | theirs.keys()
                    if mine.get(k) != theirs.get(k) and not k.startswith(RESUMABLE_KEYS))
    if differ:
        shown = "; ".join(f"{k}: run has {theirs.get(k)!r}, given {mine.get(k)!r}" for k in differ[:5])
        raise ConfigError(f"cannot resume {run_dir} with a different config ({shown}); only "
                          f"{', '.join(RESUMABLE_KEYS)} may change on resume")
    data = saved.to_dict()
    for key in RESUMABLE_KEYS:
        section, leaf = key.split(".")
        data[section][leaf] = config.to_dict()[section][leaf]
    return RunConfig.from_dict(data)


def _flatten(data: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(data, dict) and data:
        out: dict[str, Any] = {}
        for k, v in data.items():
            out.update(_flatten(v, f"{prefix}.{k}" if prefix else str(k)))
        return out
    return {prefix: data}


def write_run_config(run_dir: Path, config: RunConfig) -> None:
    """``config.yaml``, and for a translated WarpDrive run config the translation beside it."""
    (run_dir / "config.yaml").write_text(yaml.safe_dump(config.to_dict(), sort_keys=False))
    translation = getattr(config, "warpdrive_translation", None)
    if translation is not None:
        (run_dir / "warpdrive_translation.txt").write_text(translation.text() + "\n")


@dataclass
class LoopHooks:
    """How ``Trainer.train()`` (WarpDrive's API) runs the one training loop of this module: ``evaluate``
    False skips the before/after episodes, the summary and the GIF; ``on_log(trainer, metrics)`` and
    ``on_save(trainer)`` run (on the main process) at each metrics log and checkpoint."""

    on_log: Callable[[Trainer, dict], None] | None = None
    on_save: Callable[[Trainer], None] | None = None
    evaluate: bool = False


def train_trainer(trainer: Trainer, run_dir: Path, hooks: LoopHooks, progress: bool = False) -> Path:
    """Train an already built ``trainer`` in ``run_dir`` (created by the caller), holding the run's lock."""
    lock = RunLock(run_dir).acquire()
    try:
        write_run_config(run_dir, trainer.config)
        return _train_in(trainer.config, None, progress, trainer.distributed, run_dir, trainer=trainer, hooks=hooks)
    finally:
        lock.release()


def _train(config: RunConfig, resume: str | None, progress: bool, dist: Distributed | None,
           results_dir: str | None = None) -> Path:
    main = dist is None or dist.is_main
    lock = None
    try:
        run_dir = None
        if main:  # one rank creates (or finds) the run directory and holds it; the others are told where it is
            if resume:
                run_dir = resolve_run_dir(resume, Path(config.saving.basedir), name=config.name)
                lock = RunLock(run_dir).acquire()
                remove_stale_temp_files(run_dir, before=time.time())  # the lock excludes any live writer
            else:
                run_dir = new_run_dir(config, results_dir)
                lock = RunLock(run_dir).acquire()
                write_run_config(run_dir, config)
        if dist is not None:
            run_dir = Path(dist.broadcast_object(None if run_dir is None else str(run_dir)))
        return _train_in(config, resume, progress, dist, run_dir)
    finally:
        if lock is not None:
            lock.release()


def _train_in(config: RunConfig, resume: str | None, progress: bool, dist: Distributed | None,
              run_dir: Path, trainer: Trainer | None = None, hooks: LoopHooks | None = None) -> Path:
    main = dist is None or dist.is_main
    rank = 0 if dist is None else dist.rank
    if resume:
        config = resumed_config(run_dir, config)
    if trainer is None:
        trainer = build(config, dist)
    evaluate = hooks is None or hooks.evaluate
    if dist is not None:
        # Equal batch and minibatch sizes mean equal numbers of gradient all-reduces on every rank.
        shapes = dist.gather_objects((trainer.batch_env_steps, trainer.num_iterations))
        assert len(set(shapes)) == 1, f"ranks disagree on (batch env steps, iterations): {shapes}"
    if resume:
        checkpoint, state = load_latest(run_dir)  # the newest intact one; unsafe ones are refused
        trainer.load_state_dict(state_for_rank(state, dist, checkpoint))
    start_steps = trainer.env_steps
    dump = TestDump(os.environ[DUMP_ENV], rank, trainer) if os.environ.get(DUMP_ENV) else None
    fail_rank = os.environ.get(FAIL_RANK_ENV)
    saving = config.saving
    # A full episode in every env with the untrained policies, to compare with
    # the end (returns logged during training favour the episodes that end first).
    before = None if resume or not evaluate else trainer.run_episodes(greedy=False)["mean_return"]
    if dist is not None and before is not None:
        before = dist.mean_dict(before)
    # A resumed run drops the rows its interrupted predecessor wrote after the checkpoint.
    world = 1 if dist is None else dist.world_size  # global_step counts every rank's env steps
    writer = MetricsWriter(run_dir, purge_step=trainer.env_steps * world + 1 if resume else None) if main else None
    bar = Progress(trainer.num_iterations, enabled=progress and main)
    bar.update(trainer.iteration, {})
    started = time.perf_counter()
    try:
        first = True
        while trainer.iteration < trainer.num_iterations:
            metrics = trainer.iterate()
            if first and fail_rank is not None and int(fail_rank) == rank:
                raise RuntimeError(f"injected failure on rank {rank}")
            first = False
            is_last = trainer.iteration == trainer.num_iterations
            if trainer.iteration % saving.metrics_log_freq == 0 or is_last:
                episodes = trainer.episode_metrics()
                if dump is not None:
                    dump.record(trainer.env_steps * world, metrics, episodes)
                if dist is not None:
                    metrics, episodes = dist.reduce_metrics(metrics), dist.reduce_episode_metrics(episodes)
                metrics.update(episodes)
                if writer is not None:
                    writer.write(trainer.env_steps * world, metrics)
                returns = {k.rsplit("/", 1)[-1]: v for k, v in metrics.items()
                           if k.startswith("charts/episodic_return/")}
                bar.update(0, {"SPS": f"{metrics['charts/SPS']:,.0f}",
                               **{k: f"{v:.2f}" for k, v in returns.items()}})
                if hooks is not None and hooks.on_log is not None and main:
                    hooks.on_log(trainer, metrics)
            if trainer.iteration % saving.model_params_save_freq == 0 or is_last:
                state = trainer.state_dict()
                if dist is not None:  # every rank's envs and RNGs, so an N-rank resume continues each rank
                    state["ranks"] = dist.gather_objects(distributed.rank_state(state))
                if main:
                    save_checkpoint(run_dir, trainer.iteration, state, keep=saving.keep_checkpoints)
                    if hooks is not None and hooks.on_save is not None:
                        hooks.on_save(trainer)
            bar.update(1, {})
    finally:
        bar.close()
        if writer is not None:
            writer.close()
    elapsed = time.perf_counter() - started
    if not evaluate:
        return run_dir
    after = trainer.run_episodes(greedy=False)["mean_return"]
    if dist is not None:
        after = dist.mean_dict(after)
    if dump is not None:
        dump.write(trainer)
    if main:
        gif = render_episode(trainer, run_dir / "episode.gif") if config.env.name in RENDERABLE else None
        print(summary(config, trainer, elapsed, before, after, gif, world, start_steps=start_steps))
    return run_dir


def state_for_rank(state: dict, dist: Distributed | None, source: Path) -> dict:
    """The trainer state this rank resumes from: the shared models plus its own envs and RNGs.

    A single-process checkpoint resumes a single process; an N-rank one resumes
    N ranks (rank r takes ``state["ranks"][r]``). Other combinations would
    either duplicate one rank's envs on every rank or drop some, so they are refused.
    """
    ranks = state.get("ranks")
    saved = 1 if ranks is None else len(ranks)
    world, rank = (1, 0) if dist is None else (dist.world_size, dist.rank)
    if saved != world:
        raise ValueError(f"{source} was saved by a run of {saved} process(es); resume it with the same number "
                         f"(--nproc {saved}), or load its 'models' into a new run")
    return state if ranks is None else {**state, **ranks[rank]}


class TestDump:
    """``$WARP_DRIVE_TEST_DUMP_PARAMS`` hook: what the distributed tests compare across ranks.

    Writes ``<dir>/rank<r>.json`` with a hash of every model's state_dict at
    the start (after the broadcast) and the end, and this rank's own episode
    counts and SPS at each logged step (before aggregation).
    """

    def __init__(self, directory: str, rank: int, trainer: Trainer):
        self.path = Path(directory) / f"rank{rank}.json"
        self.data: dict[str, Any] = {"rank": rank, "initial": self.hashes(trainer), "logged": []}

    @staticmethod
    def hashes(trainer: Trainer) -> dict[str, str]:
        out = {}
        for tag, p in trainer.policies.items():
            digest = hashlib.sha256()
            for name, tensor in sorted(p.model.state_dict().items()):
                digest.update(name.encode())
                digest.update(tensor.detach().cpu().contiguous().numpy().tobytes())
            out[tag] = digest.hexdigest()
        return out

    def record(self, step: int, metrics: dict, episodes: dict) -> None:
        self.data["logged"].append({"step": step, "sps": metrics["charts/SPS"],
                                    "episodes": {k: v for k, v in episodes.items() if k.startswith("charts/episodes/")}})

    def write(self, trainer: Trainer) -> None:
        self.data["final"] = self.hashes(trainer)
        self.data["env_steps"] = trainer.env_steps
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.path.write_text(json.dumps(self.data, indent=1))


def summary(config, trainer, elapsed, before, after, gif, world_size: int = 1, start_steps: int = 0) -> str:
    """The end-of-run table. Speed counts only this session's env steps (``start_steps`` is where a resume began):
    all of a resumed run's steps over this session's seconds reported a meaningless rate."""
    rows = [{"policy": tag,
             "trained": "yes" if config.policy[tag].to_train else "no",
             "episode return before training": (before or {}).get(tag, float("nan")),
             "after training": after[tag]}
            for tag in trainer.policies]
    steps = trainer.env_steps * world_size
    session = (trainer.env_steps - start_steps) * world_size
    ranks = f" x {world_size} processes" if world_size > 1 else ""
    if session == 0:
        speed = (f"; nothing to do: the run has reached trainer.total_steps ({config.trainer.total_steps:,}); "
                 f"resume with --set trainer.total_steps=N to train further")
    else:
        speed = (f"in {elapsed:.1f} s ({session:,} env steps this session, "
                 f"{session / max(elapsed, 1e-9):,.0f} env steps/s)")
    lines = [
        "",
        f"Trained {config.env.name} on the {trainer.env.backend.name} backend: {steps:,} env steps "
        f"({trainer.iteration} iterations of {trainer.num_envs} envs{ranks} x {trainer.rollout_length} steps) "
        + speed,
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
    raw = saved_config(path)
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
