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
* **warp_drive's callbacks** (``callbacks.py``: metrics to CSV, TensorBoard
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

WarpDrive 2.7's Lightning API (``warp_drive.training.pytorch_lightning``) is this
module: ``WarpDriveModule(env_wrapper=, config=, policy_tag_to_agent_id_map=, ...)``
(see the class; an epoch is then one rollout, as WarpDrive counted) and the
callbacks ``CUDACallback`` and ``PerfStatsCallback``, all built on
``lightning.pytorch``: pass them to ``lightning.Trainer`` (WarpDrive's
tutorial imported ``pytorch_lightning.Trainer``, a separate package in
Lightning 2 that refuses ``lightning.pytorch`` modules).

The warp_drive Trainer (env, models, optimizers) is built in ``setup()``, when
Lightning knows the device and the process's rank; ``warp_trainer`` holds it.
The policies train in float32 (``precision="32-true"``); other precisions are
refused (see ``SUPPORTED_PRECISIONS``).
"""

from __future__ import annotations

import time
from contextlib import nullcontext
from dataclasses import replace
from pathlib import Path
from typing import Any, Iterator

import torch

from warp_drive.backends import backend_class
from warp_drive.env_wrapper import EnvWrapper
from warp_drive.training import distributed
from warp_drive.training.callbacks import Callback, TrainingLoop, check_callback, emit, emit_exception
from warp_drive.training.config import RunConfig
from warp_drive.training.loggers import check_wandb, provenance
from warp_drive.training.run import (
    build,
    checkpoint_state,
    claim_run_dir,
    default_callbacks,
    due,
    gather_metrics,
    state_for_rank,
)
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

    It stops when the warp_drive Trainer has run the config's iterations, or
    after ``rollouts_per_epoch`` rollouts when that is given (WarpDrive's
    epochs). Its length is the epoch's number of rollouts (by default the
    run's iterations: one epoch = the whole run), which also stops Lightning
    from fetching a batch ahead.
    """

    def __init__(self, trainer: Trainer, rollouts_per_epoch: int | None = None):
        self.trainer = trainer
        self.rollouts_per_epoch = rollouts_per_epoch

    def __len__(self) -> int:
        return self.rollouts_per_epoch or self.trainer.num_iterations

    def state_dict(self) -> dict[str, int]:
        """Makes Lightning treat the loader as resumable mid-epoch, which it is: the envs, samplers and
        counters it draws from are restored with the rest of the Trainer by ``on_load_checkpoint``."""
        return {"iteration": self.trainer.iteration}

    def load_state_dict(self, state: dict[str, int]) -> None:
        pass  # see state_dict

    def __iter__(self) -> Iterator[Rollout]:
        trainer, left = self.trainer, self.rollouts_per_epoch
        while trainer.iteration < trainer.num_iterations and (left is None or left > 0):
            left = None if left is None else left - 1
            trainer.begin_iteration()
            trainer.collect_rollout()
            yield Rollout(trainer)


class WarpDriveModule(pl.LightningModule):
    """The policies of a warp_drive run as a ``LightningModule`` (see the module docstring).

    ``source`` is a ``RunConfig`` (the Trainer is built in ``setup()``, on the
    device Lightning chose, one per process) or an existing ``Trainer``
    (single process; its env already lives on a device).

    WarpDrive 2.7's form, ``WarpDriveModule(env_wrapper=, config=,
    policy_tag_to_agent_id_map=, create_separate_placeholders_for_each_policy=False,
    obs_dim_corresponding_to_num_agents="first", results_dir=None, verbose=True)``
    (keywords or WarpDrive's positional order), builds the warp_drive
    ``Trainer(env_wrapper, config=config, ...)`` at once from those arguments:
    ``config`` may be a WarpDrive run-config dict (translated by the Trainer,
    the translation printed when ``verbose``) or our config. It then runs as
    WarpDrive's module did: **an epoch is one rollout** (its tutorial counts
    ``max_epochs`` in iterations; ``rollouts_per_epoch`` overrides this), the
    WarpDrive metrics block is printed every ``saving.metrics_log_freq``
    iterations when ``verbose`` and written to ``results.json``, and the
    ``<policy>_<env steps>.state_dict`` files are saved every
    ``saving.model_params_save_freq`` iterations and at the last, under
    ``saving.basedir/name/tag/<results_dir or a timestamp>`` (``save_dir``).
    Fit stops once the config's iterations are done, whatever ``max_epochs``
    says. Its envs live where the wrapper put them: ``env_backend="cpu"``
    goes with ``accelerator="cpu"``, ``"pycuda"`` with ``accelerator="gpu"``.
    """

    def __init__(self, source: RunConfig | Trainer | EnvWrapper | None = None, config: Any = None,
                 policy_tag_to_agent_id_map: dict | None = None,
                 create_separate_placeholders_for_each_policy: bool = False,
                 obs_dim_corresponding_to_num_agents: str = "first", results_dir: str | None = None,
                 verbose: bool = True, *, env_wrapper: EnvWrapper | None = None,
                 rollouts_per_epoch: int | None = None):
        super().__init__()
        warpdrive_form = env_wrapper is not None or isinstance(source, EnvWrapper)
        if warpdrive_form:
            source = self._warpdrive_trainer(source, env_wrapper, config, policy_tag_to_agent_id_map,
                                             create_separate_placeholders_for_each_policy,
                                             obs_dim_corresponding_to_num_agents, results_dir, verbose)
        else:
            source = self._our_source(source, config, policy_tag_to_agent_id_map)
        if rollouts_per_epoch is not None and (isinstance(rollouts_per_epoch, bool)
                                               or not isinstance(rollouts_per_epoch, int) or rollouts_per_epoch < 1):
            raise ValueError(f"rollouts_per_epoch must be an integer >= 1 (or None: one epoch = the whole run), "
                             f"got {rollouts_per_epoch!r}")
        self.rollouts_per_epoch = rollouts_per_epoch if rollouts_per_epoch or not warpdrive_form else 1
        self.warpdrive_outputs = warpdrive_form  # WarpDrive's printed metrics, results.json and model files
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
        # The last batch's metrics (``Trainer.iterate()``'s), and when it was a log step (this rank's, the logged)
        # ones after gathering episodes and ranks (else None): what WarpDriveCallbacks hands warp_drive's callbacks.
        self.iteration_metrics: dict[str, float] = {}
        self.log_step_metrics: tuple[dict[str, float], dict[str, float]] | None = None
        self.save_hyperparameters({"config": self.config.to_dict()})

    @staticmethod
    def _warpdrive_trainer(source, env_wrapper, config, policy_tag_to_agent_id_map, separate_placeholders,
                           obs_dim, results_dir, verbose) -> Trainer:
        """The Trainer of WarpDrive's form, built by the Trainer's own WarpDrive constructor."""
        if isinstance(source, EnvWrapper):
            if env_wrapper is not None:
                raise TypeError("WarpDriveModule got the env wrapper twice (positionally and as env_wrapper=)")
            env_wrapper = source
        elif source is not None:
            raise TypeError(f"WarpDriveModule(env_wrapper=...) takes its run config as config=, not a "
                            f"{type(source).__name__} as the first argument")
        if not isinstance(env_wrapper, EnvWrapper):
            raise TypeError(f"env_wrapper must be a warp_drive EnvWrapper, got {type(env_wrapper).__name__}")
        if config is None:
            raise TypeError("WarpDriveModule(env_wrapper=...) needs config=: a WarpDrive run-config dict "
                            "(tutorial 7's run_config) or a RunConfig")
        return Trainer(env_wrapper, config=config, policy_tag_to_agent_id_map=policy_tag_to_agent_id_map,
                       create_separate_placeholders_for_each_policy=separate_placeholders,
                       obs_dim_corresponding_to_num_agents=obs_dim, results_dir=results_dir, verbose=verbose)

    @staticmethod
    def _our_source(source, config, policy_tag_to_agent_id_map):
        """``source``, or a RunConfig given as ``config=``; WarpDrive's arguments need its env wrapper."""
        if config is not None:
            if source is not None:
                raise TypeError("WarpDriveModule takes one source: a RunConfig or a Trainer, not also config=")
            if isinstance(config, dict):
                raise TypeError("a WarpDrive run-config dict needs its env: WarpDriveModule(env_wrapper=EnvWrapper("
                                "...), config=run_config, policy_tag_to_agent_id_map=...)")
            source = config
        if policy_tag_to_agent_id_map is not None:
            raise TypeError("policy_tag_to_agent_id_map goes with env_wrapper= (WarpDrive's form); a RunConfig "
                            "names its policies' agents itself")
        return source

    # ------------------------------------------------------------------ WarpDrive 2.7's module attributes
    @property
    def cuda_envs(self) -> EnvWrapper:
        """WarpDrive's name for the env wrapper."""
        return self.warp_trainer.env

    @property
    def num_iters(self) -> int:
        """The run's number of iterations (rollouts), WarpDrive's ``num_iters``."""
        return self.warp_trainer.num_iterations

    @property
    def training_batch_size(self) -> int:
        """Env steps per iteration over all envs (WarpDrive's ``train_batch_size``)."""
        return self.warp_trainer.batch_env_steps

    @property
    def save_dir(self):
        """Where WarpDrive's outputs go (the Trainer's results directory)."""
        return self.warp_trainer.save_dir

    def reset_all_envs(self) -> None:
        """Reset every env and drop the partial episode returns (``CUDACallback`` does this at train start)."""
        warp = self.warp_trainer
        warp.env.reset_all_envs()
        for p in warp.policies.values():
            p.running_return.zero_()

    def fetch_episode_states(self, *args, **kwargs):
        """The warp_drive ``Trainer.fetch_episode_states`` (WarpDrive's module had it; the animation uses it)."""
        return self.warp_trainer.fetch_episode_states(*args, **kwargs)

    def evaluate_episodes(self, *args, **kwargs):
        return self.warp_trainer.evaluate_episodes(*args, **kwargs)

    def load_model_checkpoint(self, *args, **kwargs):
        return self.warp_trainer.load_model_checkpoint(*args, **kwargs)

    def save_model_checkpoint(self, *args, **kwargs):
        return self.warp_trainer.save_model_checkpoint(*args, **kwargs)

    def graceful_close(self) -> None:
        self.warp_trainer.graceful_close()

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

    def on_fit_start(self) -> None:
        """The run's provenance (versions, git commit, backend, device) to Lightning's loggers beside the
        config, as ``warp-drive train`` writes ``provenance.yaml``."""
        where = provenance(self.warp_trainer.env.backend.name, self.warp_trainer.device)
        for logger in self.loggers:
            logger.log_hyperparams({"provenance": where})

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
        return RolloutLoader(self.warp_trainer, self.rollouts_per_epoch)

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
        self.iteration_metrics, self.log_step_metrics = metrics, None
        if self.warpdrive_outputs:
            self._write_warpdrive_outputs(metrics)
        if self._writes_logs_now() or warp.iteration == warp.num_iterations:
            self.log_step_metrics = self._log_metrics(metrics)

    def _write_warpdrive_outputs(self, metrics: dict[str, float]) -> None:
        """WarpDrive's module outputs, on the schedule of ``Trainer.train()``: the metrics block (printed when
        verbose) and ``results.json`` every ``metrics_log_freq`` iterations, the model files every
        ``model_params_save_freq``, both at the last iteration too."""
        warp, saving = self.warp_trainer, self.warp_trainer.config.saving
        if due(warp, saving.metrics_log_freq):
            # reset=False: the episodes stay counted for Lightning's own log of this batch.
            warp._log_warpdrive_metrics(warp, {**metrics, **warp.episode_metrics(reset=False)})
        if due(warp, saving.model_params_save_freq):
            warp._write_models()

    def _writes_logs_now(self) -> bool:
        """Whether Lightning writes this batch's metrics (every ``log_every_n_steps``-th batch).

        Metrics are gathered only then (and at the run's last iteration), as
        ``warp-drive train`` does every ``metrics_log_freq`` iterations: the
        episodic return averages every episode that ended since the last write,
        and the ~25 ``self.log`` calls (about 0.5 ms each) are not paid on
        batches Lightning would drop.
        """
        connector = getattr(self.trainer, "_logger_connector", None)  # Lightning's own test for a log step
        return True if connector is None else bool(connector.should_update_logs)

    def _log_metrics(self, metrics: dict[str, float]) -> tuple[dict[str, float], dict[str, float]]:
        """Gather (``run.gather_metrics``: episodes, the mean over ranks) and log this batch's metrics; returns
        (this rank's, the logged ones) for the ``WarpDriveCallbacks`` bridge's ``on_log``."""
        warp = self.warp_trainer
        local, logged = gather_metrics(warp, metrics)
        values = {**logged, "charts/env_steps": float(warp.env_steps * self.trainer.world_size)}
        # float64 tensors: Lightning would turn Python floats into float32 (env step counts above 2**24 would round).
        tensors = {k: torch.tensor(v, dtype=torch.float64) for k, v in values.items()}
        shown = {k: v for k, v in tensors.items() if k.startswith(PROGRESS_BAR_KEYS)}
        rest = {k: v for k, v in tensors.items() if k not in shown}
        size = warp.batch_env_steps
        self.log_dict(shown, prog_bar=True, on_step=True, on_epoch=False, batch_size=size)
        self.log_dict(rest, on_step=True, on_epoch=False, batch_size=size)
        return local, logged

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


class WarpDriveCallbacks(pl.Callback):
    """warp_drive's training callbacks (``callbacks.py``) in a Lightning fit: the files ``warp-drive train`` writes.

        module = WarpDriveModule(load_config("cartpole"))
        lightning.Trainer(max_epochs=1, callbacks=[WarpDriveCallbacks()]).fit(module)

    By default it runs ``warp-drive train``'s callbacks but its progress bar
    (Lightning draws its own): ``config.yaml`` and ``provenance.yaml``, the
    metrics to ``metrics.csv`` and TensorBoard (and W&B with ``track``),
    checkpoints in warp_drive's format (``warp-drive evaluate RUN`` and
    ``warp-drive train --resume RUN`` read them), ``episode.gif`` of envs that
    draw themselves, and the before/after summary; then ``callbacks``, the same
    :class:`~warp_drive.training.callbacks.Callback` objects as
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
        if due(loop.trainer, loop.config.saving.model_params_save_freq):
            emit(self._running, "on_checkpoint", loop, checkpoint_state(loop))

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


class CUDACallback(pl.Callback):
    """WarpDrive's ``CUDACallback(module)``: resets every env of ``module`` when training starts, says when it ends.

    The reset also drops partial episode returns, so the first episodes' returns
    count only their own rewards. (It resets after a checkpoint is restored too,
    as WarpDrive did; leave the callback out to resume a run exactly.)
    """

    def __init__(self, module: WarpDriveModule):
        super().__init__()
        if not isinstance(module, WarpDriveModule):
            raise TypeError(f"CUDACallback takes the WarpDriveModule whose envs it resets; got {type(module).__name__}")
        self.module = module
        self.resets = 0

    def on_train_start(self, trainer, pl_module) -> None:
        self.module.reset_all_envs()
        self.resets += 1

    def on_train_end(self, trainer, pl_module) -> None:
        print("Training is complete!")


class PerfStatsCallback(pl.Callback):
    """WarpDrive's ``PerfStatsCallback(batch_size, num_iters, log_freq=1)``: prints the throughput while fitting.

    The numbers are the warp_drive Trainer's own (``Trainer.perf_stats``, timed
    from the start of each rollout to the end of its update, after waiting for
    the device), printed every ``log_freq`` iterations, at the last, and with
    the fit's wall time at the end of ``fit``; each printed dict is kept in
    ``history``. Unlike WarpDrive's (which timed only the update and divided
    all the env steps by that time), "training" and "total" here are the update
    and the whole iteration, the rollout included. ``batch_size`` must be the
    module's env steps per iteration (``module.training_batch_size``): the
    steps per second are counted from the steps actually run, and a different
    number would silently disagree with them.
    """

    def __init__(self, batch_size: int | None = None, num_iters: int | None = None, log_freq: int = 1):
        super().__init__()
        for name, value in (("batch_size", batch_size), ("num_iters", num_iters), ("log_freq", log_freq)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"PerfStatsCallback: {name} must be an integer >= 1, got {value!r}")
        self.batch_size, self.num_iters, self.log_freq = batch_size, num_iters, log_freq
        self.iters = 0
        self.history: list[dict[str, float]] = []
        self._fit_started = 0.0

    def _warp(self, pl_module) -> Trainer:
        if not isinstance(pl_module, WarpDriveModule):
            raise TypeError(f"PerfStatsCallback reports a WarpDriveModule's throughput; got {type(pl_module).__name__}")
        return pl_module.warp_trainer

    def on_fit_start(self, trainer, pl_module) -> None:
        self._fit_started = time.perf_counter()

    def on_train_start(self, trainer, pl_module) -> None:
        steps = self._warp(pl_module).batch_env_steps
        if steps != self.batch_size:
            raise ValueError(f"PerfStatsCallback(batch_size={self.batch_size}) but the module runs {steps} env steps "
                             f"per iteration: pass batch_size=module.training_batch_size")

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        self.iters += 1
        if self.iters % self.log_freq == 0 or self.iters == self.num_iters:
            self._report(self._warp(pl_module).perf_stats.get_perf_stats())

    def on_fit_end(self, trainer, pl_module) -> None:
        stats = self._warp(pl_module).perf_stats
        elapsed = time.perf_counter() - self._fit_started
        fit = {"Mean fit time per iter (ms)": elapsed * 1000 / stats.iters if stats.iters else float("nan"),
               "Mean steps per sec (fit)": stats.steps / elapsed if elapsed > 0 else float("nan")}
        self._report({**stats.get_perf_stats(), **fit})

    def _report(self, stats: dict[str, float]) -> None:
        self.history.append(dict(stats))
        print("=" * 40)
        print("Speed performance stats")
        print("=" * 40)
        print(f"{'Iteration':40}: {f'{self.iters} / {self.num_iters}':13}")
        for key, value in stats.items():
            print(f"{key:40}: {value:10.2f}")
        print()
