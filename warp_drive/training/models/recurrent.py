"""``RecurrentActorCritic`` (registry key ``gru``): an actor-critic with a GRU after its encoders.

A policy whose agents see only part of the world (a cue shown once, a partner
out of view) needs memory. Each agent carries a hidden state ``(K, H)``
(``K = 2``: the actor's and the critic's; 1 with ``shared_trunk``; ``H =
model.gru_hidden``) that the trainer keeps on the device for every env and
agent, zeroes where an episode ended, and stores at the start of each sequence
chunk so that PPO replays the rollout from the same states
(``training/ppo/``: ``algorithm.py``, ``recurrent.py``).

The recurrent model contract (what the trainer calls, and what a user model
registered with ``hidden_shape`` must provide):

* ``hidden_shape``: ``(K, H)``;
* ``forward(obs (..., D), hidden (..., K, H))`` -> ``(distribution, value, next hidden)``;
* ``value(obs, hidden)``: the critic's value at ``obs`` (the bootstrap);
* ``unroll(obs (S, L, ..., D), hidden (S, ..., K, H), starts (S, L, ...))`` -> ``(distribution, value)``
  over ``(S, L, ...)``: ``S`` sequences of ``L`` steps from stored states, the state zeroed before
  each step where ``starts`` is True (an episode began there).

The GRU follows PyTorch's equations (reset gate applied to the hidden
state's projection) with orthogonal weights, written out so that ``agents``
(per-agent weights, ``layers.AgentLinear``) applies to it like to every other layer.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from warp_drive.training.models.actor_critic import ActorCritic, model_option
from warp_drive.training.models.distribution import ActionDistribution
from warp_drive.training.models.layers import ActionHead, linear


class GRUCell(nn.Module):
    """``h' = (1 - z) * n + z * h``, ``r, z = sigmoid(W x + U h)``, ``n = tanh(W_n x + r * (U_n h))``.

    ``gates(x)`` (the ``W x`` part) does not depend on the state, so ``unroll`` computes it for every
    step of a sequence at once and only ``step(gates, h)`` runs step by step.
    """

    def __init__(self, in_dim: int, hidden: int, agents: int | None = None):
        super().__init__()
        self.input_gates = linear(in_dim, 3 * hidden, 1.0, agents)
        self.hidden_gates = linear(hidden, 3 * hidden, 1.0, agents)

    def gates(self, x: torch.Tensor) -> torch.Tensor:
        return self.input_gates(x)

    def step(self, gates: torch.Tensor, h: torch.Tensor) -> torch.Tensor:
        xr, xz, xn = gates.chunk(3, dim=-1)
        hr, hz, hn = self.hidden_gates(h).chunk(3, dim=-1)
        r, z = torch.sigmoid(xr + hr), torch.sigmoid(xz + hz)
        return (1.0 - z) * torch.tanh(xn + r * hn) + z * h

    def forward(self, x: torch.Tensor, h: torch.Tensor) -> torch.Tensor:
        return self.step(self.gates(x), h)


class RecurrentActorCritic(ActorCritic):
    """:class:`ActorCritic`'s encoders (its trunks), then a GRU per path, then the action and value heads."""

    def __init__(self, obs_dim: int, action_space: Any, config: Any = None, agents: int | None = None):
        super().__init__(obs_dim, action_space, config, agents)
        fc_dims = list(model_option(config, "fc_dims"))
        hidden = model_option(config, "gru_hidden")
        if isinstance(hidden, bool) or not isinstance(hidden, int) or hidden < 1:
            raise ValueError(f"model.gru_hidden must be a positive integer, got {hidden!r}")
        feat = fc_dims[-1] if fc_dims else self.obs_dim
        self.hidden_shape = (1 if self.shared_trunk else 2, hidden)
        self.actor_gru = GRUCell(feat, hidden, agents)
        self.critic_gru = None if self.shared_trunk else GRUCell(feat, hidden, agents)
        self.actor_head = ActionHead(hidden, action_space, log_std_init=float(model_option(config, "log_std_init")),
                                     agents=agents)
        self.value_head = linear(hidden, 1, 1.0, agents)

    def _gates(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor | None]:
        """The GRUs' input gates of ``obs``: the actor's, and the critic's (None with a shared trunk)."""
        x = self._prepare(obs)
        if self.shared_trunk:
            return self.actor_gru.gates(self.trunk(x)), None
        return self.actor_gru.gates(self.actor_trunk(x)), self.critic_gru.gates(self.critic_trunk(x))

    def _step(self, actor_gates: torch.Tensor, critic_gates: torch.Tensor | None, hidden: torch.Tensor) -> torch.Tensor:
        """The next hidden state ``(..., K, H)``."""
        actor_h = self.actor_gru.step(actor_gates, hidden[..., 0, :])
        if critic_gates is None:
            return actor_h.unsqueeze(-2)
        return torch.stack([actor_h, self.critic_gru.step(critic_gates, hidden[..., 1, :])], dim=-2)

    def _heads(self, hidden: torch.Tensor) -> tuple[ActionDistribution, torch.Tensor]:
        return self.actor_head(hidden[..., 0, :]), self.value_head(hidden[..., -1, :]).squeeze(-1)

    def forward(self, obs: torch.Tensor, hidden: torch.Tensor) -> tuple[ActionDistribution, torch.Tensor, torch.Tensor]:
        """One step: ``obs (..., D)``, ``hidden (..., K, H)`` -> (distribution, value, next hidden)."""
        nxt = self._step(*self._gates(obs), hidden)
        return (*self._heads(nxt), nxt)

    def value(self, obs: torch.Tensor, hidden: torch.Tensor) -> torch.Tensor:
        return self.forward(obs, hidden)[1]

    def distribution(self, obs: torch.Tensor, hidden: torch.Tensor) -> ActionDistribution:
        return self.forward(obs, hidden)[0]

    def unroll(self, obs: torch.Tensor, hidden: torch.Tensor,
               starts: torch.Tensor) -> tuple[ActionDistribution, torch.Tensor]:
        """``S`` sequences of ``L`` steps (module docstring): the encoders and the input gates run on all
        steps at once, the recurrence step by step."""
        if obs.shape[:2] != starts.shape[:2]:
            raise ValueError(f"unroll: observations {tuple(obs.shape)} and starts {tuple(starts.shape)} must share "
                             "their (sequences, steps) dimensions")
        actor_gates, critic_gates = self._gates(obs)
        keep = (~starts).unsqueeze(-1).to(actor_gates.dtype)  # 0 where an episode began: the state restarts
        actor_h, critic_h = hidden[..., 0, :], hidden[..., -1, :]
        actor_states, critic_states = [], []
        # unbind, not [:, step]: the backward of L slices would write L zero-filled copies of the gates
        steps = zip(actor_gates.unbind(1), keep.unbind(1),
                    critic_gates.unbind(1) if critic_gates is not None else [None] * obs.shape[1])
        for actor_in, kept, critic_in in steps:  # one step at a time, the paths apart (no per-step stacking)
            actor_h = self.actor_gru.step(actor_in, actor_h * kept)
            actor_states.append(actor_h)
            if critic_in is not None:
                critic_h = self.critic_gru.step(critic_in, critic_h * kept)
                critic_states.append(critic_h)
        actor_seq = torch.stack(actor_states, dim=1)
        critic_seq = actor_seq if critic_gates is None else torch.stack(critic_states, dim=1)
        return self.actor_head(actor_seq), self.value_head(critic_seq).squeeze(-1)
