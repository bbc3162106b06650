"""WarpDrive 2.7's Lightning API over this project's (:mod:`warp_drive.training.lightning`).

``WarpDriveModule(env_wrapper=, config=, policy_tag_to_agent_id_map=,
create_separate_placeholders_for_each_policy=False,
obs_dim_corresponding_to_num_agents="first", results_dir=None, verbose=True)``
(keywords or WarpDrive's positional order) builds WarpDrive's
``Trainer(env_wrapper, config=config, ...)`` at once from those arguments:
``config`` may be a WarpDrive run-config dict (translated by the Trainer, the
translation printed when ``verbose``) or our config. It then runs as
WarpDrive's module did: **an epoch is one rollout** (its tutorial counts
``max_epochs`` in iterations; ``rollouts_per_epoch`` overrides this), the
WarpDrive metrics block is printed every ``saving.metrics_log_freq``
iterations when ``verbose`` and written to ``results.json``, and the
``<policy>_<env steps>.state_dict`` files are saved every
``saving.model_params_save_freq`` iterations and at the last, under
``saving.basedir/name/tag/<results_dir or a timestamp>`` (``save_dir``). Fit
stops once the config's iterations are done, whatever ``max_epochs`` says.
Its envs live where the wrapper put them: ``env_backend="cpu"`` goes with
``accelerator="cpu"``, ``"pycuda"`` with ``accelerator="gpu"``. Our form
(a RunConfig or a built trainer) works too, with WarpDrive's trainer methods.

The callbacks ``CUDACallback`` and ``PerfStatsCallback`` are WarpDrive's.

**Which Lightning.** In Lightning 2, ``lightning.pytorch`` and the standalone
``pytorch_lightning`` are two copies of one package, and each ``Trainer``
refuses the other's modules. WarpDrive's classes were ``pytorch_lightning``
classes (its tutorial 7 fits them with ``pytorch_lightning.Trainer``); ours
are written once, as mixins, and :func:`lightning_api` gives them over
either package: ``lightning_api("pytorch_lightning").WarpDriveModule`` is a
``pytorch_lightning.LightningModule``, ``lightning_api("lightning.pytorch")``
(the names at module level here) are ``lightning.pytorch`` classes.
WarpDrive's path ``warp_drive.training.pytorch_lightning`` picks one when it
is imported (:func:`program_lightning_package`).
"""

from __future__ import annotations

import functools
import sys
import time
import warnings
from types import SimpleNamespace
from typing import Any

import lightning.pytorch as pl

from warp_drive.compat.trainer import Trainer, TrainerDDPG
from warp_drive.training.lightning import module as lightning_module
from warp_drive.training.lightning.module import LIGHTNING_PACKAGES, over_lightning_package
from warp_drive.training.algorithm import uses_ddpg
from warp_drive.training.config import RunConfig
from warp_drive.training.run import build, due
from warp_drive.env.wrapper import EnvWrapper

__all__ = ["CUDACallback", "PerfStatsCallback", "WarpDriveModule", "lightning_api", "program_lightning_package"]


class WarpDriveModuleMixin:
    """What WarpDrive's :class:`WarpDriveModule` adds to this project's (module docstring), over either package."""

    def __init__(self, source: RunConfig | Trainer | EnvWrapper | None = None, config: Any = None,
                 policy_tag_to_agent_id_map: dict | None = None,
                 create_separate_placeholders_for_each_policy: bool = False,
                 obs_dim_corresponding_to_num_agents: str = "first", results_dir: str | None = None,
                 verbose: bool = True, *, env_wrapper: EnvWrapper | None = None,
                 rollouts_per_epoch: int | None = None):
        warpdrive_form = env_wrapper is not None or isinstance(source, EnvWrapper)
        if warpdrive_form:
            source = self._warpdrive_trainer(source, env_wrapper, config, policy_tag_to_agent_id_map,
                                             create_separate_placeholders_for_each_policy,
                                             obs_dim_corresponding_to_num_agents, results_dir, verbose)
            config = None
            if rollouts_per_epoch is None:
                rollouts_per_epoch = 1  # WarpDrive's epoch: one rollout
        elif policy_tag_to_agent_id_map is not None:
            raise TypeError("policy_tag_to_agent_id_map goes with env_wrapper= (WarpDrive's form); a RunConfig "
                            "names its policies' agents itself")
        elif isinstance(config, dict):
            raise TypeError("a WarpDrive run-config dict needs its env: WarpDriveModule(env_wrapper=EnvWrapper("
                            "...), config=run_config, policy_tag_to_agent_id_map=...)")
        super().__init__(source, config, rollouts_per_epoch=rollouts_per_epoch)
        self.warpdrive_outputs = warpdrive_form  # WarpDrive's printed metrics, results.json and model files
        warn_if_the_other_lightning_is_imported(type(self))

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

    def _build_trainer(self, config: RunConfig, dist) -> Trainer:
        """WarpDrive's trainer classes, so that ``perf_stats`` and its methods are there in our form too."""
        return build(config, dist, trainer_class=TrainerDDPG if uses_ddpg(config) else Trainer)

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
        warp.rollout.forget_partial_episodes()

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

    def _iteration_done(self, metrics: dict[str, float]) -> None:
        """WarpDrive's module outputs, on the schedule of ``Trainer.train()``: the metrics block (printed when
        verbose) and ``results.json`` every ``metrics_log_freq`` iterations, the model files every
        ``model_params_save_freq``, both at the last iteration too."""
        if not self.warpdrive_outputs:
            return
        warp, saving = self.warp_trainer, self.warp_trainer.config.saving
        if due(warp, saving.metrics_log_freq):
            # reset=False: the episodes stay counted for Lightning's own log of this batch.
            warp._log_warpdrive_metrics(warp, {**metrics, **warp.episode_metrics(reset=False)})
        if due(warp, saving.model_params_save_freq):
            warp._write_models()


class WarpDriveModule(WarpDriveModuleMixin, lightning_module.WarpDriveModule):
    """WarpDrive's ``WarpDriveModule`` (module docstring) over this project's, a ``lightning.pytorch`` module.

    ``lightning_api("pytorch_lightning").WarpDriveModule`` is the same over ``pytorch_lightning``.
    """


class CUDACallbackMixin:
    """What :class:`CUDACallback` does, over either Lightning package."""

    def __init__(self, module: WarpDriveModuleMixin):
        super().__init__()
        if not isinstance(module, WarpDriveModuleMixin):
            raise TypeError(f"CUDACallback takes the WarpDriveModule whose envs it resets; got {type(module).__name__}")
        self.module = module
        self.resets = 0

    def on_train_start(self, trainer, pl_module) -> None:
        self.module.reset_all_envs()
        self.resets += 1

    def on_train_end(self, trainer, pl_module) -> None:
        print("Training is complete!")


class CUDACallback(CUDACallbackMixin, pl.Callback):
    """WarpDrive's ``CUDACallback(module)``: resets every env of ``module`` when training starts, says when it ends.

    The reset also drops partial episode returns, so the first episodes' returns
    count only their own rewards. (It resets after a checkpoint is restored too,
    as WarpDrive did; leave the callback out to resume a run exactly.)
    """


class PerfStatsCallbackMixin:
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
        if not isinstance(pl_module, WarpDriveModuleMixin):
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


class PerfStatsCallback(PerfStatsCallbackMixin, pl.Callback):
    __doc__ = PerfStatsCallbackMixin.__doc__


@functools.lru_cache(maxsize=None)
def lightning_api(package: str = "lightning.pytorch") -> SimpleNamespace:
    """WarpDrive's Lightning names over the Lightning ``package`` (``"lightning.pytorch"`` or
    ``"pytorch_lightning"``): ``WarpDriveModule``, ``CUDACallback``, ``PerfStatsCallback`` and this project's
    ``RolloutDataModule``, each a class of that package (``package`` names it), the same object on every call."""
    return SimpleNamespace(package=package, **{cls.__name__: over_lightning_package(cls, package) for cls in (
        WarpDriveModule, CUDACallback, PerfStatsCallback, lightning_module.RolloutDataModule)})


def _separate_pytorch_lightning():
    """The ``pytorch_lightning`` module when this process imported it and it is not ``lightning.pytorch``."""
    standalone = sys.modules.get("pytorch_lightning")
    if standalone is None or getattr(standalone, "LightningModule", None) is pl.LightningModule:
        return None
    return standalone


@functools.lru_cache(maxsize=None)
def program_lightning_package() -> str:
    """The Lightning package this process's WarpDrive program fits with, decided at the first call (the first
    import of ``warp_drive.training.pytorch_lightning``) and kept for the process, so that a re-import or a
    reload serves the same classes as before: ``"pytorch_lightning"`` when that separate package is already
    imported -- WarpDrive's tutorial 7 imports ``pytorch_lightning.Trainer`` before
    ``warp_drive.training.pytorch_lightning`` -- else ``"lightning.pytorch"``."""
    return "pytorch_lightning" if _separate_pytorch_lightning() is not None else LIGHTNING_PACKAGES[0]


MIXED_LIGHTNING_HINT = (
    "{cls} here is a lightning.pytorch class (warp_drive.training.pytorch_lightning was first imported before "
    "pytorch_lightning), so pytorch_lightning.Trainer would refuse it (TypeError: `model` must be a "
    "`LightningModule`): use `from lightning import Trainer`, or import pytorch_lightning before "
    "warp_drive.training.pytorch_lightning in a fresh process, or take the classes of "
    "warp_drive.compat.lightning.lightning_api('pytorch_lightning')")


def warn_if_the_other_lightning_is_imported(cls: type) -> bool:
    """Warn (and return True) when ``cls`` is a ``lightning.pytorch`` class while this process has also imported
    the separate ``pytorch_lightning``: a program that imported it late may be about to fit with its Trainer."""
    if _separate_pytorch_lightning() is None or not issubclass(cls, pl.LightningModule):
        return False
    warnings.warn(MIXED_LIGHTNING_HINT.format(cls=cls.__name__), UserWarning, stacklevel=3)
    return True
