"""``WarpDriveCallbacks``: warp_drive's training callbacks (``training/runs/callbacks.py``) in a Lightning fit."""

from __future__ import annotations

import time
from pathlib import Path

import lightning.pytorch as pl

from warp_drive.training.lightning.module import WarpDriveModule
from warp_drive.training.run import checkpoint_state, claim_run_dir, default_callbacks, due
from warp_drive.training.runs.callbacks import Callback, TrainingLoop, check_callback, emit, emit_exception
from warp_drive.training.runs.loggers import check_wandb


class WarpDriveCallbacks(pl.Callback):
    """warp_drive's training callbacks (``runs/callbacks.py``) in a Lightning fit: what ``warp-drive train`` writes.

        module = WarpDriveModule(load_config("cartpole"))
        lightning.Trainer(max_epochs=1, callbacks=[WarpDriveCallbacks()]).fit(module)

    By default it runs ``warp-drive train``'s callbacks but its progress bar
    (Lightning draws its own): ``config.yaml`` and ``provenance.yaml``, the
    metrics to ``metrics.csv`` and TensorBoard (and W&B with ``track``),
    checkpoints in warp_drive's format (``warp-drive evaluate RUN`` and
    ``warp-drive train --resume RUN`` read them), ``episode.gif`` of envs that
    draw themselves, and the before/after summary; then ``callbacks``, the same
    :class:`~warp_drive.training.runs.callbacks.Callback` objects as
    ``run.train(callbacks=)`` and ``--callback`` take. ``defaults=False`` runs
    ``callbacks`` alone.

    They hear of the fit as of ``warp-drive train``'s loop, through the same
    functions: ``on_iteration_end`` after every batch (a rollout and its
    update); ``on_log`` on the batches Lightning writes logs on (every
    ``log_every_n_steps``-th and the run's last: the counterpart of
    ``saving.metrics_log_freq``) with exactly the metrics Lightning's loggers
    get; ``on_checkpoint`` every ``saving.model_params_save_freq`` iterations
    and at the last. Under DDP every rank runs them, with metrics and
    checkpoint state gathered over ranks.

    ``run_dir``: where the files go, by default a new
    ``saving.basedir/name/tag/<timestamp>``. A resumed fit (``ckpt_path=``) may
    continue in the directory of the run it resumes (its metric rows after
    the checkpoint are replaced); a fresh fit refuses a directory holding files.
    """

    def __init__(self, *callbacks: Callback, run_dir: str | Path | None = None, defaults: bool = True,
                 track: bool = False):
        super().__init__()
        self.callbacks = [check_callback(c, f"WarpDriveCallbacks argument {i}") for i, c in enumerate(callbacks)]
        self.run_dir, self.defaults, self.track = run_dir, defaults, track
        self.loop: TrainingLoop | None = None
        self._running: list[Callback] = []
        self._lock = None

    @staticmethod
    def _module(pl_module) -> WarpDriveModule:
        if not isinstance(pl_module, WarpDriveModule):
            raise TypeError(f"WarpDriveCallbacks runs warp_drive's callbacks around a WarpDriveModule; "
                            f"got {type(pl_module).__name__}")
        return pl_module

    def on_train_start(self, trainer, pl_module) -> None:
        warp = self._module(pl_module).warp_trainer
        if self.track:
            check_wandb(warp.config.saving.wandb)  # before a run directory is made
        dist, resuming, run_dir = warp.distributed, trainer.ckpt_path is not None, None
        if dist is None or dist.is_main:  # one rank makes and holds the directory; the others are told where
            run_dir, self._lock = claim_run_dir(warp.config, self.run_dir, resuming)
        if dist is not None:
            run_dir = Path(dist.broadcast_object(None if run_dir is None else str(run_dir)))
        self.loop = TrainingLoop(warp, warp.config, run_dir, dist, resumed=resuming, start_steps=warp.env_steps)
        self._running = [*(default_callbacks(progress=False, track=self.track) if self.defaults else ()),
                         *self.callbacks]
        emit(self._running, "on_train_start", self.loop)
        self.loop.started = time.perf_counter()

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        module, loop = self._module(pl_module), self.loop
        emit(self._running, "on_iteration_end", loop, module.iteration_metrics)
        if module.log_step_metrics is not None:
            loop.local_metrics, logged = module.log_step_metrics
            emit(self._running, "on_log", loop, logged)
        stopping = loop.stop_requested  # trainer.stop_at_return reached: the fit ends after this batch, saved
        if stopping or due(loop.trainer, loop.config.saving.model_params_save_freq):
            emit(self._running, "on_checkpoint", loop, checkpoint_state(loop))
        if stopping:
            trainer.should_stop = True

    def on_train_end(self, trainer, pl_module) -> None:
        self.loop.elapsed = time.perf_counter() - self.loop.started
        try:
            emit(self._running, "on_train_end", self.loop)
        finally:
            self._release()

    def on_exception(self, trainer, pl_module, exception: BaseException) -> None:
        try:
            if self.loop is not None:
                emit_exception(self._running, self.loop, exception)
        finally:
            self._release()

    def teardown(self, trainer, pl_module, stage: str) -> None:
        self._release()

    def _release(self) -> None:
        if self._lock is not None:
            self._lock.release()
            self._lock = None
