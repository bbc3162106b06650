"""The trainer end to end on the cpu executor: reproducibility, resume, checkpoints, evaluation (learning: tests/learning/)."""

from __future__ import annotations

import csv
import math
import shutil
import subprocess
import sys

import numpy as np
import pytest
import torch
from PIL import Image

from warp_drive.training.runs.checkpoint import load_checkpoint
from warp_drive.training.runs.layout import latest_checkpoint
from warp_drive.training.config import load_config
from warp_drive.training.run import build, evaluate, limit_torch_threads, train


def config(name, *overrides, basedir=None):
    extra = ["trainer.backend=cpu"] + ([f"saving.basedir={basedir}"] if basedir else [])
    return load_config(name, [*extra, *overrides])


def short_config(name="cartpole", total_iterations=4):
    return config(name, "trainer.num_envs=8", "trainer.rollout_length=16",
                  f"trainer.total_steps={8 * 16 * total_iterations}")


def short_run(name="cartpole", iterations=3):
    """``iterations`` iterations of a 4-iteration run (the schedules depend on the run's length)."""
    trainer = build(short_config(name))
    return trainer, [trainer.iterate() for _ in range(iterations)]


LEARNING_KEYS = ("losses/policy_loss/shared", "losses/value_loss/shared", "losses/approx_kl/shared",
                 "losses/entropy/shared")


def test_same_seed_same_losses_and_parameters():
    (a, ma), (b, mb) = short_run(), short_run()
    for x, y in zip(ma, mb):
        assert [x[k] for k in LEARNING_KEYS] == [y[k] for k in LEARNING_KEYS]
    for p, q in zip(a.policies["shared"].model.parameters(), b.policies["shared"].model.parameters()):
        assert torch.equal(p, q)


def test_resume_from_a_saved_state_continues_with_the_same_metrics(tmp_path):
    uninterrupted, metrics = short_run(iterations=4)
    first, _ = short_run(iterations=2)
    torch.save(first.state_dict(), tmp_path / "state.pt")
    resumed = build(short_config())
    resumed.load_state_dict(torch.load(tmp_path / "state.pt", weights_only=False))
    later = [resumed.iterate() for _ in range(2)]
    for x, y in zip(metrics[2:], later):
        assert [x[k] for k in LEARNING_KEYS] == [y[k] for k in LEARNING_KEYS]
    assert resumed.env_steps == uninterrupted.env_steps


def test_pendulum_box_actions_train_and_stay_in_bounds():
    trainer, metrics = short_run("pendulum", iterations=2)
    actions = trainer.env.actions
    assert actions.dtype == torch.float32 and float(actions.abs().max()) <= 2.0
    assert all(math.isfinite(m["losses/policy_loss/shared"]) for m in metrics)


@pytest.fixture(scope="module")
def gridworld_run(tmp_path_factory):
    basedir = tmp_path_factory.mktemp("runs")
    cfg = config("tag_gridworld", "trainer.num_envs=16", "trainer.rollout_length=8", "trainer.total_steps=384",
                 "saving.model_params_save_freq=2", basedir=basedir)
    return train(cfg, progress=False), basedir


@pytest.mark.slow  # trains (over ~1.5 s: the full suite, not the fast tier)
def test_train_writes_the_run_directory(gridworld_run):
    run_dir, _ = gridworld_run
    assert (run_dir / "config.yaml").is_file() and (run_dir / "metrics.csv").is_file()
    checkpoints = sorted(p.name for p in (run_dir / "checkpoints").glob("ckpt_*.pt"))
    assert checkpoints == ["ckpt_000002.pt", "ckpt_000003.pt"]  # every 2 iterations, and the last one
    assert latest_checkpoint(run_dir).name == "ckpt_000003.pt"
    state = load_checkpoint(run_dir)
    assert state["iteration"] == 3 and set(state["models"]) == {"tagger", "runner"}
    header = (run_dir / "metrics.csv").read_text().splitlines()[0].split(",")
    for key in ("charts/SPS", "charts/episodic_return/tagger", "losses/policy_loss/runner",
                "losses/value_loss/tagger", "losses/entropy/tagger", "losses/approx_kl/tagger",
                "losses/clipfrac/tagger", "losses/explained_variance/tagger"):
        assert key in header, key
    gif = Image.open(run_dir / "episode.gif")
    assert gif.n_frames > 1


def test_resume_continues_a_finished_run_without_recomputing(gridworld_run):
    run_dir, basedir = gridworld_run
    same = config("tag_gridworld", "trainer.num_envs=16", "trainer.rollout_length=8", "trainer.total_steps=384",
                  "saving.model_params_save_freq=2", basedir=basedir)
    again = train(same, resume=str(run_dir), progress=False)
    assert again == run_dir
    assert load_checkpoint(run_dir)["iteration"] == 3


def test_resume_refuses_a_config_that_differs_from_the_run(gridworld_run):
    from warp_drive.training.config import ConfigError

    run_dir, basedir = gridworld_run
    with pytest.raises(ConfigError, match="trainer.num_envs: run has 16, given 32"):
        train(config("tag_gridworld", "trainer.num_envs=32", basedir=basedir), resume=str(run_dir), progress=False)


@pytest.mark.slow
def test_checkpoint_loads_into_a_fresh_process_and_evaluates(gridworld_run, tmp_path):
    run_dir, _ = gridworld_run
    gif = tmp_path / "eval.gif"
    proc = subprocess.run([sys.executable, "-m", "warp_drive", "evaluate", str(run_dir), "--episodes", "4",
                           "--render", str(gif)], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "tagger" in proc.stdout and "runner" in proc.stdout
    assert Image.open(gif).n_frames > 1


def test_evaluate_reports_mean_returns(gridworld_run):
    run_dir, _ = gridworld_run
    result = evaluate(str(run_dir), episodes=3, greedy=True)
    assert result["episodes"] == 3 and set(result["mean_return"]) == {"tagger", "runner"}
    assert all(np.isfinite(v) for v in result["mean_return"].values())


def test_policies_must_match_the_env_groups():
    from warp_drive.training.config import RunConfig

    raw = config("tag_gridworld").to_dict()
    raw["policy"]["chaser"] = raw["policy"].pop("tagger")
    with pytest.raises(ValueError, match="name the policies after the groups"):
        build(RunConfig.from_dict(raw))


def _learning_rows(run_dir):
    with open(run_dir / "metrics.csv", newline="") as handle:
        rows = list(csv.DictReader(handle))
    keep = [k for k in rows[0] if k.startswith("losses/") or k.startswith("charts/episodic_return")
            or k == "global_step"]
    return [{k: row[k] for k in keep} for row in rows]


def test_resumed_run_writes_the_same_metrics_as_an_uninterrupted_one(tmp_path):
    cfg = config("cartpole", "trainer.num_envs=8", "trainer.rollout_length=16", "trainer.total_steps=512",
                 "saving.model_params_save_freq=2", basedir=tmp_path)
    full = train(cfg, progress=False)
    # An interrupted copy: it got as far as iteration 3, but its last checkpoint is iteration 2.
    cut = tmp_path / "interrupted"
    shutil.copytree(full, cut)
    (cut / "checkpoints" / "ckpt_000004.pt").unlink()
    (cut / "checkpoints" / "latest").write_text("ckpt_000002.pt")
    rows = (cut / "metrics.csv").read_text().splitlines()
    (cut / "metrics.csv").write_text("\n".join(rows[:4]) + "\n")  # header + iterations 1-3
    resumed = train(cfg, resume=str(cut), progress=False)
    assert resumed == cut
    assert _learning_rows(cut) == _learning_rows(full)
    assert load_checkpoint(cut)["iteration"] == 4


@pytest.mark.parametrize("backend, one_thread", [("cpu", True), ("cpu-gpu", True), ("pycuda", False)])
def test_torch_gets_one_thread_where_the_kernels_use_the_host_cores(monkeypatch, backend, one_thread):
    """``capabilities.shares_host_cores`` decides (both shapes of the cpu executor);
    pycuda is named by class only: no GPU is needed to read its capabilities."""
    monkeypatch.delenv("WARP_DRIVE_TORCH_THREADS", raising=False)
    before = torch.get_num_threads()
    try:
        torch.set_num_threads(2)
        limit_torch_threads(backend)
        assert torch.get_num_threads() == (1 if one_thread else 2)
    finally:
        torch.set_num_threads(before)



def test_team_return_is_the_sum_of_the_agents_episode_returns_per_policy():
    """charts/team_return sums a policy's agents (JaxMARL's MPE convention); charts/episodic_return averages them."""
    trainer = build(config("tag_gridworld", "trainer.num_envs=4", "trainer.rollout_length=100",
                           "trainer.total_steps=400"))
    T, E = trainer.rollout_length, trainer.num_envs
    trainer.collect_rollout()
    metrics = trainer.episode_metrics(reset=False)
    done = (trainer.rollout.done > 0).tolist()
    for tag, p in trainer.policies.items():
        n = len(p.agent_ids)
        team = trainer.rollout.buffers[p.tag]["rewards"].reshape(T, E, n).sum(-1).tolist()
        finished, running = [], [0.0] * E  # every env starts an episode with the rollout (a fresh trainer)
        for t in range(T):
            for e in range(E):
                running[e] += team[t][e]
                if done[t][e]:
                    finished.append(running[e])
                    running[e] = 0.0
        assert metrics[f"charts/episodes/{tag}"] == len(finished) > E  # several episodes end in some envs
        assert metrics[f"charts/team_return/{tag}"] == pytest.approx(sum(finished) / len(finished), rel=1e-5)
        assert metrics[f"charts/episodic_return/{tag}"] == pytest.approx(sum(finished) / len(finished) / n,
                                                                         rel=1e-5)


@pytest.mark.slow  # trains and resumes (over ~1.5 s: the full suite, not the fast tier)
def test_value_normalization_keeps_the_value_loss_on_one_scale_and_resumes_exactly():
    """Pendulum's returns are about -1,000: the critic's loss is O(100) on raw returns, O(1) normalised."""
    def pendulum(*extra):
        return build(config("pendulum", "trainer.num_envs=16", "trainer.rollout_length=64",
                            "trainer.total_steps=4096", *extra))

    raw = [pendulum().iterate() for _ in range(1)][0]["losses/value_loss/shared"]
    trainer = pendulum("policy.shared.value_normalization=true")
    metrics = [trainer.iterate() for _ in range(3)]
    scaled = metrics[0]["losses/value_loss/shared"]
    assert raw > 50 and scaled < 5, (raw, scaled)
    norm = trainer.algorithm.states["shared"].value_norm
    assert float(norm.count) == 3 * 16 * 64 and float(norm.mean) < -10  # the returns seen, in return units
    # A checkpoint after the first iteration continues exactly (the statistics are in it).
    first = pendulum("policy.shared.value_normalization=true")
    first.iterate()
    state = first.state_dict()
    assert "value_norms" in state
    resumed = pendulum("policy.shared.value_normalization=true")
    resumed.load_state_dict(state)
    later = [resumed.iterate() for _ in range(2)]
    for x, y in zip(metrics[1:], later):
        assert x["losses/value_loss/shared"] == y["losses/value_loss/shared"]
    assert torch.equal(resumed.algorithm.states["shared"].value_norm.mean, norm.mean)
