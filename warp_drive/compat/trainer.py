"""WarpDrive 2.7's ``Trainer``, ``TrainerA2C`` and ``TrainerDDPG``: its keywords and methods
(:mod:`warp_drive.compat.trainer_methods`) over this project's
:class:`~warp_drive.training.ppo.PPOTrainer` and
:class:`~warp_drive.training.ddpg.DDPGTrainer`.

As WarpDrive's example script picked ``TrainerDDPG`` from the policies'
algorithm, ``Trainer(env_wrapper, config=...)`` builds a :class:`TrainerDDPG`
when the config's policies use DDPG (``training/algorithm.py`` decides).
"""

from __future__ import annotations

import io
from typing import Any, Mapping

import torch

from warp_drive.compat.trainer_methods import PerfStats, WarpDriveTrainerMethods
from warp_drive.training.algorithm import uses_ddpg
from warp_drive.training.runs.checkpoint import atomic_write as _atomic_write
from warp_drive.training.ddpg import DDPGTrainer
from warp_drive.training.ppo import PPOTrainer

__all__ = ["Trainer", "TrainerA2C", "TrainerDDPG", "PerfStats"]


class _PicksAlgorithm(type):
    """``Trainer(env_wrapper, config)`` with DDPG policies builds a :class:`TrainerDDPG`."""

    def __call__(cls, *args: Any, **kwargs: Any) -> Any:
        chosen = cls
        if cls is Trainer and uses_ddpg(kwargs.get("config", args[1] if len(args) > 1 else None)):
            chosen = TrainerDDPG
        return type.__call__(chosen, *args, **kwargs)


class Trainer(WarpDriveTrainerMethods, PPOTrainer, metaclass=_PicksAlgorithm):
    """WarpDrive's ``Trainer``: A2C / PPO (each policy's ``algorithm``) with WarpDrive's keywords and methods."""


TrainerA2C = Trainer


class TrainerDDPG(WarpDriveTrainerMethods, DDPGTrainer):
    """WarpDrive's ``TrainerDDPG``: DDPG with WarpDrive's keywords and methods, and its actor/critic model files."""

    def _write_models(self):
        """WarpDrive's DDPG files: ``<policy>_actor_<env steps>.state_dict`` and ``<policy>_critic_<...>``."""
        written = []
        for tag, p in self.policies.items():
            for part in ("actor", "critic"):
                path = self.save_dir / f"{tag}_{part}_{self.env_steps}.state_dict"
                buffer = io.BytesIO()
                torch.save({k: v.detach().cpu() for k, v in getattr(p.model, part).state_dict().items()}, buffer)
                _atomic_write(path, buffer.getvalue())
                written.append(path)
                if self.verbose:
                    print(f"Saved the {tag!r} {part} to {path}")
        return written

    def _load_policy_weights(self, tag: str, state: Mapping[str, Any], source: str) -> None:
        """A whole :class:`DDPGModel` state (our checkpoints), or ``{actor: ..., critic: ...}`` (WarpDrive's
        pair of files, either part alone too); the targets start as copies of the loaded networks."""
        model = self.policies[tag].model
        state = {k[len("module."):] if k.startswith("module.") else k: v for k, v in state.items()}
        parts = {k: v for k, v in state.items() if k in ("actor", "critic") and isinstance(v, Mapping)}
        if parts and len(parts) == len(state):
            for part, weights in parts.items():
                net = getattr(model, part)
                weights = {k[len("module."):] if k.startswith("module.") else k: v for k, v in weights.items()}
                try:
                    net.load_state_dict(weights)
                except RuntimeError as exc:
                    raise ValueError(f"{source}: not the {part} of policy {tag!r} as configured here ({exc}); "
                                     f"weights trained by WarpDrive 2.7 itself have another layout") from None
                getattr(model, f"{part}_target").load_state_dict(net.state_dict())
            return
        try:
            model.load_state_dict(state)
        except RuntimeError as exc:
            raise ValueError(f"{source}: not a DDPG model of policy {tag!r} as configured here ({exc}); pass "
                             f"{{actor: path, critic: path}} for WarpDrive-style actor/critic files") from None
