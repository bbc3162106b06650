"""DDPG's networks as plain modules and functions: the actor-critic, Polyak averaging and the two losses.

None of them knows the env or the trainer (``ddpg/algorithm.py``), so each is
tested on its own (``tests/training/test_ddpg.py``).
"""

from __future__ import annotations

import copy
from typing import Any, Mapping

import torch
from torch import nn

from warp_drive.training.models.layers import ACTIVATIONS, RunningMeanStd

FINAL_LAYER_INIT = 3e-3  # DDPG paper: final layers uniform in +-3e-3, so the first actions and Q values are ~0


def _mlp(in_dim: int, dims: list[int], activation: str) -> list[nn.Module]:
    layers: list[nn.Module] = []
    for out_dim in dims:
        layers += [nn.Linear(in_dim, out_dim), ACTIVATIONS[activation]()]
        in_dim = out_dim
    return layers


def _final(in_dim: int, out_dim: int) -> nn.Linear:
    layer = nn.Linear(in_dim, out_dim)
    nn.init.uniform_(layer.weight, -FINAL_LAYER_INIT, FINAL_LAYER_INIT)
    nn.init.uniform_(layer.bias, -FINAL_LAYER_INIT, FINAL_LAYER_INIT)
    return layer


class DDPGModel(nn.Module):
    """Actor ``mu(s) in [-1, 1]^D`` (tanh), critic ``Q(s, a)`` on normalised actions, and their targets.

    One module so that checkpoints, ``warp-drive evaluate`` and the data-parallel
    start (``broadcast_module``) see every network; the targets' parameters have
    ``requires_grad=False``: no optimizer, gradient average or loss touches them.
    With ``obs_normalization`` one running mean/std, shared by all four nets,
    normalises observations (the replay buffer keeps raw ones).
    """

    def __init__(self, obs_dim: int, action_dim: int, config: Any):
        super().__init__()
        if config.type != "fully_connected":
            raise ValueError(f"model.type {config.type!r}: DDPG builds its own fully connected actor and critic "
                             f"(model.fc_dims, model.critic_fc_dims); user-registered models are for A2C/PPO")
        if config.shared_trunk:
            raise ValueError("model.shared_trunk: DDPG's actor reads s and its critic (s, a), so they cannot share "
                             "a trunk; set shared_trunk false")
        self.obs_dim, self.action_dim = int(obs_dim), int(action_dim)
        fc, critic_fc = list(config.fc_dims), list(config.critic_fc_dims or config.fc_dims)
        act = config.activation
        self.obs_rms = RunningMeanStd(obs_dim) if config.obs_normalization else None
        self.actor = nn.Sequential(*_mlp(obs_dim, fc, act), _final(fc[-1] if fc else obs_dim, action_dim), nn.Tanh())
        self.critic = nn.Sequential(*_mlp(obs_dim + action_dim, critic_fc, act),
                                    _final(critic_fc[-1] if critic_fc else obs_dim + action_dim, 1))
        self.actor_target = copy.deepcopy(self.actor).requires_grad_(False)
        self.critic_target = copy.deepcopy(self.critic).requires_grad_(False)

    def update_obs_normalization(self, obs: torch.Tensor) -> None:
        if self.obs_rms is not None:
            self.obs_rms.update(obs)

    def _prepare(self, obs: torch.Tensor) -> torch.Tensor:
        return self.obs_rms.normalize(obs) if self.obs_rms is not None else obs

    def act(self, obs: torch.Tensor, target: bool = False) -> torch.Tensor:
        """Normalised actions ``(..., D)`` in [-1, 1]."""
        return (self.actor_target if target else self.actor)(self._prepare(obs))

    def q(self, obs: torch.Tensor, actions: torch.Tensor, target: bool = False) -> torch.Tensor:
        """``Q(s, a)`` ``(...)`` for normalised actions."""
        x = torch.cat([self._prepare(obs), actions], dim=-1)
        return (self.critic_target if target else self.critic)(x).squeeze(-1)

    def forward(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(normalised action, its Q value)."""
        a = self.act(obs)
        return a, self.q(obs, a)


@torch.no_grad()
def soft_update(target: nn.Module, online: nn.Module, tau: float) -> None:
    """``target <- (1 - tau) target + tau online``, parameter by parameter (Polyak averaging)."""
    t_params, o_params = list(target.parameters()), list(online.parameters())
    if len(t_params) != len(o_params):
        raise ValueError("soft_update: the target and the online network differ in structure")
    torch._foreach_lerp_(t_params, o_params, float(tau))


def critic_loss_of(model: DDPGModel, batch: Mapping[str, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
    """(critic loss, mean Q) of one minibatch; the bootstrap target has no gradient.

    ``target = reward + discount * Q'(next_obs, mu'(next_obs))``: ``discount`` is
    0 for a terminated window and ``gamma^k`` otherwise (truncated windows
    bootstrap).
    """
    with torch.no_grad():
        next_q = model.q(batch["next_obs"], model.act(batch["next_obs"], target=True), target=True)
        target = batch["rewards"] + batch["discounts"] * next_q
    q = model.q(batch["obs"], batch["actions"])
    critic_loss = torch.nn.functional.mse_loss(q, target)
    return critic_loss, q.detach().mean()


def actor_loss_of(model: DDPGModel, obs: torch.Tensor) -> torch.Tensor:
    """``-mean Q(s, mu(s))`` through a frozen critic: its gradient reaches the actor's parameters alone
    (WarpDrive 2.7 accumulated it into the critic's gradients too, reference §9.16)."""
    model.critic.requires_grad_(False)
    try:
        return -model.q(obs, model.act(obs)).mean()
    finally:
        model.critic.requires_grad_(True)

