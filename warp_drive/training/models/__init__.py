"""Policy/value networks, their action distributions, and the model registry.

``ActorCritic`` is the built-in fully connected model (registry key
``fully_connected``). Every tensor here keeps arbitrary *leading* dimensions: a
model called on ``(n_envs, n_agents, obs_dim)`` observations returns per-head
probabilities of shape ``(n_envs, n_agents, n_h)`` -- exactly what the
on-device sampler takes, with no reshape -- and values of shape
``(n_envs, n_agents)``. The design's ``(B, obs_dim)`` is the special case of
one leading dimension.

Action spaces (gymnasium; old ``gym`` spaces with the same attributes work too):

* ``Discrete(n)``            -> one categorical head; actions ``(..., 1)`` int64
* ``MultiDiscrete(nvec)``    -> one categorical head per component; actions ``(..., H)``
  int64; log-prob and entropy are summed over heads (heads are independent)
* ``Box(shape=(D,))``        -> Gaussian: a mean head and a learned,
  state-independent ``log_std`` parameter; actions ``(..., D)`` float

User models: ``register_model("name", MyModule)`` where ``MyModule(obs_dim,
action_space, config)`` is an ``nn.Module`` whose ``forward(obs)`` returns
``(ActionDistribution, value)`` and which has ``value(obs)``. ``ActionHead``
builds the right head for any supported space, so a user model only has
to supply its trunk. ``update_obs_normalization`` is optional on user models.
A model that takes ``agents`` (``MyModule(obs_dim, action_space, config,
agents=n)``) can serve a policy with ``share: agent``: it then reads
``(..., n, obs_dim)`` and gives each agent its own weights. A model with a
``hidden_shape`` is recurrent (``recurrent.py`` states its contract).

The package itself holds the registry that turns a config's ``model.type``
into a model, and re-exports the pieces from the modules that define them:

* ``action_spaces``  -- ``SpaceInfo``, ``describe_action_space``: which spaces are supported
* ``distribution``   -- ``ActionDistribution``: what a model's ``forward`` returns
* ``layers``         -- ``layer_init``, ``mlp``, ``ActionHead``, ``RunningMeanStd``: building blocks
* ``actor_critic``   -- ``ActorCritic``, the built-in model, and the model options' defaults
* ``recurrent``      -- ``RecurrentActorCritic`` (``gru``): the built-in recurrent model
* ``central_critic`` -- ``CentralCritic``: an actor beside a centralised critic (MAPPO)
* ``factory``        -- WarpDrive's path of its ``ModelFactory`` (``compat/model_factory.py``)
"""

from __future__ import annotations

import inspect
from typing import Any

from torch import nn

from warp_drive.training.models.action_spaces import SpaceInfo, describe_action_space
from warp_drive.training.models.actor_critic import ActorCritic, model_option
from warp_drive.training.models.distribution import ActionDistribution
from warp_drive.training.models.recurrent import RecurrentActorCritic
from warp_drive.training.models.layers import (
    ActionHead,
    RunningMeanStd,
    layer_init,
)

__all__ = [
    "ActionDistribution",
    "ActionHead",
    "ActorCritic",
    "RecurrentActorCritic",
    "RunningMeanStd",
    "SpaceInfo",
    "create_model",
    "describe_action_space",
    "layer_init",
    "register_model",
    "registered_models",
]


# ====================================================================== registry
_MODEL_REGISTRY: dict[str, type] = {}


def register_model(name: str, cls: type | None = None, *, overwrite: bool = False):
    """Make ``cls`` available as ``model.type: <name>`` in run configs.

    ``cls`` must be an ``nn.Module`` subclass constructible as
    ``cls(obs_dim, action_space, config)``. Re-registering a name is an error
    unless ``overwrite=True`` (silently replacing the built-in model by
    importing a module twice is a bug worth hearing about). Without ``cls``
    it returns a decorator.
    """
    if not isinstance(name, str) or not name:
        raise ValueError(f"model name must be a non-empty string, got {name!r}")
    if cls is None:
        return lambda c: register_model(name, c, overwrite=overwrite)
    if not (inspect.isclass(cls) and issubclass(cls, nn.Module)):
        raise TypeError(f"model {name!r}: {cls!r} must be a torch.nn.Module subclass")
    try:
        inspect.signature(cls).bind(1, None, None)
    except TypeError as exc:
        raise TypeError(
            f"model {name!r}: {cls.__name__} must be constructible as {cls.__name__}(obs_dim, action_space, config) "
            f"({exc})"
        ) from None
    except ValueError:  # signature not introspectable (C extension): trust the user
        pass
    if name in _MODEL_REGISTRY and not overwrite and _MODEL_REGISTRY[name] is not cls:
        raise ValueError(
            f"model {name!r} is already registered ({_MODEL_REGISTRY[name].__name__}); pass overwrite=True to replace it"
        )
    _MODEL_REGISTRY[name] = cls
    return cls


def registered_models() -> list[str]:
    return sorted(_MODEL_REGISTRY)


def create_model(config: Any, obs_dim: int, action_space: Any, agents: int | None = None) -> nn.Module:
    """Instantiate the model named by ``config.type`` (default ``fully_connected``); ``agents``: per-agent
    weights for that many agents (a policy's ``share: agent``), for models that take it."""
    name = model_option(config, "type")
    if name not in _MODEL_REGISTRY:
        raise ValueError(f"unknown model type {name!r}; registered model types: {registered_models()}")
    cls = _MODEL_REGISTRY[name]
    if agents is None:
        return cls(obs_dim, action_space, config)
    try:
        takes_agents = "agents" in inspect.signature(cls).parameters
    except ValueError:  # not introspectable: let the call decide
        takes_agents = True
    if not takes_agents:
        raise TypeError(f"model {name!r} ({cls.__name__}) has no per-agent weights: share: agent needs a model "
                        f"constructible as {cls.__name__}(obs_dim, action_space, config, agents=n). Fix: add that "
                        "argument (models.layers.AgentLinear builds such layers), or use share: group")
    return cls(obs_dim, action_space, config, agents=agents)


register_model("fully_connected", ActorCritic)
register_model("gru", RecurrentActorCritic)
