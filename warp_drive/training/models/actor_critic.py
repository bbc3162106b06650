"""The built-in model, ``ActorCritic`` (registry key ``fully_connected``); its options default to ``ModelConfig``'s.

It follows CleanRL's PPO network: orthogonal init with gain sqrt(2) on hidden
layers, 0.01 on the policy head (so the initial policy is near uniform / near
the zero mean) and 1.0 on the value head, zero biases.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from torch import nn

from warp_drive.training.config import ModelConfig
from warp_drive.training.models.action_spaces import describe_action_space
from warp_drive.training.models.distribution import ActionDistribution
from warp_drive.training.models.layers import ACTIVATIONS, ActionHead, RunningMeanStd, linear, mlp

# The defaults are the config's (one default per key): a model built without a config section gets them.
_DEFAULTS = ModelConfig().model_dump()


def model_option(config: Any, key: str) -> Any:
    """Read ``key`` from a ModelConfig-like object or a dict, falling back to ``ModelConfig``'s default."""
    if config is None:
        return _DEFAULTS[key]
    if isinstance(config, dict):
        return config.get(key, _DEFAULTS[key])
    return getattr(config, key, _DEFAULTS[key])


class ActorCritic(nn.Module):
    """Fully connected actor-critic: MLP trunk(s), an action head and a scalar value head.

    ``shared_trunk=False`` (default, as CleanRL) gives the actor and the critic
    their own trunks, so value-loss gradients never disturb the policy
    features; ``shared_trunk=True`` halves the trunk parameters. ``agents``:
    per-agent weights for that many agents (``layers.AgentLinear``); the
    observations are then ``(..., agents, obs_dim)``.
    """

    def __init__(self, obs_dim: int, action_space: Any, config: Any = None, agents: int | None = None):
        super().__init__()
        fc_dims = list(model_option(config, "fc_dims"))
        activation = model_option(config, "activation")
        if activation not in ACTIVATIONS:
            raise ValueError(f"model.activation must be one of {sorted(ACTIVATIONS)}, got {activation!r}")
        if any(isinstance(d, bool) or not isinstance(d, (int, np.integer)) or d < 1 for d in fc_dims):
            raise ValueError(f"model.fc_dims must be positive integers, got {fc_dims!r}")
        if isinstance(obs_dim, bool) or int(obs_dim) != obs_dim or obs_dim < 1:
            raise ValueError(f"obs_dim must be a positive integer, got {obs_dim!r}")
        obs_dim = int(obs_dim)
        self.obs_dim = obs_dim
        self.config = config
        self.shared_trunk = bool(model_option(config, "shared_trunk"))
        self.space = describe_action_space(action_space)
        feat = fc_dims[-1] if fc_dims else obs_dim
        self.agents = agents

        self.obs_rms = RunningMeanStd(obs_dim) if model_option(config, "obs_normalization") else None
        if self.shared_trunk:
            self.trunk = mlp(obs_dim, fc_dims, activation, agents)
            self.actor_trunk = self.critic_trunk = None
        else:
            self.trunk = None
            self.actor_trunk = mlp(obs_dim, fc_dims, activation, agents)
            self.critic_trunk = mlp(obs_dim, fc_dims, activation, agents)
        self.actor_head = ActionHead(feat, action_space, log_std_init=float(model_option(config, "log_std_init")),
                                     agents=agents)
        self.value_head = linear(feat, 1, 1.0, agents)

    # ------------------------------------------------------------------ observation normalisation
    @property
    def obs_normalization(self) -> bool:
        return self.obs_rms is not None

    def update_obs_normalization(self, obs: torch.Tensor) -> None:
        """Fold a batch ``(..., obs_dim)`` into the running stats; no-op when normalisation is off."""
        if self.obs_rms is not None:
            self.obs_rms.update(obs)

    def _prepare(self, obs: torch.Tensor) -> torch.Tensor:
        if obs.shape[-1] != self.obs_dim:
            raise ValueError(f"observations of shape {tuple(obs.shape)}: last dimension must be obs_dim={self.obs_dim}")
        if not obs.is_floating_point():
            obs = obs.float()
        return self.obs_rms.normalize(obs) if self.obs_rms is not None else obs

    # ------------------------------------------------------------------ forward passes
    def forward(self, obs: torch.Tensor) -> tuple[ActionDistribution, torch.Tensor]:
        """``obs (..., obs_dim)`` -> (action distribution over ``...``, value ``(...)``)."""
        x = self._prepare(obs)
        if self.shared_trunk:
            h = self.trunk(x)
            return self.actor_head(h), self.value_head(h).squeeze(-1)
        return self.actor_head(self.actor_trunk(x)), self.value_head(self.critic_trunk(x)).squeeze(-1)

    def value(self, obs: torch.Tensor) -> torch.Tensor:
        """Critic only (bootstrapping the last rollout step needs no policy)."""
        x = self._prepare(obs)
        h = self.trunk(x) if self.shared_trunk else self.critic_trunk(x)
        return self.value_head(h).squeeze(-1)

    def distribution(self, obs: torch.Tensor) -> ActionDistribution:
        """Actor only (acting during evaluation needs no value)."""
        x = self._prepare(obs)
        return self.actor_head(self.trunk(x) if self.shared_trunk else self.actor_trunk(x))
