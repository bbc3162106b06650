"""DDPG's parts as plain modules and functions: the actor-critic, Polyak averaging, the replay buffer,
n-step transitions and the two losses.

None of them knows the env or the trainer (``training/ddpg.py``), so each is
tested on its own (``tests/training/test_ddpg.py``).
"""

from __future__ import annotations

import copy
from typing import Any, Mapping

import torch
from torch import nn

from warp_drive.environment import TERMINATED
from warp_drive.training.models import _ACTIVATIONS, RunningMeanStd

FINAL_LAYER_INIT = 3e-3  # DDPG paper: final layers uniform in +-3e-3, so the first actions and Q values are ~0


def _mlp(in_dim: int, dims: list[int], activation: str) -> list[nn.Module]:
    layers: list[nn.Module] = []
    for out_dim in dims:
        layers += [nn.Linear(in_dim, out_dim), _ACTIVATIONS[activation]()]
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


# ====================================================================== replay buffer
class ReplayBuffer:
    """A ring of the last ``capacity`` transitions ``(obs, action, reward, discount, next_obs)``, on ``device``.

    ``reward`` is the (n-step) discounted return and ``discount`` what multiplies
    the bootstrap ``Q'(next_obs, mu'(next_obs))`` (0 after a termination).
    ``add`` overwrites the oldest rows once full; ``sample`` draws uniformly from
    the rows written so far. Nothing leaves the device but the sampled indices'
    seed.
    """

    FIELDS = ("obs", "actions", "rewards", "discounts", "next_obs")

    def __init__(self, capacity: int, obs_dim: int, action_dim: int, device: torch.device | str):
        if int(capacity) < 1:
            raise ValueError(f"replay buffer capacity must be >= 1, got {capacity}")
        self.capacity, self.device = int(capacity), torch.device(device)
        self.data = {
            "obs": torch.zeros((self.capacity, obs_dim), device=self.device),
            "actions": torch.zeros((self.capacity, action_dim), device=self.device),
            "rewards": torch.zeros(self.capacity, device=self.device),
            "discounts": torch.zeros(self.capacity, device=self.device),
            "next_obs": torch.zeros((self.capacity, obs_dim), device=self.device),
        }
        self.pos = 0  # the next row to write
        self.size = 0  # rows holding transitions

    def __len__(self) -> int:
        return self.size

    def add(self, **batch: torch.Tensor) -> None:
        """Append ``n`` transitions (each field ``(n, ...)``); with ``n > capacity`` only the last ``capacity`` stay."""
        if set(batch) != set(self.FIELDS):
            raise ValueError(f"ReplayBuffer.add takes {', '.join(self.FIELDS)}; got {', '.join(sorted(batch))}")
        n = int(batch["rewards"].shape[0])
        if n == 0:
            return
        skip = max(0, n - self.capacity)
        rows = (self.pos + skip + torch.arange(n - skip, device=self.device)) % self.capacity
        for name, values in batch.items():
            self.data[name].index_copy_(0, rows, values[skip:].reshape(n - skip, *self.data[name].shape[1:])
                                        .to(self.data[name].dtype))
        self.pos = (self.pos + n) % self.capacity
        self.size = min(self.capacity, self.size + n)

    def sample(self, batch_size: int, generator: torch.Generator) -> dict[str, torch.Tensor]:
        """``batch_size`` transitions drawn uniformly with replacement (``generator`` on the buffer's device)."""
        if self.size == 0:
            raise ValueError("cannot sample from an empty replay buffer")
        index = torch.randint(self.size, (int(batch_size),), generator=generator, device=self.device)
        return {name: values.index_select(0, index) for name, values in self.data.items()}

    def state_dict(self) -> dict:
        """Position, size and the filled rows (on the host)."""
        return {"capacity": self.capacity, "pos": self.pos, "size": self.size,
                **{name: values[: self.size].detach().cpu().clone() for name, values in self.data.items()}}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        if int(state["capacity"]) != self.capacity:
            raise ValueError(f"replay buffer of {state['capacity']} transitions saved; this one holds {self.capacity}")
        self.pos, self.size = int(state["pos"]), int(state["size"])
        for name, values in self.data.items():
            values[: self.size].copy_(state[name])


def nstep_transitions(obs, actions, rewards, done, final_obs, n: int, gamma: float) -> dict[str, torch.Tensor]:
    """n-step transitions of every window ``s .. s+n-1`` that lies inside the ``L`` steps given.

    Inputs are per step and row: ``obs (L, B, O)`` (before acting), ``actions (L,
    B, D)``, ``rewards (L, B)``, ``done (L, B)`` (0, TERMINATED or TRUNCATED),
    ``final_obs (L, B, O)`` (after the step, before any reset). A window stops at
    the first step whose episode ended: ``R = sum_k gamma^k r_k`` up to it,
    ``next_obs`` its ``final_obs`` and ``discount = gamma^(k+1)``, or 0 when it
    terminated. Returns ``(L - n + 1) * B`` transitions (start-step-major).
    """
    L = rewards.shape[0]
    W = L - n + 1
    if W <= 0:
        empty = obs.new_zeros((0,))
        return {"obs": obs[:0].reshape(0, obs.shape[-1]), "actions": actions[:0].reshape(0, actions.shape[-1]),
                "rewards": empty, "discounts": empty, "next_obs": obs[:0].reshape(0, obs.shape[-1])}
    B = rewards.shape[1]
    r = rewards.unfold(0, n, 1)  # (W, B, n)
    d = done.unfold(0, n, 1)
    ended = d > 0
    # alive[k]: no episode end before step k of the window
    alive = torch.cumprod(torch.cat([torch.ones_like(ended[..., :1]), ~ended[..., :-1]], dim=-1).to(r.dtype), -1)
    powers = gamma ** torch.arange(n, device=r.device, dtype=r.dtype)
    returns = (r * alive * powers).sum(-1)  # (W, B)
    stop = ended.clone()
    stop[..., -1] = True
    j = stop.to(torch.int8).argmax(-1)  # the first end, else n - 1
    last_done = d.gather(-1, j.unsqueeze(-1)).squeeze(-1)
    discounts = gamma ** (j.to(r.dtype) + 1) * (last_done != TERMINATED).to(r.dtype)
    step = torch.arange(W, device=r.device).unsqueeze(1) + j.long()  # (W, B): the step the window ends at
    rows = torch.arange(B, device=r.device).expand(W, B)
    next_obs = final_obs[step, rows]
    return {"obs": obs[:W].reshape(W * B, -1), "actions": actions[:W].reshape(W * B, -1),
            "rewards": returns.reshape(-1), "discounts": discounts.reshape(-1), "next_obs": next_obs.reshape(W * B, -1)}


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

