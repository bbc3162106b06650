"""``warp_drive.env.demo``: the end-to-end runtime loop (sample, step, reset, log)."""

from __future__ import annotations

import pytest

import warp_drive.env.demo as demo
from warp_drive.services.reset import EnvironmentReset

RING_SIZE = 16  # the demo's ring (run() does not return it)
EPISODE_LENGTH = 50  # the demo's episode length


@pytest.fixture(scope="module")
def result():
    return demo.run(num_envs=50, num_agents=8, steps=200, backend="cpu", seed=0)


def test_run_finishes_episodes(result):
    assert result["backend"] == "cpu"
    assert (result["envs"], result["agents"], result["steps"]) == (50, 8, 200)
    assert result["episodes"] > 0
    assert result["terminated"] + result["truncated"] == result["episodes"]
    # 200 steps of 50 envs with episodes of at most 50 steps: every env ends at least 4 episodes.
    assert result["episodes"] >= 50 * (200 // EPISODE_LENGTH)
    assert result["terminated"] > 0  # the biased policy does reach the goal
    assert result["seconds"] > 0 and result["env_steps_per_s"] > 0
    assert result["mean_return"] == result["mean_return"]  # not NaN


def test_run_logs_a_valid_trajectory(result):
    trail = result["env0_positions_agent0"]
    assert 2 <= len(trail) <= EPISODE_LENGTH + 1
    assert all(isinstance(p, int) and 0 <= p < RING_SIZE for p in trail)
    for a, b in zip(trail, trail[1:]):  # actions move one cell at most, around the ring
        assert min((a - b) % RING_SIZE, (b - a) % RING_SIZE) <= 1, trail


def test_run_is_reproducible(result):
    again = demo.run(num_envs=50, num_agents=8, steps=200, backend="cpu", seed=0)
    for key in ("episodes", "terminated", "truncated", "mean_return", "env0_positions_agent0"):
        assert again[key] == result[key], key
    other = demo.run(num_envs=50, num_agents=8, steps=200, backend="cpu", seed=1)
    assert (other["episodes"], other["mean_return"]) != (result["episodes"], result["mean_return"])


def test_logged_trajectory_is_one_episode(monkeypatch):
    first_end = []

    class RecordingReset(EnvironmentReset):
        def reset_when_done(self, data_manager, mode="if_done", undo_done_after_reset=True):
            if mode == "if_done" and not first_end and int(data_manager.data_on_device_via_torch("_done_")[0]):
                first_end.append(int(data_manager.data_on_device_via_torch("_timestep_")[0]))
            super().reset_when_done(data_manager, mode, undo_done_after_reset)

    monkeypatch.setattr(demo, "EnvironmentReset", RecordingReset)
    r = demo.run(num_envs=50, num_agents=8, steps=200, backend="cpu", seed=0)
    assert first_end, "env 0 never finished an episode"
    assert len(r["env0_positions_agent0"]) == first_end[0] + 1, (first_end, r["env0_positions_agent0"])


def test_main_prints_the_summary(capsys):
    demo.main(["--envs", "20", "--agents", "4", "--steps", "60", "--backend", "cpu", "--seed", "3"])
    out = capsys.readouterr().out
    assert "20 envs x 4 agents, 60 steps" in out
    assert "backend:            cpu" in out
    assert "env steps/s" in out and "agent steps/s" in out
    assert "episodes finished:" in out
    assert "env 0, agent 0 positions" in out
