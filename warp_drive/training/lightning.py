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
  (``build(config).load_state_dict(torch.load(path, weights_only=False)["warp_drive"])``).
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

The warp_drive Trainer (env, models, optimizers) is built in ``setup()``, when
Lightning knows the device and the process's rank; ``warp_trainer`` holds it.
The policies train in float32 (``precision="32-true"``); other precisions are
refused (see ``SUPPORTED_PRECISIONS``).
"""

from __future__ import annotations

from contextlib import nullcontext
from dataclasses import replace
from typing import Any, Iterator

import torch

from warp_drive.backends import backend_class
from warp_drive.training import distributed
from warp_drive.training.config import RunConfig
from warp_drive.training.run import build, state_for_rank
from warp_drive.training.trainer import Trainer

_INSTALL_HINT = "pip install 'warp-drive[lightning]' (or pip install 'lightning>=2.2')"
try:
    import lightning
    import lightning.pytorch as pl
    from lightning.pytorch.strategies import DDPStrategy, SingleDeviceStrategy
except ImportError as exc:  # pragma: no cover - exercised only without lightning
    raise ImportError(f"warp_drive.training.lightning needs PyTorch Lightning 2.x: {_INSTALL_HINT}") from exc

if int(lightning.__version__.split(".")[0]) < 2:  # pragma: no cover
    raise ImportError(f"warp_drive.training.lightning needs Lightning >= 2.2, found {lightning.__version__}: "
                      f"{_INSTALL_HINT}")

CHECKPOINT_KEY = "warp_drive"
# Mixed precision would compute PPO's probability ratios against the rollout's float32 log-probabilities
# from half-precision logits (and 16-mixed unscales gradients only after the update's grad-norm clip); the
# *-true precisions would cast the models while the env's observations stay float32.
SUPPORTED_PRECISIONS = ("32-true",)
PROGRESS_BAR_KEYS = ("charts/SPS", "charts/episodic_return/")
# Where an executor's arrays live (``Capabilities.memory``) for each kind of device Lightning trains on, the
# accelerator that gives that device, and the executor ``backend: auto`` means there.
MEMORY_OF_DEVICE = {"cpu": "host", "cuda": "cuda"}
ACCELERATOR_MEMORY = {"cpu": "host", "gpu": "cuda"}
AUTO_BACKEND = {"cpu": "cpu", "cuda": "pycuda"}


class Rollout:
    """One batch: the rollout just collected, as views of the Trainer's device buffers (no copies).

    ``policies[tag]`` maps ``obs``, ``final_obs``, ``actions``, ``logprobs``,
    ``values`` and ``rewards`` to ``(T, E * the policy's agents, ...)`` tensors;
    ``done`` is ``(T, E)``. A plain class rather than a dict, so that Lightning
    does not walk it to move or cast tensors that already sit on the device.
    """

    def __init__(self, trainer: Trainer):
        self.iteration = trainer.iteration  # 0-based index of this rollout in the run
        self.env_steps = trainer.env_steps  # env steps collected so far, this rollout included
        self.policies = {tag: dict(p.buffers) for tag, p in trainer.policies.items()}
        self.done = trainer.done_buffer


class RolloutLoader:
    """An iterable of rollouts: each ``next()`` collects one on the device and yields its buffers.

    It stops when the warp_drive Trainer has run the config's iterations. Its
    length is the run's number of iterations (one epoch = the whole run), which
    also stops Lightning from fetching a batch ahead.
    """

    def __init__(self, trainer: Trainer):
        self.trainer = trainer

    def __len__(self) -> int:
        return self.trainer.num_iterations

    def state_dict(self) -> dict[str, int]:
        """Makes Lightning treat the loader as resumable mid-epoch, which it is: the envs, samplers and
        counters it draws from are restored with the rest of the Trainer by ``on_load_checkpoint``."""
        return {"iteration": self.trainer.iteration}

    def load_state_dict(self, state: dict[str, int]) -> None:
        pass  # see state_dict

    def __iter__(self) -> Iterator[Rollout]:
        trainer = self.trainer
        while trainer.iteration < trainer.num_iterations:
            trainer.begin_iteration()
            trainer.collect_rollout()
            yield Rollout(trainer)


class WarpDriveModule(pl.LightningModule):
    """The policies of a warp_drive run as a ``LightningModule`` (see the module docstring).

    ``source`` is a ``RunConfig`` (the Trainer is built in ``setup()``, on the
    device Lightning chose, one per process) or an existing ``Trainer``
    (single process; its env already lives on a device).
    """

    def __init__(self, source: RunConfig | Trainer):
        super().__init__()
        if isinstance(source, Trainer) and not isinstance(source.config, RunConfig):
            raise TypeError(f"the Trainer's config must be a RunConfig (it names the run in checkpoints and "
                            f"hyper-parameter logs); got {type(source.config).__name__}")
        if isinstance(source, Trainer):
            self.config, self._warp = source.config, None
            self._attach(source)
        elif isinstance(source, RunConfig):
            self.config, self._warp = source, None
        else:
            raise TypeError(f"WarpDriveModule takes a RunConfig (warp_drive.training.config.load_config) or a "
                            f"warp_drive Trainer; got {type(source).__name__}")
        self.automatic_optimization = False  # PPO: several optimizer steps per rollout
        self.save_hyperparameters({"config": self.config.to_dict()})

    # ------------------------------------------------------------------ setup
    @property
    def warp_trainer(self) -> Trainer:
        """The warp_drive Trainer: env, policies, optimizers, samplers."""
        if self._warp is None:
            raise RuntimeError("the warp_drive Trainer is built when Lightning sets the module up: call "
                               "lightning.Trainer(...).fit(module) first, or pass a built Trainer to WarpDriveModule")
        return self._warp

    def _attach(self, trainer: Trainer) -> None:
        self._warp = trainer
        # Registered as submodules: Lightning's state_dict, summaries and device moves see the policies.
        self.policies = torch.nn.ModuleDict({tag: p.model for tag, p in trainer.policies.items()})

    def setup(self, stage: str) -> None:
        if stage != "fit":
            return
        strategy = self.trainer.strategy
        if not isinstance(strategy, (SingleDeviceStrategy, DDPStrategy)):
            raise ValueError(f"WarpDriveModule runs with a single-device or DDP strategy (strategy='auto' or "
                             f"'ddp'); got {type(strategy).__name__}")
        precision = str(self.trainer.precision)
        if precision not in SUPPORTED_PRECISIONS:
            raise ValueError(f"lightning.Trainer(precision={precision!r}) is not supported by WarpDriveModule: use "
                             f"precision='32-true' (the default). The policies are small MLPs fed float32 "
                             f"observations; mixed precision would skew PPO's probability ratios and the *-true "
                             f"precisions would not match the env's float32 arrays")
        device = strategy.root_device
        if self._warp is None:
            dist = self._distributed(device)
            self._attach(build(self._config_for(device), dist))
        elif self.trainer.world_size > 1:
            raise ValueError("a WarpDriveModule built from an existing Trainer runs in one process; for devices > 1 "
                             "build it from the RunConfig, so that every process builds its own envs")
        env_device = self._warp.device
        if (env_device.type, env_device.index or 0) != (device.type, device.index or 0):
            raise ValueError(f"the envs live on {env_device} ({self._warp.env.backend.name} backend) but Lightning "
                             f"trains on {device}: use accelerator='cpu' with the cpu executor (cpu or cpu-gpu) and "
                             f"accelerator='gpu' with pycuda (or set trainer.backend: auto in the config)")

    def _config_for(self, device: torch.device) -> RunConfig:
        """The config with ``backend: auto`` resolved to the executor of Lightning's device.

        An explicit backend must keep its arrays where Lightning trains: its
        ``capabilities.memory`` (``"cuda"`` or ``"host"``) is compared with the
        device, so every executor of a kind qualifies (``cpu`` and ``cpu-gpu``
        under ``accelerator="cpu"``).
        """
        backend = self.config.trainer.backend
        if device.type not in MEMORY_OF_DEVICE:
            raise ValueError(f"warp_drive envs run on a CPU (cpu backend) or an NVIDIA GPU (pycuda); "
                             f"Lightning chose {device}: pass accelerator='cpu' or accelerator='gpu'")
        if backend == "auto":
            return replace(self.config, trainer=replace(self.config.trainer, backend=AUTO_BACKEND[device.type]))
        memory = backend_class(backend).capabilities.memory
        if memory != MEMORY_OF_DEVICE[device.type]:
            accelerator = next(a for a, m in ACCELERATOR_MEMORY.items() if m == memory)
            raise ValueError(f"the config asks for backend {backend!r} but Lightning trains on {device}: pass "
                             f"accelerator={accelerator!r} or set trainer.backend: auto")
        return self.config

    def _distributed(self, device: torch.device) -> distributed.Distributed | None:
        """This process's rank in Lightning's process group, as the warp_drive Trainer's ``Distributed``."""
        trainer = self.trainer
        if trainer.world_size == 1:
            return None
        collective_device = device if torch.distributed.get_backend() == "nccl" else torch.device("cpu")
        return distributed.Distributed(trainer.global_rank, trainer.world_size, trainer.local_rank,
                                       collective_device)

    def configure_optimizers(self) -> list[torch.optim.Optimizer]:
        # Every policy's own Adam, frozen ones included, so that checkpoints hold all of them.
        return [p.optimizer for p in self.warp_trainer.policies.values()]

    def train_dataloader(self) -> RolloutLoader:
        return RolloutLoader(self.warp_trainer)

    # ------------------------------------------------------------------ training
    def training_step(self, batch: Rollout, batch_idx: int) -> None:
        warp = self.warp_trainer
        optimizers = self.optimizers()
        if not isinstance(optimizers, list):
            optimizers = [optimizers]
        by_tag = dict(zip(warp.policies, optimizers))
        # Under DDP the update averages gradients itself (Distributed.average_gradients, as under
        # torchrun); Lightning's own sync would average them a second time, so it is blocked here.
        with self.trainer.strategy.block_backward_sync() if warp.distributed is not None else nullcontext():
            metrics = warp.update(optimizers=by_tag, backward=self.manual_backward)
        metrics = warp.end_iteration(metrics)
        if self._writes_logs_now():
            self._log_metrics(metrics)

    def _writes_logs_now(self) -> bool:
        """Whether Lightning writes this batch's metrics (every ``log_every_n_steps``-th batch).

        Metrics are gathered only then, as ``warp-drive train`` does every
        ``metrics_log_freq`` iterations: the episodic return averages every
        episode that ended since the last write, and the ~25 ``self.log``
        calls (about 0.5 ms each) are not paid on batches Lightning would drop.
        """
        connector = getattr(self.trainer, "_logger_connector", None)  # Lightning's own test for a log step
        return True if connector is None else bool(connector.should_update_logs)

    def _log_metrics(self, metrics: dict[str, float]) -> None:
        warp = self.warp_trainer
        episodes = warp.episode_metrics()
        if warp.distributed is not None:
            metrics = warp.distributed.reduce_metrics(metrics)
            episodes = warp.distributed.reduce_episode_metrics(episodes)
        metrics.update(episodes)
        metrics["charts/env_steps"] = float(warp.env_steps * self.trainer.world_size)
        # float64 tensors: Lightning would turn Python floats into float32 (env step counts above 2**24 would round).
        values = {k: torch.tensor(v, dtype=torch.float64) for k, v in metrics.items()}
        shown = {k: v for k, v in values.items() if k.startswith(PROGRESS_BAR_KEYS)}
        rest = {k: v for k, v in values.items() if k not in shown}
        size = warp.batch_env_steps
        self.log_dict(shown, prog_bar=True, on_step=True, on_epoch=False, batch_size=size)
        self.log_dict(rest, on_step=True, on_epoch=False, batch_size=size)

    def on_train_epoch_end(self) -> None:
        warp = self.warp_trainer
        if warp.iteration >= warp.num_iterations:
            self.trainer.should_stop = True  # the config's total_steps are done; a further epoch has no rollouts

    # ------------------------------------------------------------------ checkpoints
    def on_save_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        warp = self.warp_trainer
        state = warp.state_dict()
        if warp.distributed is not None:  # every rank's envs and RNGs, so an N-rank resume continues each rank
            state["ranks"] = warp.distributed.gather_objects(distributed.rank_state(state))
        checkpoint[CHECKPOINT_KEY] = state

    def on_load_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        if CHECKPOINT_KEY not in checkpoint:
            raise KeyError(f"this checkpoint has no {CHECKPOINT_KEY!r} entry: it was not saved by a WarpDriveModule")
        warp = self.warp_trainer
        warp.load_state_dict(state_for_rank(checkpoint[CHECKPOINT_KEY], warp.distributed, "the Lightning checkpoint"))


class RolloutDataModule(pl.LightningDataModule):
    """The data side of a warp_drive run: the rollouts of ``module``'s envs, collected on the device.

    The envs belong to the module's warp_drive Trainer (the policies act in
    them), so this only hands Lightning the module's ``RolloutLoader``;
    ``fit(module)`` without a data module does the same.
    """

    def __init__(self, module: WarpDriveModule):
        super().__init__()
        if not isinstance(module, WarpDriveModule):
            raise TypeError(f"RolloutDataModule takes the WarpDriveModule whose envs it reads; "
                            f"got {type(module).__name__}")
        self.module = module

    def train_dataloader(self) -> RolloutLoader:
        return self.module.train_dataloader()
