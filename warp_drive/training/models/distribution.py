"""The policy's action distribution: what every model's ``forward`` returns.

One class covers the three supported action spaces (categorical heads for
``Discrete`` / ``MultiDiscrete``, a diagonal Gaussian for ``Box``) so that the
trainer, the losses and the device sampler handle any model's output the same
way, whatever its trunk.
"""

from __future__ import annotations

import math
from typing import Sequence

import torch

# The logit of a masked action: finite, so log-softmax stays finite and ``0 * log p`` is 0 (a finite
# entropy), and low enough that its probability is exactly 0.0 in float32 (never sampled, never argmax).
MASKED_LOGIT = -1.0e8


class ActionDistribution:
    """The policy's output for a batch of observations.

    Discrete: a list of logits tensors, one per head, each ``(..., n_h)``.
    Continuous: ``mean (..., D)`` and ``log_std`` broadcastable to it.
    Written by hand (rather than wrapping ``torch.distributions``) so that
    multi-head sums, the ``(..., H)`` action layout and the float32 probability
    export for the device sampler are explicit and cheap.
    """

    def __init__(
        self,
        logits: Sequence[torch.Tensor] | None = None,
        mean: torch.Tensor | None = None,
        log_std: torch.Tensor | None = None,
    ):
        if (logits is None) == (mean is None):
            raise ValueError("ActionDistribution needs either logits (discrete) or mean (continuous), not both")
        if logits is not None:
            if len(logits) == 0:
                raise ValueError("ActionDistribution needs at least one logits head")
            self.kind = "discrete"
            self.logits = list(logits)
            # Normalised log-probabilities: computed once, shared by log_prob/entropy/probs.
            self._log_probs = [torch.log_softmax(lg, dim=-1) for lg in self.logits]
            self.mean = None
            self.log_std = None
        else:
            if log_std is None:
                raise ValueError("a continuous ActionDistribution needs log_std")
            self.kind = "continuous"
            self.logits = []
            self._log_probs = []
            self.mean = mean
            self.log_std = log_std.expand_as(mean)

    # ------------------------------------------------------------------ shape helpers
    @property
    def is_discrete(self) -> bool:
        return self.kind == "discrete"

    @property
    def num_heads(self) -> int:
        return len(self.logits) if self.is_discrete else 1

    @property
    def batch_shape(self) -> torch.Size:
        return (self.logits[0] if self.is_discrete else self.mean).shape[:-1]

    @property
    def std(self) -> torch.Tensor:
        self._require("continuous", "std")
        return self.log_std.exp()

    def _require(self, kind: str, what: str) -> None:
        if self.kind != kind:
            raise TypeError(f"{what}() is only defined for {kind} action distributions (this one is {self.kind})")

    def masked(self, mask: torch.Tensor) -> "ActionDistribution":
        """This distribution with the actions where ``mask`` is 0 removed (their logits set to
        :data:`MASKED_LOGIT`); ``mask`` is ``(..., sum of the heads' sizes)``, every head keeping a legal action.

        Applied to a model's output by the trainer (models never see masks): sampling, argmax,
        ``log_prob`` and the entropy then cover the legal actions only.
        """
        self._require("discrete", "masked")
        sizes = [lg.shape[-1] for lg in self.logits]
        if mask.shape[:-1] != self.batch_shape or mask.shape[-1] != sum(sizes):
            raise ValueError(f"action mask of shape {tuple(mask.shape)} does not match batch "
                             f"{tuple(self.batch_shape)} with heads of {sizes} actions")
        legal = mask.to(torch.bool).split(sizes, dim=-1)
        return ActionDistribution(logits=[torch.where(ok, lg, torch.full_like(lg, MASKED_LOGIT))
                                          for lg, ok in zip(self.logits, legal)])

    def reshape(self, *shape: int) -> "ActionDistribution":
        """The same distribution over a batch of shape ``shape`` (e.g. ``(E, n)`` -> ``(E * n,)``)."""
        if self.is_discrete:
            return ActionDistribution(logits=[lg.reshape(*shape, lg.shape[-1]) for lg in self.logits])
        dim = self.mean.shape[-1]
        return ActionDistribution(mean=self.mean.reshape(*shape, dim), log_std=self.log_std.reshape(*shape, dim))

    # ------------------------------------------------------------------ sampler export
    def probs_per_head(self) -> list[torch.Tensor]:
        """Per-head probabilities ``(..., n_h)``, float32 and contiguous, as the device sampler requires."""
        self._require("discrete", "probs_per_head")
        return [lp.exp().to(torch.float32).contiguous() for lp in self._log_probs]

    # ------------------------------------------------------------------ densities
    def _discrete_actions(self, actions: torch.Tensor) -> torch.Tensor:
        """Actions as int64 ``(..., H)``; a ``(...)`` tensor is accepted for single-head spaces."""
        if actions.dim() == len(self.batch_shape) and self.num_heads == 1:
            actions = actions.unsqueeze(-1)
        if actions.shape[:-1] != self.batch_shape or actions.shape[-1] != self.num_heads:
            raise ValueError(
                f"actions of shape {tuple(actions.shape)} do not match batch {tuple(self.batch_shape)} "
                f"with {self.num_heads} head(s)"
            )
        return actions.long()

    def log_prob(self, actions: torch.Tensor) -> torch.Tensor:
        """Log-probability of ``actions``, summed over heads (discrete) or dimensions (continuous)."""
        if self.is_discrete:
            actions = self._discrete_actions(actions)
            total = None
            for h, lp in enumerate(self._log_probs):
                term = lp.gather(-1, actions[..., h : h + 1]).squeeze(-1)
                total = term if total is None else total + term
            return total
        # Diagonal Gaussian: sum of per-dimension normal log-densities.
        var_term = ((actions - self.mean) / self.log_std.exp()) ** 2
        per_dim = -0.5 * var_term - self.log_std - 0.5 * math.log(2 * math.pi)
        return per_dim.sum(-1)

    def entropy(self) -> torch.Tensor:
        """Entropy per sample, summed over heads / dimensions (independent components)."""
        if self.is_discrete:
            total = None
            for lp in self._log_probs:
                term = -(lp.exp() * lp).sum(-1)
                total = term if total is None else total + term
            return total
        per_dim = 0.5 + 0.5 * math.log(2 * math.pi) + self.log_std
        return per_dim.sum(-1)

    # ------------------------------------------------------------------ torch-side actions
    @torch.no_grad()
    def sample(self, generator: torch.Generator | None = None) -> torch.Tensor:
        """Random actions: int64 ``(..., H)`` for discrete, float ``(..., D)`` for continuous."""
        if self.is_discrete:
            heads = []
            for lp in self._log_probs:
                flat = lp.exp().reshape(-1, lp.shape[-1])
                heads.append(torch.multinomial(flat, 1, generator=generator).reshape(lp.shape[:-1]))
            return torch.stack(heads, dim=-1)
        noise = torch.randn(self.mean.shape, generator=generator, dtype=self.mean.dtype, device=self.mean.device)
        return self.mean + self.log_std.exp() * noise

    @torch.no_grad()
    def mode(self) -> torch.Tensor:
        """The most likely action (argmax per head, or the mean): greedy evaluation."""
        if self.is_discrete:
            return torch.stack([lg.argmax(-1) for lg in self.logits], dim=-1)
        return self.mean.clone()

    def __repr__(self) -> str:
        if self.is_discrete:
            sizes = [lg.shape[-1] for lg in self.logits]
            return f"ActionDistribution(discrete, heads={sizes}, batch={tuple(self.batch_shape)})"
        return f"ActionDistribution(continuous, dim={self.mean.shape[-1]}, batch={tuple(self.batch_shape)})"
