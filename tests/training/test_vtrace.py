"""V-trace (training/vtrace.py): its targets against GAE's with no lag, its clipping (its learning run: tests/learning/test_learning.py)."""

from __future__ import annotations

import pytest
import torch

from warp_drive.env.environment import TERMINATED, TRUNCATED
from warp_drive.training.ppo.losses import compute_gae
from warp_drive.training.vtrace import vtrace_targets


def rollout(T: int = 7, B: int = 5, seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    rewards, values = torch.randn(T, B, generator=g), torch.randn(T, B, generator=g)
    done = torch.zeros(T, B, dtype=torch.int32)
    done[2, 1], done[4, 3], done[T - 1, 0] = TERMINATED, TRUNCATED, TRUNCATED
    final = torch.randn(T, B, generator=g)  # V of each step's final observation (used where it ended)
    last = torch.randn(1, B, generator=g)
    next_values = torch.cat([values[1:], last])
    next_values = torch.where(done == TRUNCATED, final, next_values)
    return rewards, values, next_values, done == TERMINATED, done > 0


def test_with_no_lag_the_targets_are_gae_lambda_one_returns_and_the_advantages_one_step():
    rewards, values, next_values, terminated, ended = rollout()
    targets, advantages = vtrace_targets(rewards, values, next_values, torch.zeros_like(rewards), terminated, ended, 0.9)
    _, returns = compute_gae(rewards, values, next_values, terminated, ended, 0.9, 1.0)
    assert torch.allclose(targets, returns, atol=1e-5)
    # the policy-gradient advantage is the one-step TD error against the next target (the bootstrap at an end)
    next_targets = torch.where(ended, next_values, torch.cat([targets[1:], next_values[-1:]]))
    expected = rewards + 0.9 * next_targets * (~terminated).float() - values
    assert torch.allclose(advantages, expected, atol=1e-6)
    assert advantages[2, 1] == pytest.approx(float(rewards[2, 1] - values[2, 1]))  # terminal: no bootstrap


def test_importance_weights_above_one_are_clipped_and_below_one_scale_the_correction():
    rewards, values, next_values, terminated, ended = rollout(seed=1)
    zero = torch.zeros_like(rewards)
    same, same_adv = vtrace_targets(rewards, values, next_values, zero, terminated, ended, 0.9)
    high, high_adv = vtrace_targets(rewards, values, next_values, zero + 2.0, terminated, ended, 0.9)
    assert torch.equal(high, same) and torch.equal(high_adv, same_adv)  # rho = e^2 clipped at rho_bar = c_bar = 1
    low, low_adv = vtrace_targets(rewards, values, next_values, zero - 50.0, terminated, ended, 0.9)
    assert torch.allclose(low, values, atol=1e-6) and torch.allclose(low_adv, zero, atol=1e-6)  # rho ~ 0: V kept


def test_targets_match_the_papers_sum_over_the_trace_with_random_importance_weights():
    """v_t = V_t + sum_{s>=t} gamma^{s-t} (prod_{t<=i<s} c_i) delta_s, the sum stopping at the episode's end."""
    rewards, values, next_values, terminated, ended = rollout(T=6, B=4, seed=2)
    log_rhos = torch.empty_like(rewards).uniform_(-1.0, 1.0, generator=torch.Generator().manual_seed(3))
    gamma = 0.8
    targets, _ = vtrace_targets(rewards, values, next_values, log_rhos, terminated, ended, gamma)
    rho = log_rhos.exp().clamp(max=1.0)
    deltas = rho * (rewards + gamma * next_values * (~terminated).float() - values)
    expected = values.clone()
    T = rewards.shape[0]
    for b in range(rewards.shape[1]):
        for t in range(T):
            weight = 1.0
            for s in range(t, T):
                expected[t, b] += (gamma ** (s - t)) * weight * deltas[s, b]
                if ended[s, b]:
                    break
                weight *= float(rho[s, b])  # c_s = min(1, ratio): the same clip here
    assert torch.allclose(targets, expected, atol=1e-5)
