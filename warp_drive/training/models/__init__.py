"""Policy/value networks, their action distributions, and the model registry.

``ActorCritic`` is the built-in fully connected model (registry key
``fully_connected``). It follows CleanRL's PPO network: orthogonal init with
gain sqrt(2) on hidden layers, 0.01 on the policy head (so the initial policy
is near uniform / near the zero mean) and 1.0 on the value head, zero biases.

Every tensor here keeps arbitrary *leading* dimensions: a model called on
``(n_envs, n_agents, obs_dim)`` observations returns per-head probabilities of
shape ``(n_envs, n_agents, n_h)`` -- exactly what the on-device sampler takes,
with no reshape -- and values of shape ``(n_envs, n_agents)``. The design's
``(B, obs_dim)`` is the special case of one leading dimension.

Action spaces (gymnasium; old ``gym`` spaces with the same attributes work too):

* ``Discrete(n)``            -> one categorical head; actions ``(..., 1)`` int64
* ``MultiDiscrete(nvec)``    -> one categorical head per component; actions ``(..., H)``
  int64; log-prob and entropy are summed over heads (heads are independent)
* ``Box(shape=(D,))``        -> Gaussian: a mean head and a learned,
  state-independent ``log_std`` parameter; actions ``(..., D)`` float

User models: ``register_model("name", MyModule)`` where ``MyModule(obs_dim,
action_space, config)`` is an ``nn.Module`` whose ``forward(obs)`` returns
``(ActionDistribution, value)`` and which has ``value(obs)``. ``ActionHead``
below builds the right head for any supported space, so a user model only has
to supply its trunk. ``update_obs_normalization`` is optional on user models.
"""

from __future__ import annotations

import inspect
import math
from dataclasses import dataclass
from typing import Any, Callable, Sequence

import numpy as np
import torch
from torch import nn

__all__ = [
    "ActionDistribution",
    "ActionHead",
    "ActorCritic",
    "RunningMeanStd",
    "SpaceInfo",
    "create_model",
    "describe_action_space",
    "layer_init",
    "register_model",
    "registered_models",
]

OBS_NORM_EPS = 1e-8
OBS_NORM_CLIP = 10.0
_ACTIVATIONS: dict[str, Callable[[], nn.Module]] = {"tanh": nn.Tanh, "relu": nn.ReLU}


# ====================================================================== action spaces
@dataclass(frozen=True)
class SpaceInfo:
    """What a model needs from an action space, independent of gym vs gymnasium.

    ``kind`` is ``"discrete"`` (``nvec`` holds the choices per head; one entry for
    ``Discrete``) or ``"continuous"`` (``dim`` is D of ``Box(shape=(D,))``).
    """

    kind: str
    nvec: tuple[int, ...] = ()
    dim: int = 0

    @property
    def num_heads(self) -> int:
        return len(self.nvec) if self.kind == "discrete" else 1


def describe_action_space(space: Any) -> SpaceInfo:
    """Classify ``space``; a ValueError says why an unsupported space is rejected.

    Checked by class name as well as ``isinstance`` so that old ``gym`` spaces
    (same attribute names) are accepted without importing ``gym``.
    """
    kind = type(space).__name__
    try:  # gymnasium is a hard dependency, but keep the error readable if it is broken
        from gymnasium import spaces as gspaces
    except Exception:  # pragma: no cover
        gspaces = None
    is_ = lambda name: kind == name or (gspaces is not None and isinstance(space, getattr(gspaces, name)))  # noqa: E731

    if is_("Discrete"):
        n = int(space.n)
        if n < 1:
            raise ValueError(f"Discrete action space needs n >= 1, got {n}")
        return SpaceInfo("discrete", nvec=(n,))
    if is_("MultiDiscrete"):
        nvec = np.asarray(space.nvec)
        if nvec.ndim != 1 or nvec.size == 0:
            raise ValueError(f"MultiDiscrete action space must have a non-empty 1-D nvec, got shape {nvec.shape}")
        if (nvec < 1).any():
            raise ValueError(f"MultiDiscrete action space needs every nvec entry >= 1, got {nvec.tolist()}")
        return SpaceInfo("discrete", nvec=tuple(int(n) for n in nvec))
    if is_("Box"):
        shape = tuple(space.shape)
        if len(shape) != 1 or shape[0] < 1:
            raise ValueError(f"Box action space must have shape (D,) with D >= 1, got {shape}")
        return SpaceInfo("continuous", dim=int(shape[0]))
    raise ValueError(f"unsupported action space {space!r}: use Discrete, MultiDiscrete or Box(shape=(D,))")


# ====================================================================== distribution
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


# ====================================================================== building blocks
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


# ====================================================================== the built-in model
_DEFAULTS = dict(
    type="fully_connected",
    fc_dims=[64, 64],
    activation="tanh",
    shared_trunk=False,
    obs_normalization=False,
    log_std_init=0.0,
    extra={},
)


def _option(config: Any, key: str) -> Any:
    """Read ``key`` from a ModelConfig-like object or a dict, falling back to the design's default."""
    if config is None:
        return _DEFAULTS[key]
    if isinstance(config, dict):
        return config.get(key, _DEFAULTS[key])
    return getattr(config, key, _DEFAULTS[key])


class ActorCritic(nn.Module):
    """Fully connected actor-critic: MLP trunk(s), an action head and a scalar value head.

    ``shared_trunk=False`` (default, as CleanRL) gives the actor and the critic
    their own trunks, so value-loss gradients never disturb the policy
    features; ``shared_trunk=True`` halves the trunk parameters.
    """

    def __init__(self, obs_dim: int, action_space: Any, config: Any = None):
        super().__init__()
        fc_dims = list(_option(config, "fc_dims"))
        activation = _option(config, "activation")
        if activation not in _ACTIVATIONS:
            raise ValueError(f"model.activation must be one of {sorted(_ACTIVATIONS)}, got {activation!r}")
        if any(isinstance(d, bool) or not isinstance(d, (int, np.integer)) or d < 1 for d in fc_dims):
            raise ValueError(f"model.fc_dims must be positive integers, got {fc_dims!r}")
        if isinstance(obs_dim, bool) or int(obs_dim) != obs_dim or obs_dim < 1:
            raise ValueError(f"obs_dim must be a positive integer, got {obs_dim!r}")
        obs_dim = int(obs_dim)
        self.obs_dim = obs_dim
        self.config = config
        self.shared_trunk = bool(_option(config, "shared_trunk"))
        self.space = describe_action_space(action_space)
        feat = fc_dims[-1] if fc_dims else obs_dim

        self.obs_rms = RunningMeanStd(obs_dim) if _option(config, "obs_normalization") else None
        if self.shared_trunk:
            self.trunk = mlp(obs_dim, fc_dims, activation)
            self.actor_trunk = self.critic_trunk = None
        else:
            self.trunk = None
            self.actor_trunk = mlp(obs_dim, fc_dims, activation)
            self.critic_trunk = mlp(obs_dim, fc_dims, activation)
        self.actor_head = ActionHead(feat, action_space, log_std_init=float(_option(config, "log_std_init")))
        self.value_head = layer_init(nn.Linear(feat, 1), gain=1.0)

    # ------------------------------------------------------------------ observation normalisation
    @property
    def obs_normalization(self) -> bool:
        return self.obs_rms is not None

    def update_obs_normalization(self, obs: torch.Tensor) -> None:
        """Fold a batch ``(..., obs_dim)`` into the running stats; no-op when normalisation is off."""
        if self.obs_rms is not None:
            self.obs_rms.update(obs)

    def _prepare(self, obs: torch.Tensor) -> torch.Tensor:
        if obs.shape[-1] != self.obs_dim:
            raise ValueError(f"observations of shape {tuple(obs.shape)}: last dimension must be obs_dim={self.obs_dim}")
        if not obs.is_floating_point():
            obs = obs.float()
        return self.obs_rms.normalize(obs) if self.obs_rms is not None else obs

    # ------------------------------------------------------------------ forward passes
    def forward(self, obs: torch.Tensor) -> tuple[ActionDistribution, torch.Tensor]:
        """``obs (..., obs_dim)`` -> (action distribution over ``...``, value ``(...)``)."""
        x = self._prepare(obs)
        if self.shared_trunk:
            h = self.trunk(x)
            return self.actor_head(h), self.value_head(h).squeeze(-1)
        return self.actor_head(self.actor_trunk(x)), self.value_head(self.critic_trunk(x)).squeeze(-1)

    def value(self, obs: torch.Tensor) -> torch.Tensor:
        """Critic only (bootstrapping the last rollout step needs no policy)."""
        x = self._prepare(obs)
        h = self.trunk(x) if self.shared_trunk else self.critic_trunk(x)
        return self.value_head(h).squeeze(-1)

    def distribution(self, obs: torch.Tensor) -> ActionDistribution:
        """Actor only (acting during evaluation needs no value)."""
        x = self._prepare(obs)
        return self.actor_head(self.trunk(x) if self.shared_trunk else self.actor_trunk(x))


# ====================================================================== registry
_MODEL_REGISTRY: dict[str, type] = {}


def register_model(name: str, cls: type | None = None, *, overwrite: bool = False):
    """Make ``cls`` available as ``model.type: <name>`` in run configs.

    ``cls`` must be an ``nn.Module`` subclass constructible as
    ``cls(obs_dim, action_space, config)``. Re-registering a name is an error
    unless ``overwrite=True`` (silently replacing the built-in model by
    importing a module twice is a bug worth hearing about). Without ``cls``
    it returns a decorator.
    """
    if not isinstance(name, str) or not name:
        raise ValueError(f"model name must be a non-empty string, got {name!r}")
    if cls is None:
        return lambda c: register_model(name, c, overwrite=overwrite)
    if not (inspect.isclass(cls) and issubclass(cls, nn.Module)):
        raise TypeError(f"model {name!r}: {cls!r} must be a torch.nn.Module subclass")
    try:
        inspect.signature(cls).bind(1, None, None)
    except TypeError as exc:
        raise TypeError(
            f"model {name!r}: {cls.__name__} must be constructible as {cls.__name__}(obs_dim, action_space, config) "
            f"({exc})"
        ) from None
    except ValueError:  # signature not introspectable (C extension): trust the user
        pass
    if name in _MODEL_REGISTRY and not overwrite and _MODEL_REGISTRY[name] is not cls:
        raise ValueError(
            f"model {name!r} is already registered ({_MODEL_REGISTRY[name].__name__}); pass overwrite=True to replace it"
        )
    _MODEL_REGISTRY[name] = cls
    return cls


def registered_models() -> list[str]:
    return sorted(_MODEL_REGISTRY)


def create_model(config: Any, obs_dim: int, action_space: Any) -> nn.Module:
    """Instantiate the model named by ``config.type`` (default ``fully_connected``)."""
    name = _option(config, "type")
    if name not in _MODEL_REGISTRY:
        raise ValueError(f"unknown model type {name!r}; registered model types: {registered_models()}")
    return _MODEL_REGISTRY[name](obs_dim, action_space, config)


register_model("fully_connected", ActorCritic)
