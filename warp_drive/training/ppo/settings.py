"""What a PPO update reads: the rollout as a :class:`Batch`, the :class:`PPOSettings` of a policy's config
section, and the :class:`UpdateHooks` that change how it runs (not what it computes)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Callable

import torch
from torch import nn


@dataclass
class Batch:
    """One policy's flattened rollout (every tensor has the sample dimension first).

    ``masks``: the action masks the actions were chosen under (env's ``action_mask``), or None; the
    update applies them again, so the recomputed log-probabilities are those of the behaviour policy.
    The first dimension is the unit PPO shuffles (``ppo/recurrent.py``): a sample, an env's
    step (per-agent weights) or a sequence; ``hidden`` and ``starts`` make the model recurrent:
    ``model.unroll(obs, hidden, starts)`` replays each sequence from its stored state.
    """

    obs: torch.Tensor
    actions: torch.Tensor
    logprobs: torch.Tensor
    values: torch.Tensor
    advantages: torch.Tensor
    returns: torch.Tensor
    masks: torch.Tensor | None = None
    critic_obs: torch.Tensor | None = None  # a centralised critic's inputs (models.CentralCritic.central_value)
    valid: torch.Tensor | None = None  # False for samples of agents that had left the game: they count for nothing
    hidden: torch.Tensor | None = None  # a recurrent model's state at each sequence's first step
    starts: torch.Tensor | None = None  # True where an episode began within a sequence (the state is zeroed there)

    def __len__(self) -> int:
        return self.obs.shape[0]

    def take(self, index: torch.Tensor) -> "Batch":
        return Batch(*(None if getattr(self, f.name) is None else getattr(self, f.name)[index]
                       for f in dataclasses.fields(self)))


@dataclass(frozen=True)
class PPOSettings:
    """What one update reads from a policy's config section (``algorithm`` is "PPO" or "A2C")."""

    algorithm: str = "PPO"
    clip_param: float = 0.2
    clip_value_loss: bool = False
    entropy_coef: float = 0.01
    vf_coef: float = 0.5
    max_grad_norm: float | None = 0.5
    normalize_advantage: bool = True
    num_epochs: int = 4
    num_minibatches: int = 4
    target_kl: float | None = None

    @classmethod
    def of(cls, policy_config: Any, entropy_coef: float) -> "PPOSettings":
        """The settings of a policy config section; ``entropy_coef`` is its schedule's current value."""
        keys = [k for k in cls.__dataclass_fields__ if k != "entropy_coef"]
        return cls(entropy_coef=float(entropy_coef), **{k: getattr(policy_config, k) for k in keys})


@dataclass
class UpdateHooks:
    """What changes how an update runs, not what it computes.

    ``generator`` shuffles the minibatches. ``reduce_gradients(model)`` runs
    after the backward pass and before the grad-norm clip (data-parallel runs
    all-reduce the gradients there, so every rank takes the same step), and
    ``reduce_mean(approx_kl)`` makes the KL early stop the same decision on
    every rank (``training/distributed.py``). ``backward(loss)`` replaces
    ``loss.backward()``: the Lightning module passes ``manual_backward`` with
    Lightning's wrapped optimizer, so its precision plugin, strategy and
    callbacks see every gradient step of this same update.
    """

    generator: torch.Generator | None = None
    reduce_gradients: Callable[[nn.Module], None] | None = None
    reduce_mean: Callable[[torch.Tensor], torch.Tensor] | None = None
    backward: Callable[[torch.Tensor], None] | None = None
