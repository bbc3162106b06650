"""``CentralCritic``: a policy's actor beside a value network over a centralised input (MAPPO).

The actor is any registered model (it acts from the agent's own observation,
as in IPPO); the critic reads what ``critic_input`` chooses (the env's state
arrays, or the policy's agents' observations side by side, each with the
agent's one-hot index: see ``training/ppo/critic.py``). Both live in one module, so
checkpoints, the optimizer, data-parallel broadcasts and Lightning see them
together. Only training needs the critic: acting uses the actor alone.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from warp_drive.training.models.actor_critic import model_option
from warp_drive.training.models.layers import RunningMeanStd, linear, mlp


class CentralCritic(nn.Module):
    """``actor`` (a model returning ``(distribution, value)``) and ``V(critic input)`` of width ``critic_dim``.

    The critic's layers follow the policy's ``model`` section (``fc_dims``,
    ``activation``, ``obs_normalization``, the last applied to its input), with
    per-agent weights when ``agents`` is given (``share: agent``). The critic is
    feed-forward: the state it reads is the env's whole state. A recurrent actor
    (``models/recurrent.py``) keeps its contract: ``hidden_shape``, ``forward(obs,
    hidden)`` and ``unroll`` pass through to it.
    """

    def __init__(self, actor: nn.Module, critic_dim: int, config: Any = None, agents: int | None = None):
        super().__init__()
        fc_dims, activation = list(model_option(config, "fc_dims")), model_option(config, "activation")
        self.actor = actor
        self.critic_dim = int(critic_dim)
        self.critic_rms = RunningMeanStd(self.critic_dim) if model_option(config, "obs_normalization") else None
        self.critic_trunk = mlp(self.critic_dim, fc_dims, activation, agents)
        self.critic_head = linear(fc_dims[-1] if fc_dims else self.critic_dim, 1, 1.0, agents)

    def forward(self, obs: torch.Tensor, *hidden: torch.Tensor) -> tuple:
        """The actor's output: its distribution, its own (unused) value, and a recurrent actor's next state."""
        return self.actor(obs, *hidden)

    @property
    def hidden_shape(self) -> tuple[int, int] | None:
        """A recurrent actor's per-agent state shape; None for a feed-forward one."""
        return getattr(self.actor, "hidden_shape", None)

    def unroll(self, obs: torch.Tensor, hidden: torch.Tensor, starts: torch.Tensor) -> tuple:
        return self.actor.unroll(obs, hidden, starts)

    def update_obs_normalization(self, obs: torch.Tensor) -> None:
        update = getattr(self.actor, "update_obs_normalization", None)  # optional for user models
        if update is not None:
            update(obs)

    def update_critic_normalization(self, x: torch.Tensor) -> None:
        if self.critic_rms is not None:
            self.critic_rms.update(x)

    def central_value(self, x: torch.Tensor) -> torch.Tensor:
        """``V`` of critic inputs ``(..., critic_dim)`` -> ``(...)``."""
        if x.shape[-1] != self.critic_dim:
            raise ValueError(f"critic inputs of shape {tuple(x.shape)}: last dimension must be {self.critic_dim}")
        if self.critic_rms is not None:
            x = self.critic_rms.normalize(x)
        return self.critic_head(self.critic_trunk(x)).squeeze(-1)
