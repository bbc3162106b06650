"""The uniform-over-legal-actions baseline (``warp-drive evaluate --random``): ``run_episodes(uniform=True)``
never takes a masked action, draws each legal one about equally often, and draws Box actions uniformly
within their bounds."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from gymnasium import spaces

from test_action_masks import masked_config  # tests/training is on sys.path (pytest's prepend import mode)
from warp_drive.training.config import load_config
from warp_drive.training.run import build, evaluate_random


def test_uniform_actions_respect_the_action_mask():
    """MaskedChoice draws a new mask every step (a quarter of its rows with one legal action) and counts every
    masked action taken."""
    trainer = build(masked_config("cpu", 64, "trainer.rollout_length=100", "trainer.total_steps=6400"))
    illegal = trainer.env.data_manager.data_on_device_via_torch("illegal_actions")
    result = trainer.run_episodes(uniform=True)
    assert int(result["steps"].sum()) == 64 * 100 and int(illegal.sum()) == 0


def test_uniform_actions_are_uniform_over_the_actions_without_a_mask():
    trainer = build(load_config("dummy_env", ["trainer.backend=cpu", "trainer.num_envs=64",
                                              "trainer.rollout_length=20", "trainer.total_steps=1280",
                                              "env.config.random_starts=false", "env.config.target=100"]))
    seen = []
    trainer.run_episodes(uniform=True, on_step=lambda step, dists: seen.append(trainer.env.actions.clone()))
    counts = torch.bincount(torch.stack(seen).reshape(-1).long(), minlength=3).numpy()
    assert counts.sum() == 64 * 4 * 20
    assert np.all(np.abs(counts / counts.sum() - 1 / 3) < 0.03), counts
    again = []
    trainer.run_episodes(uniform=True, on_step=lambda step, dists: again.append(trainer.env.actions.clone()))
    assert torch.equal(torch.stack(seen), torch.stack(again))  # drawn from the config's seed


def test_uniform_box_actions_fill_the_bounds_and_infinite_bounds_are_refused():
    trainer = build(load_config("pendulum", ["trainer.backend=cpu", "trainer.num_envs=8",
                                             "trainer.rollout_length=200", "trainer.total_steps=1600"]))
    p = trainer.policies["shared"]
    low, high = float(p.action_space.low[0]), float(p.action_space.high[0])
    seen = []
    trainer.run_episodes(uniform=True, on_step=lambda step, dists: seen.append(trainer.env.actions.clone()))
    drawn = torch.stack(seen).reshape(-1).numpy()
    assert drawn.min() >= low and drawn.max() <= high
    assert drawn.min() < low + 0.1 * (high - low) and drawn.max() > high - 0.1 * (high - low)
    quarters = np.histogram(drawn, bins=4, range=(low, high))[0] / drawn.size
    assert np.all(np.abs(quarters - 0.25) < 0.05), quarters  # uniform, not bunched in the middle or at the bounds
    p.action_space = spaces.Box(-np.inf, np.inf, shape=(1,), dtype=np.float32)
    with pytest.raises(ValueError, match="policy 'shared': a uniform random baseline needs finite action bounds"):
        trainer.run_episodes(uniform=True)


def test_evaluate_random_reports_per_agent_and_team_returns():
    config = load_config("dummy_env", ["trainer.backend=cpu"])
    result = evaluate_random(config, episodes=6)
    assert result["episodes"] == 6 and len(result["team_returns"]["shared"]) == 6
    team, per_agent = result["team"]["shared"], result["returns"]["shared"]
    assert team["agents"] == 4 and team["mean"] == pytest.approx(4 * per_agent["mean"], rel=1e-6)
