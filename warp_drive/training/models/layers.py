"""The building blocks models are made of: initialisation, MLP trunks, action heads, observation statistics.

They live apart from :class:`~warp_drive.training.models.ActorCritic` because
other models use them too: a user model supplies its own trunk and takes
:class:`ActionHead` for the head, and DDPG's networks reuse the activations
and :class:`RunningMeanStd`.
"""

from __future__ import annotations

import math
from typing import Any, Callable, Sequence

import torch
from torch import nn

from warp_drive.training.models.action_spaces import describe_action_space
from warp_drive.training.models.distribution import ActionDistribution

OBS_NORM_EPS = 1e-8
OBS_NORM_CLIP = 10.0
_ACTIVATIONS: dict[str, Callable[[], nn.Module]] = {"tanh": nn.Tanh, "relu": nn.ReLU}


def layer_init(layer: nn.Linear, gain: float = math.sqrt(2), bias: float = 0.0) -> nn.Linear:
    """CleanRL's init: orthogonal weights with ``gain``, constant bias."""
    nn.init.orthogonal_(layer.weight, gain)
    nn.init.constant_(layer.bias, bias)
    return layer


def mlp(in_dim: int, dims: Sequence[int], activation: str) -> nn.Sequential:
    """Hidden layers only (Linear + activation each); an empty ``dims`` is the identity."""
    layers: list[nn.Module] = []
    for out_dim in dims:
        layers += [layer_init(nn.Linear(in_dim, out_dim), math.sqrt(2)), _ACTIVATIONS[activation]()]
        in_dim = out_dim
    return nn.Sequential(*layers)


class ActionHead(nn.Module):
    """Maps features to an ``ActionDistribution`` for a given action space.

    Discrete heads are one Linear per component (not one big Linear split
    afterwards) so each head gets its own orthogonal init with gain 0.01.
    """

    def __init__(self, in_features: int, action_space: Any, log_std_init: float = 0.0, gain: float = 0.01):
        super().__init__()
        self.space = describe_action_space(action_space)
        if self.space.kind == "discrete":
            self.heads = nn.ModuleList(layer_init(nn.Linear(in_features, n), gain) for n in self.space.nvec)
        else:
            self.mean = layer_init(nn.Linear(in_features, self.space.dim), gain)
            self.log_std = nn.Parameter(torch.full((self.space.dim,), float(log_std_init)))

    def forward(self, features: torch.Tensor) -> ActionDistribution:
        if self.space.kind == "discrete":
            return ActionDistribution(logits=[head(features) for head in self.heads])
        return ActionDistribution(mean=self.mean(features), log_std=self.log_std)


class RunningMeanStd(nn.Module):
    """Running mean/variance of observations, merged batch by batch.

    Uses the parallel (Chan et al.) merge of two (count, mean, M2) summaries,
    which is exact -- the result equals ``np.mean``/``np.var`` over all rows
    seen -- and stable. Accumulators are float64 buffers so millions of
    agent-steps do not lose precision, and so they live in the state_dict and
    move with ``model.to(device)``.
    """

    def __init__(self, dim: int):
        super().__init__()
        self.register_buffer("mean", torch.zeros(dim, dtype=torch.float64))
        self.register_buffer("var", torch.ones(dim, dtype=torch.float64))
        self.register_buffer("count", torch.zeros((), dtype=torch.float64))

    @torch.no_grad()
    def update(self, x: torch.Tensor) -> None:
        x = x.reshape(-1, self.mean.shape[0]).to(torch.float64)
        n = x.shape[0]
        if n == 0:
            return
        batch_mean = x.mean(0)
        batch_var = x.var(0, unbiased=False)
        delta = batch_mean - self.mean
        total = self.count + n
        m2 = self.var * self.count + batch_var * n + delta.square() * self.count * n / total
        self.mean.add_(delta * n / total)
        self.var.copy_(m2 / total)
        self.count.copy_(total)

    def normalize(self, x: torch.Tensor) -> torch.Tensor:
        mean = self.mean.to(x.dtype)
        std = torch.sqrt(self.var + OBS_NORM_EPS).to(x.dtype)
        return ((x - mean) / std).clamp(-OBS_NORM_CLIP, OBS_NORM_CLIP)
