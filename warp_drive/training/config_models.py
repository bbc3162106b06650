"""The model sections of a run config (``policy.<tag>.model``), one dataclass per algorithm family,
and the field helpers every section is written with (``config_sections.py`` holds the rest)."""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any, Callable, ClassVar

from warp_drive.training.config_values import _bool, _float, _int, _layer_sizes, _mapping, _model_type, _optional, _str

ACTIVATIONS = ("tanh", "relu")


def _f(default: Any, check: Callable[[Any, str], Any]) -> Any:
    """A validated leaf field (mutable defaults are copied per instance)."""
    if isinstance(default, (list, dict)):
        return field(default_factory=lambda: copy.deepcopy(default), metadata={"check": check})
    return field(default=default, metadata={"check": check})


def _section(cls: type) -> Any:
    """A nested section, itself a config dataclass."""
    return field(default_factory=cls, metadata={"section": cls})


# --------------------------------------------------------------------------- models
@dataclass
class NetworkConfig:
    """The model keys of every algorithm (``type`` is a key of the model registry in models.py)."""

    type: str = _f("fully_connected", _model_type)
    fc_dims: list[int] = _f([64, 64], _layer_sizes)
    activation: str = _f("tanh", _str(ACTIVATIONS, str.lower))
    obs_normalization: bool = _f(False, _bool)


@dataclass
class ModelConfig(NetworkConfig):
    """An A2C/PPO policy's actor-critic network."""

    shared_trunk: bool = _f(False, _bool)
    log_std_init: float = _f(0.0, _float())
    gru_hidden: int = _f(64, _int(minimum=1))  # type gru: the GRU's state size per agent (actor and critic each)
    extra: dict = _f({}, _mapping)  # free-form keys for user-registered models


@dataclass
class DDPGModelConfig(NetworkConfig):
    """A DDPG policy's actor (``fc_dims``) and critic networks."""

    # The critic's (and its target's) hidden layers; None: fc_dims, as the actor's.
    critic_fc_dims: list[int] | None = _f(None, _optional(_layer_sizes, "fc_dims"))
    shared_trunk: ClassVar[bool] = False  # not a key: the actor reads s, the critic (s, a) (ddpg.DDPGModel reads it)
