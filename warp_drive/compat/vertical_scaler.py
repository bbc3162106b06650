"""WarpDrive 2.7's ``perform_auto_vertical_scaling`` (at its import path
``warp_drive.training.utils.vertical_scaler``), over this project's auto-scaler
(:func:`warp_drive.training.autoscale.auto_scale`, ``warp-drive train --auto-scale``).

``perform_auto_vertical_scaling(setup_trainer_and_train, config, num_iters=2)``
takes WarpDrive's run-config dict (or one of ours), has the auto-scaler measure
``trainer.num_envs`` in probes (child processes that build the trainer from the
config and train a few iterations), and returns ``config`` with the chosen
size written into it, as WarpDrive's did: ``trainer.num_envs`` and, for a
WarpDrive config, ``trainer.train_batch_size = num_envs x`` the steps each env
contributes per iteration (``train_batch_size // num_envs`` before scaling),
so an iteration keeps its length.

What differs from WarpDrive's scaler, on purpose: the choice is the
*fastest measured* size that fits the memory budget (WarpDrive's doubled until
a run failed and kept the largest, and could not tell a bug from a full GPU:
here a probe that fails for another reason than memory raises); the batch is
not scaled separately (WarpDrive then searched the largest batch per env that
fit); the probes build the trainer from ``config`` themselves, so
``setup_trainer_and_train`` is not called (for WarpDrive's example script the
two build the same env and trainer; a function that builds something else
is measured as its config describes); ``num_iters`` (WarpDrive's iterations per
trial) is accepted: a probe runs one warm-up and at least three timed
iterations. The probes run on ``backend`` (default ``"auto"``: pycuda on a GPU,
else the cpu executor), since WarpDrive's scripts, not its config, chose the
backend. Other keywords go to :func:`~warp_drive.training.autoscale.auto_scale`
(``memory_budget``, ``max_envs``, ``probe_seconds``, ...).
"""

from __future__ import annotations

from typing import Any, Callable, MutableMapping

from warp_drive.training.autoscale import ScaleResult, auto_scale
from warp_drive.training.config import ConfigError, RunConfig, apply_overrides, config_dialects


def _run_config(config: MutableMapping, backend: str) -> tuple[RunConfig, bool]:
    """``config`` as our RunConfig (through its dialect when it is WarpDrive's), probing on ``backend``;
    and whether it was WarpDrive's."""
    override = [f"trainer.backend={backend}"]
    for dialect in config_dialects():
        if dialect.claims(config):
            return dialect.read(dict(config), override), True
    return RunConfig.from_dict(apply_overrides(dict(config), override)), False


def perform_auto_vertical_scaling(setup_trainer_and_train: Callable | None, config: MutableMapping,
                                  num_iters: int = 2, *, backend: str = "auto", **auto_scale_kwargs: Any
                                  ) -> MutableMapping:
    """Choose ``trainer.num_envs`` with the auto-scaler and write it into ``config`` (see the module docstring).

    Returns ``config`` itself, updated in place as WarpDrive's was; the
    auto-scaler's :class:`~warp_drive.training.autoscale.ScaleResult` is
    ``perform_auto_vertical_scaling.last_result``.
    """
    if setup_trainer_and_train is not None and not callable(setup_trainer_and_train):
        raise TypeError(f"perform_auto_vertical_scaling: setup_trainer_and_train must be a function, got "
                        f"{setup_trainer_and_train!r}")
    if isinstance(num_iters, bool) or not isinstance(num_iters, int) or num_iters < 1:
        raise ValueError(f"perform_auto_vertical_scaling: num_iters must be an integer >= 1, got {num_iters!r}")
    if not isinstance(config, MutableMapping) or not isinstance(config.get("trainer"), MutableMapping):
        raise ConfigError("perform_auto_vertical_scaling: config must be a run-config dict with a trainer section "
                          "(e.g. yaml.safe_load of warp_drive/training/run_configs/<env>.yaml)")
    run_config, warpdrive = _run_config(config, backend)
    result: ScaleResult = auto_scale(run_config, **auto_scale_kwargs)
    perform_auto_vertical_scaling.last_result = result
    trainer = config["trainer"]
    trainer["num_envs"] = result.num_envs
    if warpdrive:
        trainer["train_batch_size"] = result.num_envs * run_config.trainer.rollout_length
    return config


perform_auto_vertical_scaling.last_result = None

__all__ = ["perform_auto_vertical_scaling"]
