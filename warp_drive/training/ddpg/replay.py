"""DDPG's replay: a ring of transitions on the device, and the n-step transitions a rollout becomes.

Neither knows the env or the trainer (``ddpg/algorithm.py``); ``tests/training/test_ddpg.py`` tests them.
"""

from __future__ import annotations

from typing import Any, Mapping

import torch

from warp_drive.env.environment import TERMINATED


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
