"""PPO and A2C as pure functions of tensors: GAE(λ), the loss, and the epoch/minibatch update.

They touch no env or trainer, so each is tested on its own (``tests/training/test_algorithms.py``);
``ppo/algorithm.py`` feeds them rollouts. What they fix of WarpDrive's is in ``ppo/__init__.py``.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from warp_drive.training.guards import METRIC_NAMES, raise_if_nonfinite_update
from warp_drive.training.optim import clip_grad_norm
from warp_drive.training.ppo.settings import Batch, PPOSettings, UpdateHooks


def compute_gae(rewards: torch.Tensor, values: torch.Tensor, next_values: torch.Tensor, terminated: torch.Tensor,
                ended: torch.Tensor, gamma: float, gae_lambda: float) -> tuple[torch.Tensor, torch.Tensor]:
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


def ppo_update(model: nn.Module, optimizer: torch.optim.Optimizer, batch: Batch, settings: PPOSettings,
               hooks: UpdateHooks | None = None) -> dict[str, float]:
    """Run the A2C or PPO update on ``batch``; return the mean losses and diagnostics.

    PPO: ``num_epochs`` passes over ``num_minibatches`` shuffled minibatches, stopping early when the
    approximate KL passes ``target_kl``; A2C: one epoch, one minibatch. ``hooks``: see :class:`UpdateHooks`.
    Every minibatch's metrics stay on the device and come to the host in one read at the end (a read per
    minibatch would stall the queue); a non-finite loss or gradient norm then raises ``NonFiniteError``
    naming its step, after the steps were taken: the caller restores the parameters. With ``target_kl``
    the early stop reads each minibatch's KL anyway, and the check comes before each step.
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
