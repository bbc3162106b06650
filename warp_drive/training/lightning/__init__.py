"""PyTorch Lightning integration: the warp_drive ``Trainer`` driven by ``lightning.Trainer``.

    import lightning
    from warp_drive.training.config import load_config
    from warp_drive.training.lightning import RolloutDataModule, WarpDriveModule

    module = WarpDriveModule(load_config("cartpole"))
    lightning.Trainer(max_epochs=1, log_every_n_steps=1).fit(module, RolloutDataModule(module))

How the two training loops map onto each other, and why:

* **A batch is a rollout.** When Lightning asks the data loader for the next
  batch, the warp_drive ``Trainer.collect_rollout()`` steps every env on the
  device for ``rollout_length`` steps; the batch is a ``Rollout`` of the
  buffers themselves (views of device tensors: nothing is copied). The loader has a
  length, so Lightning does not prefetch: every rollout is collected by the
  current policy, right before the update that uses it.
* **A training step is the Trainer's update.** ``training_step`` calls
  ``Trainer.update`` -- the same GAE and A2C / PPO code as ``warp-drive
  train`` -- with Lightning's wrapped optimizers and ``manual_backward``, so
  Lightning's precision plugin, strategy and ``on_before_backward`` /
  ``on_before_optimizer_step`` callbacks see every gradient step. PPO takes
  ``num_epochs x num_minibatches`` steps per rollout, hence manual
  optimization; ``trainer.global_step`` therefore counts optimizer steps, and
  so do ``max_steps`` and ``ModelCheckpoint(every_n_train_steps=...)`` (use
  ``limit_train_batches`` to count rollouts). Such a checkpoint holds the state
  after the rollout's update, which is what resuming needs (Lightning warns
  that it is not the "pre-optimization state"; that is intended here).
* **An epoch is the config's whole run** (``trainer.total_steps`` env steps,
  the horizon of the learning-rate and entropy schedules); fit stops once the
  warp_drive Trainer has run all its iterations.
* **Metrics** carry the same names as ``warp-drive train``'s metrics.csv
  (``losses/<name>/<policy>``, ``charts/episodic_return/<policy>``,
  ``charts/SPS``, ``time/<phase>``, ``charts/env_steps``) and go to
  Lightning's loggers and ``trainer.callback_metrics`` through ``log_dict`` on
  the batches Lightning writes, every ``log_every_n_steps``-th (default 50;
  pass 1 to record every rollout): the counterpart of ``metrics_log_freq``.
  The episodic return is the mean over the episodes ended since the last write.
* **Checkpoints** are Lightning's own plus the warp_drive ``Trainer.state_dict()``
  (env arrays, sampler and reset counters, RNG states, episode tallies) under
  the ``"warp_drive"`` key, so ``fit(..., ckpt_path=...)`` continues exactly
  where the run stopped; that entry also loads into a plain ``Trainer``
  (``build(config).load_state_dict(torch.load(path, weights_only=True)["warp_drive"])``; never
  an unrestricted unpickling, which runs whatever code a planted checkpoint holds).
* **warp_drive's callbacks** (``runs/callbacks.py``: metrics to CSV, TensorBoard
  and W&B, provenance, checkpoints in warp_drive's format, the GIF, the
  summary, and users' own) run in a fit through the Lightning callback
  ``WarpDriveCallbacks``, with the same metric gathering (``run.gather_metrics``)
  and checkpoint state (``run.checkpoint_state``) as ``warp-drive train``.
* **Devices.** The env runs where Lightning trains: with ``backend: auto``
  the cpu executor under ``accelerator="cpu"`` and PyCUDA under
  ``accelerator="gpu"``; an explicit backend must keep its arrays where the
  accelerator trains (its ``capabilities.memory``: ``cpu`` and ``cpu-gpu``
  under ``accelerator="cpu"``, ``pycuda`` under ``accelerator="gpu"``).
  With ``devices=N`` (a DDP strategy) every process is one data-parallel rank
  exactly as under ``torchrun``: its own envs (seed ``seed + rank``), rank 0's
  initial parameters, gradients averaged by ``Distributed.average_gradients``
  (Lightning's DDP gradient sync is switched off for the update so that the
  gradients are averaged once), and metrics aggregated over ranks.

WarpDrive 2.7's Lightning API (``warp_drive.training.pytorch_lightning``:
``WarpDriveModule(env_wrapper=, config=, policy_tag_to_agent_id_map=, ...)``,
whose epoch is one rollout as WarpDrive counted, ``CUDACallback`` and
``PerfStatsCallback``) is written over these classes in
:mod:`warp_drive.compat.lightning`.

The classes live in ``lightning/data.py`` (the batch), ``lightning/module.py``
(the module) and ``lightning/callbacks.py``; this package's ``__init__`` checks that Lightning
2 is installed and names them. They are ``lightning.pytorch`` classes; the
standalone ``pytorch_lightning`` package is a separate copy whose ``Trainer``
refuses them, and ``over_lightning_package(WarpDriveModule,
"pytorch_lightning")`` (likewise ``RolloutDataModule``) is the same class
over that package (the logic is written once, in mixins).

The warp_drive Trainer (env, models, optimizers) is built in ``setup()``, when
Lightning knows the device and the process's rank; ``warp_trainer`` holds it.
The policies train in float32 (``precision="32-true"``); other precisions are
refused (see ``SUPPORTED_PRECISIONS``).
"""

from __future__ import annotations

_INSTALL_HINT = "pip install 'warp-drive[lightning]' (or pip install 'lightning>=2.2')"
try:
    import lightning
except ImportError as exc:  # pragma: no cover - exercised only without lightning
    raise ImportError(f"warp_drive.training.lightning needs PyTorch Lightning 2.x: {_INSTALL_HINT}") from exc

if int(lightning.__version__.split(".")[0]) < 2:  # pragma: no cover
    raise ImportError(f"warp_drive.training.lightning needs Lightning >= 2.2, found {lightning.__version__}: "
                      f"{_INSTALL_HINT}")

from warp_drive.training.lightning.callbacks import WarpDriveCallbacks  # noqa: E402
from warp_drive.training.lightning.data import Rollout, RolloutLoader  # noqa: E402
from warp_drive.training.lightning.module import (  # noqa: E402
    CHECKPOINT_KEY,
    SUPPORTED_PRECISIONS,
    RolloutDataModule,
    WarpDriveModule,
    over_lightning_package,
)

__all__ = ["CHECKPOINT_KEY", "SUPPORTED_PRECISIONS", "Rollout", "RolloutDataModule", "RolloutLoader",
           "WarpDriveCallbacks", "WarpDriveModule", "over_lightning_package"]
