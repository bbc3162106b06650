"""A recurrent PPO policy: its state on the device, and how a rollout becomes the units PPO shuffles.

The rollout keeps step ``t`` of agent ``i`` of env ``e`` at ``[t, e * n + i]``.
PPO draws minibatches of *units*, and what a unit is depends on the model:

===================  ==========================  ==============================================
model                unit                        tensor
===================  ==========================  ==============================================
feed-forward         one agent's step            ``(T * E * n, ...)``
per-agent weights    one env's step, all agents  ``(T * E, n, ...)`` (``share: agent``)
recurrent            one agent's chunk of steps  ``(C * E * n, L, ...)``, ``C = T / L``
recurrent per-agent  one env's chunk             ``(C * E, L, n, ...)``
===================  ==========================  ==============================================

A per-agent model reads the agent axis right before the features, so every
agent's samples meet its own weights; a recurrent model replays a chunk of
``L = sequence_length`` steps from the hidden state stored at the chunk's
first step (:func:`chunk_states`), zeroing it where an episode began
(:func:`episode_starts`). :class:`Recurrence` holds the state ``(E * n, K, H)``
during the rollout, zeroed where an agent's episode ended.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from warp_drive.training.ppo.settings import Batch


def update_units(x: torch.Tensor, num_envs: int, agents: int, per_agent: bool,
                 sequence_length: int | None) -> torch.Tensor:
    """``x (T, E * n, ...)`` arranged into units (module docstring); ``sequence_length`` None: feed-forward."""
    T, E, n, rest = x.shape[0], num_envs, agents, x.shape[2:]
    if sequence_length is None:
        return x.reshape(T * E, n, *rest) if per_agent else x.reshape(T * E * n, *rest)
    L = sequence_length
    if T % L:
        raise ValueError(f"a rollout of {T} steps does not split into sequences of {L}")
    chunks = x.reshape(T // L, L, E * n, *rest).transpose(1, 2)  # (C, E * n, L, ...)
    if not per_agent:
        return chunks.reshape(-1, L, *rest)
    return chunks.reshape(T // L, E, n, L, *rest).transpose(2, 3).reshape(-1, L, n, *rest)


def chunk_states(states: torch.Tensor, num_envs: int, agents: int, per_agent: bool) -> torch.Tensor:
    """The hidden states stored at each chunk's first step, ``(C, E * n, K, H)``, one per unit."""
    C, rest = states.shape[0], states.shape[2:]
    return states.reshape(C * num_envs, agents, *rest) if per_agent else states.reshape(-1, *rest)


def episode_starts(ended: torch.Tensor) -> torch.Tensor:
    """``ended (T, B)`` (the step ended the row's episode) -> ``(T, B)``: an episode begins at this step.

    Step 0 is never a start here: the state stored there already is the zero state where it was one.
    """
    return torch.cat([torch.zeros_like(ended[:1]), ended[:-1]])


@dataclass
class Recurrence:
    """A recurrent model's state ``hidden (E * n, K, H)`` and its PPO chunk length ``sequence_length``."""

    hidden: torch.Tensor
    sequence_length: int

    @classmethod
    def of(cls, tag: str, model: Any, config: Any, rollout_length: int, rows: int,
           device: torch.device) -> "Recurrence | None":
        """The state of policy ``tag``'s model (None: not recurrent), its chunk length checked against the rollout."""
        shape, length, T = getattr(model, "hidden_shape", None), config.sequence_length, rollout_length
        if shape is None:
            if length is not None:
                raise ValueError(f"policy {tag!r}: sequence_length applies to recurrent models, and "
                                 f"{config.model.type!r} is not one. Fix: model.type: gru, or remove sequence_length")
            return None
        length = length or T
        if T % length:
            raise ValueError(f"policy {tag!r}: sequence_length {length} does not divide "
                             f"trainer.rollout_length {T}; PPO replays whole chunks. Fix: a divisor of {T}")
        return cls(torch.zeros((rows, *shape), device=device), length)

    def buffers(self, rollout_length: int, local_critic: bool) -> dict[str, tuple[tuple[int, ...], torch.dtype]]:
        """The states each chunk starts from; where episodes ended; a local critic's bootstraps."""
        T, rows = rollout_length, self.hidden.shape[0]
        out = {"hidden": ((T // self.sequence_length, *self.hidden.shape), torch.float32),
               "ended": ((T, rows), torch.bool)}
        if local_critic:
            out["final_values"] = ((T, rows), torch.float32)
        return out

    def restart(self, ended: torch.Tensor | None, agents: int) -> None:
        """Zero the states of the envs whose episode ended (``ended (E,)``; None: every env)."""
        if ended is None:
            self.hidden.zero_()
        else:
            self.hidden.masked_fill_(ended.repeat_interleave(agents)[:, None, None], 0.0)


def rollout_batch(buf: dict, p: Any, num_envs: int, recurrence: "Recurrence | None", values: torch.Tensor,
                  advantages: torch.Tensor, returns: torch.Tensor) -> Batch:
    """The last rollout of policy ``p`` (its buffers ``buf``) as PPO's units, with these ``(T, E * n)`` values,
    advantages and returns (on the critic's scale): samples, env steps, or a recurrent policy's sequences."""
    n = len(p.agent_ids)
    length = None if recurrence is None else recurrence.sequence_length

    def units(x: torch.Tensor | None) -> torch.Tensor | None:
        return None if x is None else update_units(x, num_envs, n, p.per_agent, length)

    return Batch(obs=units(buf["obs"]), actions=units(buf["actions"]), logprobs=units(buf["logprobs"]),
                 values=units(values), advantages=units(advantages), returns=units(returns),
                 masks=units(buf.get("masks")), critic_obs=units(buf.get("critic_obs")), valid=units(buf.get("active")),
                 hidden=None if length is None else chunk_states(buf["hidden"], num_envs, n, p.per_agent),
                 starts=None if length is None else units(episode_starts(buf["ended"])))
