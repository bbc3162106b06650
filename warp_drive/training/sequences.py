"""How a rollout's ``(T, E * n, ...)`` buffers become the units a PPO update shuffles.

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
(:func:`episode_starts`). Pure functions of tensors: ``tests/training/test_recurrent.py``.
"""

from __future__ import annotations

import torch


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
