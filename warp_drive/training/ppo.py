"""PPO and A2C as pure functions: GAE(λ), the loss, and the epoch/minibatch update top to bottom.

They take tensors, a model, an optimizer and :class:`PPOSettings` (a policy's
config section), and touch no env or trainer, so each is tested on its own
(``tests/training/test_algorithms.py``); the trainer that feeds them rollouts is
``training/ppo_trainer.py``.

What WarpDrive got wrong and this module does right (§4.4 and §9 of the
reference): its "PPO" reused the current log-probabilities as the old ones, so
the ratio was always 1 and PPO was A2C; its returns dropped the last reward
and never bootstrapped from the state after the batch; and a time-limit
truncation was treated as a termination. Here:

* GAE(λ) over the rollout, bootstrapping from ``V(s_{t+1})`` at every step
  except where the episode *terminated*; at a *truncation* the bootstrap value
  is the value of the final observation (before the reset), and the GAE trace
  is cut at every episode end;
* PPO keeps the behaviour log-probabilities of the rollout, clips the ratio,
  runs several epochs over shuffled minibatches, optionally clips the value
  loss, normalises advantages per minibatch, adds an entropy bonus, clips the
  global gradient norm and can stop early on an approximate-KL threshold;
* A2C is the same update with one full-batch gradient step and the plain
  policy-gradient loss.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Callable

import torch
from torch import nn

from warp_drive.training.guards import METRIC_NAMES, raise_if_nonfinite_update


def compute_gae(
    rewards: torch.Tensor,
    values: torch.Tensor,
    next_values: torch.Tensor,
    terminated: torch.Tensor,
    ended: torch.Tensor,
    gamma: float,
    gae_lambda: float,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Advantages and returns for a ``(T, B)`` rollout.

    ``next_values[t]`` is ``V(s_{t+1})``: the value of the observation right
    after step ``t`` (for a step that ended an episode by truncation, the final
    observation before the reset). ``terminated[t]`` says that step ``t`` ended
    its episode in a terminal state (no bootstrap); ``ended[t]`` that it ended
    the episode either way (the advantage trace stops there).
    """
    not_terminated = 1.0 - terminated.float()
    continues = 1.0 - ended.float()
    deltas = rewards + gamma * next_values * not_terminated - values
    advantages = torch.zeros_like(rewards)
    running = torch.zeros_like(rewards[0])
    for t in range(rewards.shape[0] - 1, -1, -1):
        running = deltas[t] + gamma * gae_lambda * continues[t] * running
        advantages[t] = running
    return advantages, advantages + values


class ValueNormalizer(torch.nn.Module):
    """Running mean and variance of the returns a critic learns (MAPPO's value normalisation).

    The critic predicts ``(return - mean) / std``: the value loss keeps one
    scale whatever the rewards' (a Pendulum return of -1,000 and a CartPole
    one of 500 alike). The statistics merge batch by batch exactly (Chan et
    al.) in float64 buffers, which a checkpoint holds and data-parallel ranks
    average (``Distributed.average_buffers``) so every rank normalises alike.
    """

    def __init__(self, eps: float = 1e-5):
        super().__init__()
        self.eps = float(eps)
        self.register_buffer("mean", torch.zeros((), dtype=torch.float64))
        self.register_buffer("var", torch.ones((), dtype=torch.float64))
        self.register_buffer("count", torch.zeros((), dtype=torch.float64))

    @torch.no_grad()
    def update(self, returns: torch.Tensor) -> None:
        x = returns.reshape(-1).to(torch.float64)
        n = x.numel()
        if n == 0:
            return
        delta, total = x.mean() - self.mean, self.count + n
        m2 = self.var * self.count + x.var(unbiased=False) * n + delta.square() * self.count * n / total
        self.mean.add_(delta * n / total)
        self.var.copy_(m2 / total)
        self.count.copy_(total)

    def _std(self) -> torch.Tensor:
        return torch.sqrt(self.var + self.eps)

    def normalize(self, x: torch.Tensor) -> torch.Tensor:
        return ((x - self.mean) / self._std()).to(x.dtype)

    def denormalize(self, x: torch.Tensor) -> torch.Tensor:
        return (x * self._std() + self.mean).to(x.dtype)


def explained_variance(predicted: torch.Tensor, target: torch.Tensor) -> float:
    """1 - Var(target - predicted) / Var(target); NaN when the target is constant."""
    var = target.var()
    return float("nan") if float(var) == 0.0 else float(1.0 - (target - predicted).var() / var)


@dataclass
class Batch:
    """One policy's flattened rollout (every tensor has the sample dimension first).

    ``masks``: the action masks the actions were chosen under (env's ``action_mask``), or None; the
    update applies them again, so the recomputed log-probabilities are those of the behaviour policy.
    The first dimension is the unit PPO shuffles (``training/sequences.py``): a sample, an env's
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


def ppo_loss(dist: Any, value: torch.Tensor, mb: Batch, s: PPOSettings) -> dict[str, torch.Tensor]:
    """The A2C or PPO loss of one minibatch, with its parts (policy, value, entropy, KL, clip fraction)."""
    ppo = s.algorithm == "PPO"
    valid = mb.valid
    if valid is None:
        mean = torch.mean
    else:  # samples of agents out of the game: excluded from every mean, and so from every gradient
        count = valid.sum().clamp(min=1)
        mean = lambda x: torch.where(valid, x, torch.zeros_like(x)).sum() / count  # noqa: E731
    logprob = dist.log_prob(mb.actions)
    entropy = mean(dist.entropy())
    log_ratio = logprob - mb.logprobs
    ratio = log_ratio.exp()
    advantages = mb.advantages
    if s.normalize_advantage and advantages.numel() > 1:
        kept = advantages if valid is None else advantages[valid]
        if kept.numel() > 1:
            advantages = (advantages - kept.mean()) / (kept.std() + 1e-8)
    if ppo:
        policy_loss = mean(torch.max(-advantages * ratio,
                                     -advantages * ratio.clamp(1.0 - s.clip_param, 1.0 + s.clip_param)))
    else:
        policy_loss = mean(-(advantages * logprob))
    if ppo and s.clip_value_loss:
        clipped = mb.values + (value - mb.values).clamp(-s.clip_param, s.clip_param)
        value_loss = 0.5 * mean(torch.max((value - mb.returns) ** 2, (clipped - mb.returns) ** 2))
    else:
        value_loss = 0.5 * mean((value - mb.returns) ** 2)
    with torch.no_grad():
        approx_kl = mean((ratio - 1.0) - log_ratio)
        clipfrac = mean(((ratio - 1.0).abs() > s.clip_param).float())
    return {"loss": policy_loss - s.entropy_coef * entropy + s.vf_coef * value_loss, "policy_loss": policy_loss,
            "value_loss": value_loss, "entropy": entropy, "approx_kl": approx_kl, "clipfrac": clipfrac}


@torch.no_grad()
def clip_grad_norm(params: list[torch.Tensor], max_norm: float) -> torch.Tensor:
    """``nn.utils.clip_grad_norm_``'s arithmetic (foreach norms, their 2-norm, a scale clamped at 1) on a
    list of parameters that share a device and dtype, without its per-call grouping and generator walks:
    a sixth of a small model's minibatch step on a CPU. Returns the total norm before clipping."""
    grads = [p.grad for p in params if p.grad is not None]
    if not grads:
        return torch.zeros(())
    total = torch.linalg.vector_norm(torch.stack(torch._foreach_norm(grads, 2.0)), 2.0)
    torch._foreach_mul_(grads, torch.clamp(float(max_norm) / (total + 1e-6), max=1.0))
    return total


def ppo_update(model: nn.Module, optimizer: torch.optim.Optimizer, batch: Batch, settings: PPOSettings,
               hooks: UpdateHooks | None = None) -> dict[str, float]:
    """Run the A2C or PPO update on ``batch``; return the mean losses and diagnostics.

    PPO: ``num_epochs`` passes over ``num_minibatches`` shuffled minibatches,
    stopping early when the approximate KL passes ``target_kl``; A2C: set
    one epoch and one minibatch. ``hooks``: see :class:`UpdateHooks`.

    The metrics of every minibatch stay on the device until the end, where
    they come to the host in one read (a read per minibatch would make the
    host wait for the device before queueing the next minibatch's kernels);
    a non-finite loss or gradient norm then raises
    :class:`~warp_drive.training.guards.NonFiniteError` naming its update
    step, *after* the steps were taken: the caller puts the parameters back.
    With ``target_kl`` the early stop reads each minibatch's KL anyway, and
    the check comes before each step.
    """
    s, hooks = settings, hooks or UpdateHooks()
    n = len(batch)
    minibatch = max(1, n // s.num_minibatches)
    rows: list[torch.Tensor] = []  # per minibatch: METRIC_NAMES, then the loss
    updates = 0
    kl_stop = s.algorithm == "PPO" and s.target_kl is not None
    params = list(model.parameters())
    one_kind = len({(p.device, p.dtype) for p in params}) == 1  # else torch's clip, which groups by both
    for _ in range(s.num_epochs):
        order = torch.randperm(n, generator=hooks.generator).to(batch.obs.device) if s.num_minibatches > 1 \
            else torch.arange(n, device=batch.obs.device)
        for start in range(0, n - minibatch + 1, minibatch):
            mb = batch.take(order[start:start + minibatch])
            dist, value = model(mb.obs) if mb.hidden is None else model.unroll(mb.obs, mb.hidden, mb.starts)
            if mb.masks is not None:
                dist = dist.masked(mb.masks)
            if mb.critic_obs is not None:
                value = model.central_value(mb.critic_obs)
            parts = ppo_loss(dist, value, mb, s)
            loss = parts["loss"]
            optimizer.zero_grad(set_to_none=True)
            loss.backward() if hooks.backward is None else hooks.backward(loss)
            if hooks.reduce_gradients is not None:
                hooks.reduce_gradients(model)
            max_norm = s.max_grad_norm or float("inf")
            grad_norm = clip_grad_norm(params, max_norm) if one_kind else nn.utils.clip_grad_norm_(params, max_norm)
            rows.append(torch.stack([t.detach().float().reshape(()).to(loss.device) for t in (
                *(parts[k] for k in METRIC_NAMES[:5]), torch.as_tensor(grad_norm), loss)]))
            if kl_stop:  # the early stop reads this minibatch's KL on the host anyway: check it before the step
                row = rows[-1].tolist()
                raise_if_nonfinite_update([row], updates + 1, s)
            optimizer.step()
            updates += 1
            if kl_stop:
                kl = float(hooks.reduce_mean(parts["approx_kl"])) if hooks.reduce_mean is not None else row[3]
                if kl > s.target_kl:
                    break
        else:
            continue
        break  # the KL early stop ends the epochs too
    table = torch.stack(rows).tolist()  # every minibatch's metrics in one host read
    raise_if_nonfinite_update(table, 1, s)
    metrics = {key: sum(row[i] for row in table) / updates for i, key in enumerate(METRIC_NAMES)}
    metrics["updates"] = float(updates)
    kept = slice(None) if batch.valid is None else batch.valid
    metrics["explained_variance"] = explained_variance(batch.values[kept], batch.returns[kept])
    return metrics
