"""``WarpDriveModule``: a warp_drive trainer as a ``LightningModule`` (``training/lightning/__init__.py`` says how
the two training loops map onto each other), and ``RolloutDataModule``, its data side.

In Lightning 2 the ``lightning`` package (``lightning.pytorch``) and the
standalone ``pytorch_lightning`` package are two copies of the same code,
and each ``Trainer`` accepts only its own copy's ``LightningModule``. So the
logic is written once, in mixins with no Lightning base
(:class:`WarpDriveModuleMixin`, :class:`RolloutDataModuleMixin`), and a
class is that mixin over one package's base: ``WarpDriveModule`` and
``RolloutDataModule`` here are ``lightning.pytorch``'s, and
:func:`over_lightning_package` makes the same class over another package's
(``over_lightning_package(WarpDriveModule, "pytorch_lightning")``). The
package's strategies come from ``lightning`` (the class attribute that names
the package), never from an import of the other copy.
"""

from __future__ import annotations

import functools
import importlib
from contextlib import nullcontext
from types import ModuleType
from typing import Any

import lightning.pytorch as pl
import torch

from warp_drive.runtime.backends import backend_class
from warp_drive.training import distributed
from warp_drive.training.config import RunConfig
from warp_drive.training.lightning.data import Rollout, RolloutLoader
from warp_drive.training.loop import OnDeviceTrainer
from warp_drive.training.run import build, gather_metrics, state_for_rank
from warp_drive.training.runs.checkpoint import CheckpointError, exploded_weight, nonfinite_weight
from warp_drive.training.runs.loggers import provenance

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
# The Lightning 2 packages a module class can be written over: the same code, two copies.
LIGHTNING_PACKAGES = ("lightning.pytorch", "pytorch_lightning")
_INSTALL = {"lightning.pytorch": "pip install 'lightning>=2.2'", "pytorch_lightning": "pip install 'pytorch-lightning>=2.2'"}


def lightning_package(name: str) -> ModuleType:
    """The Lightning package ``name`` (one of :data:`LIGHTNING_PACKAGES`), imported."""
    if name not in LIGHTNING_PACKAGES:
        raise ValueError(f"unknown Lightning package {name!r}: use one of {LIGHTNING_PACKAGES}")
    try:
        package = importlib.import_module(name)
    except ImportError as exc:
        raise ImportError(f"{name} is not installed: {_INSTALL[name]}") from exc
    if int(package.__version__.split(".")[0]) < 2:
        raise ImportError(f"warp_drive's Lightning classes need {name} >= 2.2, found {package.__version__}: "
                          f"{_INSTALL[name]}")
    return package


def over_lightning_package(cls: type, package: str) -> type:
    """``cls`` -- a class of this project written over ``lightning.pytorch`` -- over the Lightning ``package``.

    ``cls`` must be written as ``class X(SomeMixin, <a lightning.pytorch
    class, or another such class>)`` with nothing in its body but its
    docstring (the methods live in the mixins, which both copies share).
    The class returned has the same name and the same mixins, over
    ``package``'s counterparts of the Lightning bases; it is made once per
    (class, package). For ``"lightning.pytorch"`` it is ``cls`` itself (and
    also when ``pytorch_lightning`` is an alias of ``lightning.pytorch``).
    """
    target = lightning_package(package)
    if target is pl or getattr(target, "LightningModule", None) is pl.LightningModule:
        return cls
    return _over(cls, target.__name__)


def _is_lightning_pytorch_class(base: type) -> bool:
    return base.__module__ == "lightning.pytorch" or base.__module__.startswith("lightning.pytorch.")


@functools.lru_cache(maxsize=None)
def _over(cls: type, package: str) -> type:
    target = importlib.import_module(package)
    if not any(_is_lightning_pytorch_class(b) for b in cls.__mro__):
        raise TypeError(f"{cls.__qualname__} is not a lightning.pytorch class")
    methods = sorted(k for k, v in vars(cls).items() if callable(v) or isinstance(v, (property, staticmethod,
                                                                                       classmethod)))
    if methods:  # they would stay bound to cls (zero-argument super() names it): keep them in the mixins
        raise TypeError(f"{cls.__qualname__} defines {methods} in its own body; over_lightning_package needs "
                        f"them in a mixin")
    bases = []
    for base in cls.__bases__:
        if _is_lightning_pytorch_class(base):  # LightningModule, LightningDataModule, Callback: top-level names
            bases.append(getattr(target, base.__name__))
        elif any(_is_lightning_pytorch_class(b) for b in base.__mro__):
            bases.append(_over(base, package))
        else:
            bases.append(base)
    return type(cls.__name__, tuple(bases), {"__module__": cls.__module__, "__qualname__": cls.__qualname__,
                                             "__doc__": cls.__doc__, "lightning": target})


class WarpDriveModuleMixin:
    """What :class:`WarpDriveModule` does (its arguments are documented there), with no Lightning base: a
    class is this mixin over one Lightning package's ``LightningModule``, the package named in ``lightning``.

    WarpDrive 2.7's form, ``WarpDriveModule(env_wrapper=, config=, ...)``, is the
    subclass at WarpDrive's path ``warp_drive.training.pytorch_lightning``
    (:mod:`warp_drive.compat.lightning`).
    """

    lightning: ModuleType = pl  # the Lightning package of the class: lightning.pytorch, or pytorch_lightning

    def __init__(self, source: RunConfig | OnDeviceTrainer | None = None, config: RunConfig | None = None, *,
                 rollouts_per_epoch: int | None = None):
        super().__init__()
        source = self._one_source(source, config)
        if rollouts_per_epoch is not None and (isinstance(rollouts_per_epoch, bool)
                                               or not isinstance(rollouts_per_epoch, int) or rollouts_per_epoch < 1):
            raise ValueError(f"rollouts_per_epoch must be an integer >= 1 (or None: one epoch = the whole run), "
                             f"got {rollouts_per_epoch!r}")
        self.rollouts_per_epoch = rollouts_per_epoch
        if isinstance(source, OnDeviceTrainer) and not isinstance(source.config, RunConfig):
            raise TypeError(f"the trainer's config must be a RunConfig (it names the run in checkpoints and "
                            f"hyper-parameter logs); got {type(source.config).__name__}")
        if isinstance(source, OnDeviceTrainer):
            self.config, self._warp = source.config, None
            self._attach(source)
        elif isinstance(source, RunConfig):
            self.config, self._warp = source, None
        else:
            raise TypeError(f"WarpDriveModule takes a RunConfig (warp_drive.training.config.load_config) or a "
                            f"warp_drive trainer (run.build(config)); got {type(source).__name__}")
        self.automatic_optimization = False  # PPO: several optimizer steps per rollout
        # The last batch's metrics (``iterate()``'s), and when it was a log step (this rank's, the logged)
        # ones after gathering episodes and ranks (else None): what WarpDriveCallbacks hands warp_drive's callbacks.
        self.iteration_metrics: dict[str, float] = {}
        self.log_step_metrics: tuple[dict[str, float], dict[str, float]] | None = None
        self.save_hyperparameters({"config": self.config.to_dict()})

    @staticmethod
    def _one_source(source, config):
        """``source``, or a RunConfig given as ``config=``."""
        if config is None:
            return source
        if source is not None:
            raise TypeError("WarpDriveModule takes one source: a RunConfig or a trainer, not also config=")
        if isinstance(config, dict):
            raise TypeError("WarpDriveModule takes a RunConfig (warp_drive.training.config.load_config), not a dict; "
                            "a WarpDrive run-config dict goes to warp_drive.training.pytorch_lightning's "
                            "WarpDriveModule(env_wrapper=EnvWrapper(...), config=run_config)")
        return config

    # ------------------------------------------------------------------ setup
    @property
    def warp_trainer(self) -> OnDeviceTrainer:
        """The warp_drive trainer: env, policies, optimizers, samplers."""
        if self._warp is None:
            raise RuntimeError("the warp_drive trainer is built when Lightning sets the module up: call "
                               "lightning.Trainer(...).fit(module) first, or pass a built trainer to WarpDriveModule")
        return self._warp

    def _attach(self, trainer: OnDeviceTrainer) -> None:
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
        strategies = self.lightning.strategies
        if not isinstance(strategy, (strategies.SingleDeviceStrategy, strategies.DDPStrategy)):
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
            self._attach(self._build_trainer(self._config_for(device), dist))
        elif self.trainer.world_size > 1:
            raise ValueError("a WarpDriveModule built from an existing trainer runs in one process; for devices > 1 "
                             "build it from the RunConfig, so that every process builds its own envs")
        env_device = self._warp.device
        if (env_device.type, env_device.index or 0) != (device.type, device.index or 0):
            raise ValueError(f"the envs live on {env_device} ({self._warp.env.backend.name} backend) but Lightning "
                             f"trains on {device}: use accelerator='cpu' with the cpu executor (cpu or cpu-gpu) and "
                             f"accelerator='gpu' with pycuda (or set trainer.backend: auto in the config)")

    def _build_trainer(self, config: RunConfig, dist: distributed.Distributed | None) -> OnDeviceTrainer:
        """The trainer of ``config`` on this process (``run.build``)."""
        return build(config, dist)

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
            trainer = self.config.trainer.model_copy(update={"backend": AUTO_BACKEND[device.type]})
            return self.config.model_copy(update={"trainer": trainer})
        memory = backend_class(backend).capabilities.memory
        if memory != MEMORY_OF_DEVICE[device.type]:
            accelerator = next(a for a, m in ACCELERATOR_MEMORY.items() if m == memory)
            raise ValueError(f"the config asks for backend {backend!r} but Lightning trains on {device}: pass "
                             f"accelerator={accelerator!r} or set trainer.backend: auto")
        return self.config

    def _distributed(self, device: torch.device) -> distributed.Distributed | None:
        """This process's rank in Lightning's process group, as the warp_drive trainer's ``Distributed``."""
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
        self._iteration_done(metrics)
        if self._writes_logs_now() or warp.iteration == warp.num_iterations:
            self.log_step_metrics = self._log_metrics(metrics)

    def _iteration_done(self, metrics: dict[str, float]) -> None:
        """After each batch's update, before its metrics are logged: a subclass's outputs (WarpDrive's)."""

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
        nonfinite = nonfinite_weight(state)  # broken weights are never saved, as by warp-drive train
        broken = f"{nonfinite} holds NaN or inf" if nonfinite else exploded_weight(
            warp.policies, getattr(warp.config.trainer, "max_weight_magnitude", None))
        if broken is not None:
            raise CheckpointError(f"not saving the Lightning checkpoint: {broken}; nothing was saved (lower the "
                                  f"learning rate or set max_grad_norm)")
        checkpoint[CHECKPOINT_KEY] = state

    def on_load_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        if CHECKPOINT_KEY not in checkpoint:
            raise KeyError(f"this checkpoint has no {CHECKPOINT_KEY!r} entry: it was not saved by a WarpDriveModule")
        warp = self.warp_trainer
        warp.load_state_dict(state_for_rank(checkpoint[CHECKPOINT_KEY], warp.distributed, "the Lightning checkpoint"))


class WarpDriveModule(WarpDriveModuleMixin, pl.LightningModule):
    """The policies of a warp_drive run as a ``lightning.pytorch`` ``LightningModule`` (see the module docstring).

    ``source`` (or ``config=``) is a ``RunConfig`` (the trainer is built in
    ``setup()``, on the device Lightning chose, one per process) or an existing
    trainer of ``run.build`` (single process; its env already lives on a
    device). ``rollouts_per_epoch``: rollouts per Lightning epoch (default: the
    whole run is one epoch). The same module for ``pytorch_lightning.Trainer``:
    ``over_lightning_package(WarpDriveModule, "pytorch_lightning")``.
    """


class RolloutDataModuleMixin:
    """What :class:`RolloutDataModule` does (over either Lightning package)."""

    def __init__(self, module: WarpDriveModuleMixin):
        super().__init__()
        if not isinstance(module, WarpDriveModuleMixin):
            raise TypeError(f"RolloutDataModule takes the WarpDriveModule whose envs it reads; "
                            f"got {type(module).__name__}")
        self.module = module

    def train_dataloader(self) -> RolloutLoader:
        return self.module.train_dataloader()


class RolloutDataModule(RolloutDataModuleMixin, pl.LightningDataModule):
    """The data side of a warp_drive run: the rollouts of ``module``'s envs, collected on the device.

    The envs belong to the module's warp_drive Trainer (the policies act in
    them), so this only hands Lightning the module's ``RolloutLoader``;
    ``fit(module)`` without a data module does the same.
    """
