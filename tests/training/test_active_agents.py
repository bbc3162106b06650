"""Agents that leave the game (an env's ``active_array``: TagContinuous's tagged runners) end their own
episode there and count for nothing in the losses until their env resets (cpu executor, real kernels)."""

from __future__ import annotations

import torch

from warp_drive.training.config import load_config
from warp_drive.training.run import build


def tag_trainer(*overrides):
    return build(load_config("tag_continuous_small", [
        "trainer.backend=cpu", "trainer.num_envs=16", "trainer.rollout_length=64", "trainer.total_steps=4096",
        "env.config.episode_length=200", "policy.runner.to_train=true", *overrides]))


def params(trainer, tag):
    return [q.detach().clone() for q in trainer.policies[tag].model.parameters()]


def test_runners_out_of_the_game_leave_an_update_bit_identical_whatever_they_observe():
    a, b = tag_trainer(), tag_trainer()
    a.collect_rollout()
    b.collect_rollout()
    runner_a, runner_b = a.rollout.buffers["runner"], b.rollout.buffers["runner"]
    assert torch.equal(runner_a["obs"], runner_b["obs"])  # one seed, one rollout
    out = ~runner_b["active"]
    assert int(out.sum()) > 50, "the rollout should hold samples of tagged runners"
    runner_b["obs"][out] += torch.randn_like(runner_b["obs"][out]) * 10.0  # what they 'observe' after leaving
    a.update()
    b.update()
    for x, y in zip(params(a, "runner"), params(b, "runner")):
        assert torch.equal(x, y)


def test_perturbing_runners_in_the_game_does_change_the_update():
    """The check above can fail: the same perturbation of active samples moves the parameters."""
    a, b = tag_trainer(), tag_trainer()
    a.collect_rollout()
    b.collect_rollout()
    buf = b.rollout.buffers["runner"]
    buf["obs"][buf["active"]] += 10.0
    a.update()
    b.update()
    assert any(not torch.equal(x, y) for x, y in zip(params(a, "runner"), params(b, "runner")))


def test_a_runner_that_leaves_ends_its_own_episode_without_a_bootstrap():
    trainer = tag_trainer()
    trainer.collect_rollout()
    p = trainer.policies["runner"]
    buf = trainer.rollout.buffers[p.tag]
    left = buf["active"] & ~buf["active_after"]
    env_done = trainer.rollout.done.repeat_interleave(len(p.agent_ids), dim=1) > 0
    where = torch.nonzero(left & ~env_done)
    assert len(where) > 0, "some runner should be tagged while its env goes on"
    advantages, _ = trainer.algorithm.advantages(p)
    for t, row in where.tolist():
        # Terminal for that agent: the advantage is its last reward minus its value, nothing after counts.
        assert float(advantages[t, row]) == float(buf["rewards"][t, row] - buf["values"][t, row])
