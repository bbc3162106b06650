"""Callbacks of the training loop (``run.train``): everything around ``trainer.iterate()``.

The loop itself (``run.run_loop``) only iterates, gathers the metrics at log
steps and the state at checkpoint steps; writing metrics, checkpoints, the
progress bar, the before/after evaluation and summary, and the GIF are the
callbacks below. Users add their own with ``run.train(config, callbacks=[...])``
or ``warp-drive train --callback module:Class`` (a class built with no
arguments); ``lightning.WarpDriveCallbacks`` runs the same callbacks in a
``lightning.Trainer`` fit.

Every rank of a distributed run calls every callback: a method that collects
over ranks (``loop.dist``) must run on all of them; one that writes files
checks ``loop.is_main``. The methods, in order:

``on_train_start(loop)``
    once, after the trainer is built (and restored when resuming).
``on_iteration_end(loop, metrics)``
    after every iteration, with this rank's own metrics of it.
``on_log(loop, metrics)``
    every ``saving.metrics_log_freq`` iterations and at the last: the
    iteration's metrics plus episode statistics, aggregated over ranks
    (``loop.local_metrics`` holds this rank's before aggregation). A metric
    without a value yet (no episode has ended) is absent.
``on_checkpoint(loop, state)``
    every ``saving.model_params_save_freq`` iterations and at the last, with
    the trainer state to save (every rank's envs included in a distributed run).
``on_train_end(loop)``
    once, after the last iteration (not when training failed).
``on_exception(loop, error)``
    instead of ``on_train_end`` when an iteration or a callback raised; for
    releasing files. The error then propagates.
"""

from __future__ import annotations

import importlib
import logging
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from warp_drive.training.config import ConfigError
from warp_drive.training.runs.checkpoint import save_checkpoint
from warp_drive.training.runs.layout import write_run_file
from warp_drive.training.runs.loggers import default_loggers, provenance
from warp_drive.training.runs.metrics import Progress, format_summary

if TYPE_CHECKING:
    from warp_drive.training.config import RunConfig
    from warp_drive.training.distributed import Distributed
    from warp_drive.training.loop import OnDeviceTrainer as Trainer
    from warp_drive.training.runs.loggers import Logger

__all__ = ["Callback", "TrainingLoop", "ProgressBar", "MetricsLogger", "CheckpointSaver", "EpisodeRenderer",
           "EvaluationSummary", "emit", "emit_exception", "check_callback",
           "load_callback"]

log = logging.getLogger("warp_drive")


@dataclass
class TrainingLoop:
    """What callbacks see of the running loop."""

    trainer: Trainer
    config: RunConfig
    run_dir: Path
    dist: Distributed | None = None
    resumed: bool = False
    start_steps: int = 0  # the trainer's env steps when this session began (a resume's checkpoint)
    started: float = field(default_factory=time.perf_counter)
    elapsed: float = 0.0  # seconds of training (set before on_train_end)
    # seconds from the process's launch to the start of this session's first iteration (set by the loop)
    first_iteration_after: float | None = None
    stop_requested: bool = False  # a callback asks the loop to end after this iteration (logs and saves first)
    local_metrics: dict[str, float] = field(default_factory=dict)  # this rank's, before aggregation
    artifacts: dict[str, Path] = field(default_factory=dict)  # files callbacks made (e.g. "gif")
    # An episode of every env with the final policies (``Trainer.run_episodes``), played once at the end by the
    # first callback that needs it: the GIF draws its env 0, the summary averages its returns.
    final_episodes: dict[str, Any] | None = None

    @property
    def rank(self) -> int:
        return 0 if self.dist is None else self.dist.rank

    @property
    def world_size(self) -> int:
        return 1 if self.dist is None else self.dist.world_size

    @property
    def is_main(self) -> bool:
        return self.dist is None or self.dist.is_main

    @property
    def global_step(self) -> int:
        """Env steps of every rank (the x axis of the metrics)."""
        return self.trainer.env_steps * self.world_size


class Callback:
    """Base class: override the methods you need (see the module docstring)."""

    def on_train_start(self, loop: TrainingLoop) -> None:
        pass

    def on_iteration_end(self, loop: TrainingLoop, metrics: dict[str, float]) -> None:
        pass

    def on_log(self, loop: TrainingLoop, metrics: dict[str, float]) -> None:
        pass

    def on_checkpoint(self, loop: TrainingLoop, state: dict[str, Any]) -> None:
        pass

    def on_train_end(self, loop: TrainingLoop) -> None:
        pass

    def on_exception(self, loop: TrainingLoop, error: BaseException) -> None:
        pass


class ProgressBar(Callback):
    """A tqdm bar over iterations (main process) with SPS and the latest episodic returns."""

    def __init__(self, enabled: bool = True):
        self.enabled = enabled
        self.bar = None

    def on_train_start(self, loop: TrainingLoop) -> None:
        self.bar = Progress(loop.trainer.num_iterations, enabled=self.enabled and loop.is_main,
                            initial=loop.trainer.iteration)

    def on_log(self, loop: TrainingLoop, metrics: dict[str, float]) -> None:
        returns = {k.rsplit("/", 1)[-1]: v for k, v in metrics.items() if k.startswith("charts/episodic_return/")}
        self.bar.update(0, {"SPS": f"{metrics['charts/SPS']:,.0f}", **{k: f"{v:.2f}" for k, v in returns.items()}})

    def on_iteration_end(self, loop: TrainingLoop, metrics: dict[str, float]) -> None:
        self.bar.update(1, {})

    def on_train_end(self, loop: TrainingLoop) -> None:
        self.bar.close()

    def on_exception(self, loop: TrainingLoop, error: BaseException) -> None:
        if self.bar is not None:
            self.bar.close()


class MetricsLogger(Callback):
    """Writes ``provenance.yaml`` and sends config, provenance and metrics to the loggers (main process).

    ``loggers``: objects with the :class:`~warp_drive.training.runs.loggers.Logger`
    methods; default ``metrics.csv`` and TensorBoard, plus W&B with ``track``.
    A resumed run drops the rows its interrupted predecessor logged after the checkpoint.
    """

    def __init__(self, loggers: list[Logger] | None = None, track: bool = False):
        self.loggers = loggers
        self.track = track

    def on_train_start(self, loop: TrainingLoop) -> None:
        if not loop.is_main:
            return

        if self.loggers is None:
            purge = loop.global_step + 1 if loop.resumed else None
            self.loggers = default_loggers(loop.run_dir, loop.config, purge, track=self.track, resume=loop.resumed)
        where = provenance(loop.trainer.env.backend.name, loop.trainer.device)
        write_run_file(loop.run_dir / "provenance.yaml", yaml.safe_dump(where, sort_keys=False))
        for logger in self.loggers:
            logger.log_config(loop.config.to_dict(), where)

    def on_log(self, loop: TrainingLoop, metrics: dict[str, float]) -> None:
        if loop.is_main:
            for logger in self.loggers:
                logger.log_metrics(loop.global_step, metrics)

    def on_train_end(self, loop: TrainingLoop) -> None:
        self.close()

    def on_exception(self, loop: TrainingLoop, error: BaseException) -> None:
        self.close()

    def close(self) -> None:
        for logger in self.loggers or ():
            logger.close()
        self.loggers = []


class CheckpointSaver(Callback):
    """Saves each checkpoint state atomically in ``<run_dir>/checkpoints`` (main process), keeping the newest
    ``saving.keep_checkpoints``."""

    def on_checkpoint(self, loop: TrainingLoop, state: dict[str, Any]) -> None:
        if loop.is_main:
            save_checkpoint(loop.run_dir, loop.trainer.iteration, state, keep=loop.config.saving.keep_checkpoints,
                            policies=loop.trainer.policies,
                            max_weight_magnitude=getattr(loop.config.trainer, "max_weight_magnitude", None))


class EvaluationSummary(Callback):
    """One full episode in every env before and after training, and the end-of-run table (main prints it).

    The returns logged during training favour the episodes that end first;
    a whole episode of every env compares the policies fairly. A resumed run
    has no "before".
    """

    def __init__(self) -> None:
        self.before: dict[str, float] | None = None
        self.team_before: dict[str, float] | None = None

    def on_train_start(self, loop: TrainingLoop) -> None:
        if not loop.resumed:
            self.before, self.team_before = self._mean_returns(loop)

    def on_train_end(self, loop: TrainingLoop) -> None:
        after, team_after = self._mean_returns(loop, loop.final_episodes)
        if loop.is_main:
            print(summary(loop.config, loop.trainer, loop.elapsed, self.before, after, loop.artifacts.get("gif"),
                          loop.world_size, start_steps=loop.start_steps, startup=loop.first_iteration_after,
                          team_before=self.team_before, team_after=team_after))

    @staticmethod
    def _mean_returns(loop: TrainingLoop, played: dict[str, Any] | None = None
                      ) -> tuple[dict[str, float], dict[str, float]]:
        """(per agent, team) mean returns per policy of one episode in every env: the mean over the policy's
        agents, and their sum (``team_returns``), each averaged over the episodes (and over ranks)."""
        played = played or loop.trainer.run_episodes(greedy=False)
        returns, team = played["mean_return"], team_returns(played)
        return (returns, team) if loop.dist is None else (loop.dist.mean_dict(returns), loop.dist.mean_dict(team))


def team_returns(played: dict[str, Any]) -> dict[str, float]:
    """Per policy, the team return of ``Trainer.run_episodes``' episodes: the sum over the policy's agents of
    their episode returns, averaged over the episodes (what a cooperative env's user compares; the per-agent
    mean hides how many agents there are)."""
    return {tag: float(r.sum(axis=1).mean()) for tag, r in played["returns"].items()}


class EpisodeRenderer(Callback):
    """``<run_dir>/episode.gif`` of the trained policies, for envs that can draw themselves
    (``Environment.render_arrays``); nothing for the others."""

    def __init__(self, filename: str = "episode.gif"):
        self.filename = filename

    def on_train_end(self, loop: TrainingLoop) -> None:
        if loop.is_main and can_render(loop.trainer):
            env = loop.trainer.env.env
            loop.final_episodes = loop.trainer.run_episodes(greedy=False, record=tuple(env.render_arrays))
            loop.artifacts["gif"] = Path(env.render(loop.final_episodes["frames"], loop.run_dir / self.filename))


# ---------------------------------------------------------------- what the callbacks above print and draw
def summary(config, trainer, elapsed, before, after, gif, world_size: int = 1, start_steps: int = 0,
            startup: float | None = None, team_before: dict | None = None, team_after: dict | None = None) -> str:
    """The end-of-run table. Speed counts only this session's env steps (``start_steps`` is where a resume began):
    all of a resumed run's steps over this session's seconds reported a meaningless rate. ``startup``: seconds
    from the launch of the process to its first iteration (imports, build, the evaluation before training).
    ``team_before``/``team_after``: the team returns (:func:`team_returns`), printed beside the per-agent means."""
    rows = [{"policy": tag,
             "trained": "yes" if config.policy[tag].to_train else "no",
             "episode return before training": (before or {}).get(tag, float("nan")),
             "after training": after[tag],
             **({"team return before": (team_before or {}).get(tag, float("nan")),
                 "team return after": team_after[tag]} if team_after is not None else {})}
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
        *([f"first iteration {startup:.1f} s after launch (imports, kernel build or cache, the evaluation before "
           f"training)"] if startup is not None else []),
        "Mean return per agent over one full episode in every env, actions sampled from the policy"
        + ("; team return: the policy's agents' returns summed, averaged over the episodes:" if team_after is not None
           else ":"),
        format_summary(rows),
    ]
    if gif is not None:
        lines.append(f"episode of the trained policies: {gif}")
    return "\n".join(lines)


def can_render(trainer: "Trainer") -> bool:
    """Whether the trainer's env draws itself (``Environment.render_arrays``)."""
    return bool(trainer.env.env.render_arrays)


def render_episode(trainer: "Trainer", out: Path, greedy: bool = False, uniform: bool = False) -> Path:
    """A GIF of one episode of env 0 with the current policies (``uniform``: uniformly random legal actions),
    drawn by the env's own ``render``."""
    env = trainer.env.env
    episode = trainer.run_episodes(greedy=greedy, record=tuple(env.render_arrays), uniform=uniform)
    return Path(env.render(episode["frames"], out))


def emit(callbacks: list[Callback], method: str, loop: TrainingLoop, *args: Any) -> None:
    """Call ``method`` of every callback in order (``warp-drive train``'s loop and the Lightning bridge)."""
    for callback in callbacks:
        getattr(callback, method)(loop, *args)


def emit_exception(callbacks: list[Callback], loop: TrainingLoop, error: BaseException) -> None:
    """``on_exception`` of every callback; one that fails is logged, not raised: ``error`` is the one to report."""
    for callback in callbacks:
        try:
            callback.on_exception(loop, error)
        except Exception:
            log.exception("%s.on_exception failed", type(callback).__name__)


def load_callback(spec: str) -> Callback:
    """A callback from ``module:Class`` (``--callback``): the class is imported and built with no arguments."""
    module_name, sep, attr = spec.partition(":")
    if not sep or not module_name or not attr:
        raise ConfigError(f"--callback {spec}: expected module:Class, e.g. my_package.callbacks:PrintReturns")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise ConfigError(f"--callback {spec}: cannot import {module_name} ({exc}); is it on PYTHONPATH?") from None
    target: Any = module
    for part in attr.split("."):
        if not hasattr(target, part):
            raise ConfigError(f"--callback {spec}: {module_name} has no {attr}")
        target = getattr(target, part)
    return check_callback(target() if isinstance(target, type) else target, f"--callback {spec}")


def check_callback(callback: Any, what: str) -> Callback:
    """``callback`` if it has every method of :class:`Callback`, else a ConfigError naming ``what`` and the fix."""
    missing = [m for m in ("on_train_start", "on_iteration_end", "on_log", "on_checkpoint", "on_train_end",
                           "on_exception") if not callable(getattr(callback, m, None))]
    if missing:
        raise ConfigError(f"{what}: not a callback (no {', '.join(missing)}); subclass "
                          f"warp_drive.training.runs.callbacks.Callback")
    return callback
