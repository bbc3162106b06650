"""Returns, advantages and the A2C / PPO updates.

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

import math
from dataclasses import dataclass
from typing import Callable

import torch
from torch import nn


class NonFiniteError(FloatingPointError):
    """A NaN or inf in a rollout (observations, rewards, values) or in an update
    (loss, gradient norm). A rollout's is raised before the update; an update's
    at its end (see :func:`policy_update`), and the trainer then puts back the
    parameters and optimizer state from before the update, so that a single bad
    value cannot turn every weight into NaN."""


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


def explained_variance(predicted: torch.Tensor, target: torch.Tensor) -> float:
    """1 - Var(target - predicted) / Var(target); NaN when the target is constant."""
    var = target.var()
    return float("nan") if float(var) == 0.0 else float(1.0 - (target - predicted).var() / var)


@dataclass
class Batch:
    """One policy's flattened rollout (every tensor has the sample dimension first)."""

    obs: torch.Tensor
    actions: torch.Tensor
    logprobs: torch.Tensor
    values: torch.Tensor
    advantages: torch.Tensor
    returns: torch.Tensor

    def __len__(self) -> int:
        return self.obs.shape[0]

    def take(self, index: torch.Tensor) -> "Batch":
        return Batch(*(getattr(self, f)[index] for f in ("obs", "actions", "logprobs", "values", "advantages",
                                                        "returns")))


METRIC_NAMES = ("policy_loss", "value_loss", "entropy", "approx_kl", "clipfrac", "grad_norm")


def _raise_if_nonfinite(rows, *, first_step: int, vf_coef: float, entropy_coef: float,
                        max_grad_norm: float | None) -> None:
    """Raise :class:`NonFiniteError` for the first row (METRIC_NAMES, then the
    loss; update step ``first_step`` onwards) whose loss or gradient norm is not finite."""
    for step, row in enumerate(rows, start=first_step):
        metrics = dict(zip(METRIC_NAMES, row[:6]))
        loss = row[6]
        if math.isfinite(loss) and math.isfinite(metrics["grad_norm"]):
            continue
        what = "loss" if not math.isfinite(loss) else "gradient norm"
        raise NonFiniteError(
            f"non-finite {what} in update step {step}: loss = {loss} (policy_loss "
            f"{metrics['policy_loss']}, value_loss {metrics['value_loss']} x vf_coef {vf_coef}, "
            f"entropy {metrics['entropy']} x entropy_coef {entropy_coef}), gradient norm "
            f"{metrics['grad_norm']} (max_grad_norm {max_grad_norm}). Fix: lower vf_coef / the learning "
            "rate, set max_grad_norm, or scale the rewards"
        )


def policy_update(
    model: nn.Module,
    optimizer: torch.optim.Optimizer,
    batch: Batch,
    *,
    algorithm: str,
    clip_param: float,
    clip_value_loss: bool,
    entropy_coef: float,
    vf_coef: float,
    max_grad_norm: float | None,
    normalize_advantage: bool,
    num_epochs: int,
    num_minibatches: int,
    target_kl: float | None,
    generator: torch.Generator,
    reduce_gradients: Callable[[nn.Module], None] | None = None,
    reduce_mean: Callable[[torch.Tensor], torch.Tensor] | None = None,
    backward: Callable[[torch.Tensor], None] | None = None,
) -> dict[str, float]:
    """Run the A2C or PPO update on ``batch``; return the losses and diagnostics.

    The two optional hooks make the same code data-parallel (see
    ``training/distributed.py``): ``reduce_gradients(model)`` runs after
    ``backward`` and before the grad-norm clip (all-reduce the gradients, so
    every rank takes the same step), and ``reduce_mean(approx_kl)`` makes the
    KL early stop the same decision on every rank (a rank that stopped alone
    would leave the others waiting in the next all-reduce).

    ``backward(loss)`` replaces ``loss.backward()``: the Lightning module
    (``training/lightning.py``) passes ``manual_backward`` and Lightning's
    wrapped optimizer, so its precision plugin, strategy and callbacks see
    every gradient step of this same update.

    The metrics of every minibatch stay on the device until the end, where
    they come to the host in one read; a non-finite loss or gradient norm
    then raises :class:`NonFiniteError` naming its update step, *after* the
    steps were taken: the caller puts the parameters back (the trainer keeps
    a copy from before the update). With ``target_kl`` the early stop reads
    each minibatch's KL anyway, and the check comes before each step.
    """
    ppo = algorithm == "PPO"
    n = len(batch)
    minibatch = max(1, n // num_minibatches)
    rows: list[torch.Tensor] = []  # per minibatch: METRIC_NAMES, then the loss
    updates = 0
    stop = False
    kl_stop = ppo and target_kl is not None
    for _ in range(num_epochs):
        order = torch.randperm(n, generator=generator).to(batch.obs.device) if num_minibatches > 1 \
            else torch.arange(n, device=batch.obs.device)
        for start in range(0, n - minibatch + 1, minibatch):
            mb = batch.take(order[start:start + minibatch])
            dist, value = model(mb.obs)
            logprob = dist.log_prob(mb.actions)
            entropy = dist.entropy().mean()
            log_ratio = logprob - mb.logprobs
            ratio = log_ratio.exp()
            advantages = mb.advantages
            if normalize_advantage and advantages.numel() > 1:
                advantages = (advantages - advantages.mean()) / (advantages.std() + 1e-8)
            if ppo:
                policy_loss = torch.max(-advantages * ratio,
                                        -advantages * ratio.clamp(1.0 - clip_param, 1.0 + clip_param)).mean()
            else:
                policy_loss = -(advantages * logprob).mean()
            if ppo and clip_value_loss:
                clipped = mb.values + (value - mb.values).clamp(-clip_param, clip_param)
                value_loss = 0.5 * torch.max((value - mb.returns) ** 2, (clipped - mb.returns) ** 2).mean()
            else:
                value_loss = 0.5 * ((value - mb.returns) ** 2).mean()
            loss = policy_loss - entropy_coef * entropy + vf_coef * value_loss

            optimizer.zero_grad(set_to_none=True)
            if backward is None:
                loss.backward()
            else:
                backward(loss)
            if reduce_gradients is not None:
                reduce_gradients(model)
            grad_norm = nn.utils.clip_grad_norm_(model.parameters(), max_grad_norm if max_grad_norm else float("inf"))
            with torch.no_grad():
                approx_kl = ((ratio - 1.0) - log_ratio).mean()
                clipfrac = ((ratio - 1.0).abs() > clip_param).float().mean()
                rows.append(torch.stack([t.detach().float().reshape(()).to(loss.device) for t in (
                    policy_loss, value_loss, entropy, approx_kl, clipfrac, torch.as_tensor(grad_norm), loss)]))
            if kl_stop:  # the early stop reads this minibatch's KL on the host anyway: check it before the step
                row = rows[-1].tolist()
                _raise_if_nonfinite([row], first_step=updates + 1, vf_coef=vf_coef, entropy_coef=entropy_coef,
                                    max_grad_norm=max_grad_norm)
            optimizer.step()
            updates += 1
            if kl_stop:
                kl = float(reduce_mean(approx_kl)) if reduce_mean is not None else row[3]
                if kl > target_kl:
                    stop = True
                    break
        if stop:
            break
    # Every minibatch's metrics in one host read: a read per minibatch would
    # make the host wait for the device before it could queue the next
    # minibatch's kernels, leaving the GPU idle while Python launches them.
    table = torch.stack(rows).tolist()
    _raise_if_nonfinite(table, first_step=1, vf_coef=vf_coef, entropy_coef=entropy_coef, max_grad_norm=max_grad_norm)
    sums = {key: sum(row[i] for row in table) for i, key in enumerate(METRIC_NAMES)}
    metrics = {key: total / updates for key, total in sums.items()}
    metrics["updates"] = float(updates)
    metrics["explained_variance"] = explained_variance(batch.values, batch.returns)
    return metrics
