"""The building blocks models are made of: initialisation, MLP trunks, action heads, observation statistics.

They live apart from :class:`~warp_drive.training.models.ActorCritic` because
other models use them too: a user model supplies its own trunk and takes
:class:`ActionHead` for the head, and DDPG's networks reuse the activations
and :class:`RunningMeanStd`.

Per-agent weights (a policy's ``share: agent``): every builder takes ``agents``
(None: one set of weights for all inputs). With ``agents = n`` its layers are
:class:`AgentLinear`: ``n`` weight matrices in one tensor, applied to inputs
``(..., n, features)`` (agent ``i`` of every env through matrix ``i``) in one
batched product, not ``n`` modules called in turn.
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
ACTIVATIONS: dict[str, Callable[[], nn.Module]] = {"tanh": nn.Tanh, "relu": nn.ReLU}


def layer_init(layer: nn.Linear, gain: float = math.sqrt(2), bias: float = 0.0) -> nn.Linear:
    """CleanRL's init: orthogonal weights with ``gain``, constant bias."""
    nn.init.orthogonal_(layer.weight, gain)
    nn.init.constant_(layer.bias, bias)
    return layer


class AgentLinear(nn.Module):
    """``agents`` independent linear layers as one: ``(..., agents, in) -> (..., agents, out)``.

    ``weight`` is ``(agents, out, in)``, each agent's matrix initialised like :func:`layer_init`
    initialises an ``nn.Linear`` (orthogonal with ``gain``), so a per-agent model starts as
    ``agents`` independently drawn copies of the shared one.
    """

    def __init__(self, agents: int, in_features: int, out_features: int, gain: float = math.sqrt(2),
                 bias: float = 0.0):
        super().__init__()
        self.agents, self.in_features, self.out_features = int(agents), int(in_features), int(out_features)
        self.weight = nn.Parameter(torch.empty(self.agents, self.out_features, self.in_features))
        self.bias = nn.Parameter(torch.full((self.agents, self.out_features), float(bias)))
        for matrix in self.weight.data:
            nn.init.orthogonal_(matrix, gain)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.dim() < 2 or x.shape[-2] != self.agents or x.shape[-1] != self.in_features:
            raise ValueError(f"AgentLinear({self.agents} agents, {self.in_features} -> {self.out_features}): inputs "
                             f"of shape {tuple(x.shape)} must end with ({self.agents}, {self.in_features})")
        return torch.einsum("...ni,noi->...no", x, self.weight) + self.bias

    def extra_repr(self) -> str:
        return f"agents={self.agents}, in_features={self.in_features}, out_features={self.out_features}"


def linear(in_dim: int, out_dim: int, gain: float = math.sqrt(2), agents: int | None = None) -> nn.Module:
    """An initialised ``nn.Linear``, or an :class:`AgentLinear` of ``agents`` layers."""
    if agents is None:
        return layer_init(nn.Linear(in_dim, out_dim), gain)
    return AgentLinear(agents, in_dim, out_dim, gain)


def mlp(in_dim: int, dims: Sequence[int], activation: str, agents: int | None = None) -> nn.Sequential:
    """Hidden layers only (Linear + activation each); an empty ``dims`` is the identity."""
    layers: list[nn.Module] = []
    for out_dim in dims:
        layers += [linear(in_dim, out_dim, math.sqrt(2), agents), ACTIVATIONS[activation]()]
        in_dim = out_dim
    return nn.Sequential(*layers)


class ActionHead(nn.Module):
    """Maps features to an ``ActionDistribution`` for a given action space.

    Discrete heads are one Linear per component (not one big Linear split
    afterwards) so each head gets its own orthogonal init with gain 0.01.
    """

    def __init__(self, in_features: int, action_space: Any, log_std_init: float = 0.0, gain: float = 0.01,
                 agents: int | None = None):
        super().__init__()
        self.space = describe_action_space(action_space)
        if self.space.kind == "discrete":
            self.heads = nn.ModuleList(linear(in_features, n, gain, agents) for n in self.space.nvec)
        else:
            self.mean = linear(in_features, self.space.dim, gain, agents)
            shape = (self.space.dim,) if agents is None else (agents, self.space.dim)  # one log_std per agent
            self.log_std = nn.Parameter(torch.full(shape, float(log_std_init)))

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
