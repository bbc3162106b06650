"""Entry points behind ``warp-drive train`` and ``warp-drive evaluate``.

``train`` builds the env and the trainer from a validated config, writes the
resolved ``config.yaml`` and runs the training loop (``run_loop``): a short
loop around ``trainer.iterate()`` whose callbacks (``runs/callbacks.py``) write
``provenance.yaml``, the metrics (``metrics.csv``, TensorBoard, W&B with
``track``), atomic checkpoints with a ``latest`` pointer, show a progress bar,
and end with a GIF of a trained episode (envs with ``render_arrays``) and a
summary table.
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

A run directory is held by one process (rank 0) at a time (``runs.dirs.RunLock``);
a resumed run takes its config from the run's ``config.yaml``, and a config
passed along may differ from it only in ``config.RESUMABLE_KEYS``
(``runs.config_file.resumed_config``). The run's directory, files,
checkpoints, metrics and callbacks are ``training/runs/``'s; this module is
the entry points and the loop.
"""

from __future__ import annotations

import logging
import math
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator, Sequence

import numpy as np
import torch

from warp_drive.runtime import env_vars
from warp_drive.runtime.backends import Backend, KernelBuildError, KernelLaunchError, backend_class, get_backend
from warp_drive.runtime.launch_clock import seconds_since_launch
from warp_drive.training import distributed
from warp_drive.training.config import SETUP_REFUSAL, ConfigError, RunConfig, RunError
from warp_drive.training.distributed import Distributed
from warp_drive.training.loop import OnDeviceTrainer
from warp_drive.training.runs.callbacks import (
    Callback,
    CheckpointSaver,
    EpisodeRenderer,
    EvaluationSummary,
    MetricsLogger,
    ProgressBar,
    TrainingLoop,
    can_render,
    emit,
    emit_exception,
    render_episode,
)
from warp_drive.training.runs.checkpoint import (load_latest, load_weights, refuse_exploded_weights,
                                                 remove_stale_temp_files)
from warp_drive.training.runs.config_file import resumed_config, saved_config, write_run_config
from warp_drive.training.runs.dirs import RunLock, check_run_dir, new_run_dir, remove_refused_run, resolve_run_dir
from warp_drive.training.runs.loggers import check_wandb, wandb_enabled
from warp_drive.training.runs.memory import check_config as check_memory
from warp_drive.training.runs.stop_at_return import StopAtReturn
from warp_drive.env.wrapper import EnvWrapper, make_env

log = logging.getLogger("warp_drive")


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
        torch.set_num_threads(env_vars.read("WARP_DRIVE_TORCH_THREADS") or 1)


def build(config: RunConfig, dist: Distributed | None = None,
          trainer_class: type[OnDeviceTrainer] | None = None, record_episode: bool = False) -> OnDeviceTrainer:
    """The env and the trainer of ``config`` (``trainer_class``: the algorithm table's by default); with ``dist``,
    rank r's envs, sampler and torch RNG use ``seed + r``. Refused first when over the machine's memory."""
    limit_torch_threads(backend := get_backend(config.trainer.backend))
    if dist is not None:
        trainer = config.trainer.model_copy(update={"seed": config.trainer.seed + dist.rank})
        config = config.model_copy(update={"trainer": trainer})
    with refusals(ENV_REFUSALS):
        env = make_env(config.env.name, dict(config.env.config))
        check_memory(config, env, backend, record_episode)  # runs/memory.py; record_episode: the GIF's too
        env = EnvWrapper(env, config.trainer.num_envs, backend=config.trainer.backend, seed=config.trainer.seed,
                         reset_pool_size=config.env.reset_pool_size)
    with refusals(TRAINER_REFUSALS):
        return (trainer_class or OnDeviceTrainer)(env, config, distributed=dist)


# What building a run refuses the user's input with (see config.SETUP_REFUSAL): the registry (an unknown env,
# a package.module:Class that does not import), the env's constructor, EnvWrapper (arrays, spaces, the
# kernel's build and its bind by name) and the trainer's constructor (policies that do not fit the env, a model
# that cannot serve them). KeyError counts only in the env's part; in the trainer's it would be a bug.
ENV_REFUSALS = (ValueError, TypeError, KeyError, KernelBuildError, KernelLaunchError)
TRAINER_REFUSALS = (ValueError, TypeError, KernelBuildError, KernelLaunchError)


@contextmanager
def refusals(kinds: tuple[type[BaseException], ...]) -> Iterator[None]:
    """Mark an exception of ``kinds`` raised inside as a refusal of the user's input (``SETUP_REFUSAL``), so
    the CLI prints it as one line; its type and message are unchanged for everyone else."""
    try:
        yield
    except kinds as exc:
        setattr(exc, SETUP_REFUSAL, True)
        raise


def train(config: RunConfig, resume: str | None = None, progress: bool = True,
          run_name: str | None = None, callbacks: Sequence[Callback] = (), track: bool = False,
          evaluate: bool = True) -> Path:
    """Train ``config`` (or resume a run); a rank of a distributed run when started by torchrun.

    ``run_name``: the run directory's last part instead of a timestamp (the CLI's ``--run-name``, WarpDrive's
    ``--results_dir``).
    ``callbacks``: run after the built-in ones (``runs/callbacks.py``). ``track``: also log to Weights & Biases.
    ``evaluate``: play one episode in every env before and after training, print the summary and draw
    the episode GIF (``False``: none of it, for runs that only need the checkpoints and metrics).
    """
    if wandb_enabled(config, track):
        check_wandb(config.saving.wandb)  # before a run directory is made
    built_in = default_callbacks(progress, track, evaluate)
    if not distributed.launched_by_torchrun():
        return _train(config, resume, None, run_name, [*built_in, *callbacks])
    dist = distributed.init(config.trainer.backend)
    run_dir = _train(config, resume, dist, run_name, [*built_in, *callbacks])
    # Only on success: after a failure a peer may be gone, and torchrun tears the group down anyway.
    distributed.shutdown()
    return run_dir


def default_callbacks(progress: bool = True, track: bool = False, evaluate: bool = True) -> list[Callback]:
    """The callbacks of ``warp-drive train``: a progress bar (with ``progress``), metrics (CSV, TensorBoard,
    W&B with ``track``), checkpoints and, with ``evaluate``, the GIF and the before/after summary."""
    callbacks: list[Callback] = [ProgressBar()] if progress else []
    callbacks += [StopAtReturn(), MetricsLogger(track=track), CheckpointSaver()]
    if evaluate:
        callbacks += [EpisodeRenderer(), EvaluationSummary()]  # the GIF first: the summary names it
    return callbacks


def claim_run_dir(config: RunConfig, run_dir: str | Path | None, resuming: bool) -> tuple[Path, RunLock]:
    """The run directory of a trainer built elsewhere (the Lightning bridge), locked, with ``config.yaml``.

    ``None`` makes a new timestamped one as ``warp-drive train`` does. A given
    directory is created if absent; one that already holds files is continued
    only when ``resuming`` (its metrics after the checkpoint are then replaced),
    else refused: two runs' metrics and checkpoints in one place would be read
    back as one run.
    """
    if run_dir is None:
        path = new_run_dir(config)
    else:
        path = Path(run_dir)
        if path.exists() and any(path.iterdir()) and not resuming:
            raise RunError(f"run_dir {path} exists and is not empty; pick another directory, or resume that run "
                           f"(fit(..., ckpt_path=...))")
        path.mkdir(parents=True, exist_ok=True)
    lock = RunLock(path).acquire()
    if resuming:
        remove_stale_temp_files(path, before=time.time())  # the lock excludes any live writer
    write_run_config(path, config)
    return path, lock


def train_trainer(trainer: OnDeviceTrainer, run_dir: Path, callbacks: list[Callback], progress: bool = False) -> Path:
    """Train an already built ``trainer`` in ``run_dir`` (created by the caller), holding the run's lock;
    ``callbacks`` come after the progress bar, metrics and checkpoints (``Trainer.train()``, WarpDrive's API)."""
    lock = RunLock(run_dir).acquire()
    try:
        write_run_config(run_dir, trainer.config)
        loop = TrainingLoop(trainer, trainer.config, run_dir, trainer.distributed, start_steps=trainer.env_steps)
        return run_loop(loop, [*default_callbacks(progress, evaluate=False), *callbacks])
    finally:
        lock.release()


def _train(config: RunConfig, resume: str | None, dist: Distributed | None, run_name: str | None,
           callbacks: list[Callback]) -> Path:
    """A new run's directory is checked first and created only once the env and the trainer are built, so a
    run refused at construction (a bad env value, a kernel that does not build, a shape mismatch) leaves
    nothing under saving.basedir; one that fails later but before its first iteration is removed again
    (:func:`remove_refused_run`). A resumed run's directory is never removed."""
    main = dist is None or dist.is_main
    lock = None
    made: list[Path] = []  # the directories a new run created (rank 0)
    run_dir = loop = None
    new_dir = False
    try:
        if main:  # one rank creates (or finds) the run directory and holds it; the others are told where it is
            if resume:
                run_dir = resolve_run_dir(resume, Path(config.saving.basedir), name=config.name)
                lock = RunLock(run_dir).acquire()
                remove_stale_temp_files(run_dir, before=time.time())  # the lock excludes any live writer
            else:
                check_run_dir(config, run_name)  # a bad or taken --run-name: refused before the build
        if resume:
            run_dir = _shared_run_dir(dist, run_dir)
            config = resumed_config(run_dir, config)
        trainer = build(config, dist, record_episode=any(isinstance(c, EpisodeRenderer) for c in callbacks))
        if resume:
            checkpoint, state = load_latest(run_dir)  # the newest intact one; unsafe ones are refused
            trainer.load_state_dict(state_for_rank(state, dist, checkpoint))
            refuse_exploded_weights(trainer.policies, config.trainer.max_weight_magnitude, checkpoint)
        else:
            if main:
                run_dir, new_dir = new_run_dir(config, run_name, made), True
                lock = RunLock(run_dir).acquire()
                write_run_config(run_dir, config)
            run_dir = _shared_run_dir(dist, run_dir)
        loop = TrainingLoop(trainer, config, run_dir, dist, resumed=bool(resume), start_steps=trainer.env_steps)
        return run_loop(loop, callbacks)
    except BaseException:
        if new_dir and (loop is None or loop.first_iteration_after is None):
            remove_refused_run(run_dir, made)  # run_loop sets first_iteration_after as it starts iterating
        raise
    finally:
        if lock is not None:
            lock.release()


def _shared_run_dir(dist: Distributed | None, run_dir: Path | None) -> Path:
    """Rank 0's run directory on every rank (a collective in a distributed run)."""
    if dist is None:
        return run_dir
    return Path(dist.broadcast_object(None if run_dir is None else str(run_dir)))


def run_loop(loop: TrainingLoop, callbacks: list[Callback]) -> Path:
    """The training loop: iterate until ``trainer.total_steps``; everything else is ``callbacks``
    (see ``runs/callbacks.py`` for when each method runs); a callback may end it early (``loop.stop_requested``)."""
    trainer, dist, saving = loop.trainer, loop.dist, loop.config.saving
    if dist is not None:
        # Equal batch and minibatch sizes mean equal numbers of gradient all-reduces on every rank.
        shapes = dist.gather_objects((trainer.batch_env_steps, trainer.num_iterations))
        assert len(set(shapes)) == 1, f"ranks disagree on (batch env steps, iterations): {shapes}"

    try:
        emit(callbacks, "on_train_start", loop)
        loop.first_iteration_after = seconds_since_launch()
        loop.started = time.perf_counter()
        while trainer.iteration < trainer.num_iterations:
            metrics = trainer.iterate()
            emit(callbacks, "on_iteration_end", loop, metrics)
            last = loop.stop_requested  # an early stop (trainer.stop_at_return): this iteration is the run's last
            if last or due(trainer, saving.metrics_log_freq):
                emit(callbacks, "on_log", loop, logged_metrics(loop, metrics))
            if last or due(trainer, saving.model_params_save_freq):
                emit(callbacks, "on_checkpoint", loop, checkpoint_state(loop))
            if last:
                break
        loop.elapsed = time.perf_counter() - loop.started
        emit(callbacks, "on_train_end", loop)
    except BaseException as error:
        emit_exception(callbacks, loop, error)
        raise
    return loop.run_dir


def due(trainer: OnDeviceTrainer, every: int) -> bool:
    """Whether the iteration just ended is one of every ``every``-th, or the run's last (logs, checkpoints)."""
    return trainer.iteration % every == 0 or trainer.iteration == trainer.num_iterations


def logged_metrics(loop: TrainingLoop, metrics: dict[str, float]) -> dict[str, float]:
    """``gather_metrics`` of the loop's trainer, keeping this rank's own in ``loop.local_metrics``."""
    loop.local_metrics, merged = gather_metrics(loop.trainer, metrics)
    return merged


def gather_metrics(trainer: OnDeviceTrainer, metrics: dict[str, float]) -> tuple[dict[str, float], dict[str, float]]:
    """(this rank's, every rank's) metrics of a log step: the iteration's ``metrics`` plus the episodes ended
    since the last log step, aggregated over ranks in a distributed run (a collective: every rank calls it).

    An episodic return is left out while no episode has ended (it would be NaN),
    so loggers write an empty cell or no point rather than NaN. ``warp-drive
    train`` and the Lightning module both log what this returns."""
    episodes = trainer.episode_metrics()
    local = {**metrics, **episodes}
    dist = trainer.distributed
    if dist is not None:
        metrics, episodes = dist.reduce_metrics(metrics), dist.reduce_episode_metrics(episodes)
    merged = {**metrics, **episodes}
    return local, {k: v for k, v in merged.items()
                   if not (k.startswith(("charts/episodic_return/", "charts/team_return/")) and math.isnan(v))}


def checkpoint_state(loop: TrainingLoop) -> dict[str, Any]:
    """The trainer's state; in a distributed run also every rank's envs and RNGs (``ranks``), so an N-rank
    resume continues each rank (a collective: every rank calls it)."""
    state = loop.trainer.state_dict()
    if loop.dist is not None:
        state["ranks"] = loop.dist.gather_objects(distributed.rank_state(state))
    return state


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


def evaluate(run_dir: str, episodes: int = 10, render: str | None = None, greedy: bool = True,
             backend: str | None = None) -> dict[str, Any]:
    """Returns per policy over ``episodes`` episodes (one per env) of the run's latest checkpoint.

    ``mean_return``: policy -> mean; ``returns``: policy -> mean, std, min, max of the episodes' returns
    (each the mean over the policy's agents); ``team_returns``: policy -> each episode's return summed over
    the policy's agents; ``team``: policy -> mean and std of those; ``mean_length``: mean steps per episode;
    ``gif``: the GIF; ``config``: the run's."""
    path = resolve_run_dir(run_dir, Path("runs"))
    config = RunConfig.from_dict(saved_config(path))
    trainer = build(evaluation_config(config, episodes, backend), record_episode=bool(render))
    state = load_weights(trainer.policies, path, config.trainer.max_weight_magnitude)  # NaN or exploded: refused
    return {**play_episodes(trainer, episodes, render, greedy=greedy), "env_steps": int(state["env_steps"])}


def evaluate_random(config: RunConfig, episodes: int = 10, render: str | None = None,
                    backend: str | None = None) -> dict[str, Any]:
    """:func:`evaluate`'s report for a baseline with no training: every agent of ``config``'s env takes a
    uniformly random legal action (``Trainer.run_episodes(uniform=True)``: masked actions never, Box actions
    uniform within their bounds), so a trained run's returns have something to be compared with."""
    trainer = build(evaluation_config(config, episodes, backend), record_episode=bool(render))
    return {**play_episodes(trainer, episodes, render, uniform=True), "env_steps": 0}


def evaluation_config(config: RunConfig, episodes: int, backend: str | None = None) -> RunConfig:
    """``config`` with one env per episode (and enough total steps for one rollout of them), on ``backend``."""
    raw = config.to_dict()
    raw["trainer"]["num_envs"] = int(episodes)
    raw["trainer"]["total_steps"] = max(int(raw["trainer"]["total_steps"]), episodes * raw["trainer"]["rollout_length"])
    if backend:
        raw["trainer"]["backend"] = backend
    return RunConfig.from_dict(raw)


def play_episodes(trainer: OnDeviceTrainer, episodes: int, render: str | None = None, greedy: bool = True,
                  uniform: bool = False) -> dict[str, Any]:
    """One episode in every env of ``trainer`` and the statistics :func:`evaluate` reports (and the GIF)."""
    config = trainer.config
    result = trainer.run_episodes(greedy=greedy, uniform=uniform)
    gif = None
    if render:
        if not can_render(trainer):
            raise ConfigError(f"--render: {config.env.name} has no renderer (its Environment class sets no "
                              f"render_arrays)")
        gif = str(render_episode(trainer, Path(render), greedy=greedy, uniform=uniform))
    per_policy = {}
    for tag, returns in result["returns"].items():
        per_env = np.asarray(returns, dtype=np.float64).mean(axis=1)  # each env's return, averaged over its agents
        per_policy[tag] = {"mean": float(per_env.mean()), "std": float(per_env.std()),
                           "min": float(per_env.min()), "max": float(per_env.max())}
    team = {tag: np.asarray(r, dtype=np.float64).sum(axis=1).tolist() for tag, r in result["returns"].items()}
    team_stats = {tag: {"mean": float(np.mean(v)), "std": float(np.std(v)),
                        "agents": len(trainer.policies[tag].agent_ids)} for tag, v in team.items()}
    return {"episodes": int(episodes), "mean_return": result["mean_return"], "returns": per_policy,
            "team_returns": team, "team": team_stats, "mean_length": float(np.mean(result["steps"])), "gif": gif,
            "config": config}
