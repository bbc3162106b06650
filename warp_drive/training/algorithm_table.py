"""The one table from a config's algorithm to the trainer class that runs it.

``run.build`` asks here; so does WarpDrive's ``Trainer(env_wrapper, config=...)``
(``compat/trainer.py``), as WarpDrive's example script picked ``TrainerDDPG``
from the algorithm. One trainer trains one family: A2C and PPO policies
together, or DDPG policies.
"""

from __future__ import annotations

from typing import Any, Mapping

from warp_drive.training.config_sections import DEFAULT_ALGORITHM
from warp_drive.training.ddpg import DDPGTrainer
from warp_drive.training.ppo_trainer import PPOTrainer
from warp_drive.training.rollout import OnDeviceTrainer

TRAINERS: dict[str, type[OnDeviceTrainer]] = {"A2C": PPOTrainer, "PPO": PPOTrainer, "DDPG": DDPGTrainer}


def algorithms_of(config: Any) -> dict[str, str]:
    """{policy tag: algorithm} of a RunConfig, our config dict, or a WarpDrive run-config dict."""
    policies = config.get("policy") if isinstance(config, Mapping) else getattr(config, "policy", None)
    out = {}
    for tag, section in (policies or {}).items():
        algorithm = section.get("algorithm", "") if isinstance(section, Mapping) else getattr(section, "algorithm", "")
        out[str(tag)] = str(algorithm or DEFAULT_ALGORITHM).upper()
    return out


def uses_ddpg(config: Any) -> bool:
    """True when any policy of ``config`` trains with DDPG."""
    return "DDPG" in algorithms_of(config).values()


def trainer_class(config: Any) -> type[OnDeviceTrainer]:
    """The trainer for ``config``: :class:`DDPGTrainer` when its policies use DDPG, else :class:`PPOTrainer`
    (which refuses a mix of families with a message naming the policies)."""
    return TRAINERS["DDPG"] if uses_ddpg(config) else TRAINERS["PPO"]
