"""trainer.stop_at_return: a run ends once every trained policy's recent training return reaches the target,
logging and saving as at its last iteration; without it (or below it) the run uses its whole budget."""

from __future__ import annotations

import csv

import pytest

from warp_drive.training.runs.checkpoint import load_checkpoint
from warp_drive.training.config import ConfigError, load_config
from warp_drive.training.run import train

SMALL = ["trainer.backend=cpu", "trainer.num_envs=16", "trainer.rollout_length=32", "trainer.total_steps=16384",
         "saving.metrics_log_freq=4", "saving.model_params_save_freq=100"]


def _run(tmp_path, *overrides):
    config = load_config("cartpole", [*SMALL, f"saving.basedir={tmp_path}", *overrides])
    run_dir = train(config, progress=False, evaluate=False)
    with (run_dir / "metrics.csv").open(newline="") as handle:
        rows = list(csv.DictReader(handle))
    return config, run_dir, rows


def test_a_reached_target_ends_the_run_early_and_saves_it(tmp_path, capsys):
    # An untrained CartPole policy's episodes last ~20 steps: a target of 5 is met as soon as 20 have ended.
    config, run_dir, rows = _run(tmp_path, "trainer.stop_at_return=5")
    iterations = config.trainer.num_iterations
    state = load_checkpoint(run_dir)
    stopped_at = state["iteration"]
    assert 1 <= stopped_at < iterations
    assert int(float(rows[-1]["global_step"])) == state["env_steps"] == stopped_at * 16 * 32  # logged, then saved
    assert "stopping early: after" in capsys.readouterr().out


@pytest.mark.slow  # trains (over ~1.5 s: the full suite, not the fast tier)
def test_an_unreached_target_trains_for_the_whole_budget(tmp_path):
    config, run_dir, rows = _run(tmp_path, "trainer.stop_at_return=1000")
    assert load_checkpoint(run_dir)["iteration"] == config.trainer.num_iterations


def test_the_target_needs_twenty_episodes_first(tmp_path):
    # Episodes of a 500-step limit cannot end 20 times within 2 iterations of 4 envs x 32 steps unless
    # they fail fast; with a huge batch size and a short budget the rule must not fire on fewer episodes.
    config, run_dir, rows = _run(tmp_path, "trainer.num_envs=2", "trainer.rollout_length=8", "trainer.total_steps=32",
                                 "trainer.stop_at_return=-1000")
    episodes = sum(float(r.get("charts/episodes/shared") or 0) for r in rows)
    assert episodes < 20 and load_checkpoint(run_dir)["iteration"] == config.trainer.num_iterations


def test_stop_at_return_must_be_a_number():
    with pytest.raises(ConfigError, match="stop_at_return"):
        load_config("cartpole", ["trainer.stop_at_return=soon"])


def test_a_lightning_fit_with_warp_drive_callbacks_stops_there_too(tmp_path):
    lightning = pytest.importorskip("lightning")
    from warp_drive.training.lightning import RolloutDataModule, WarpDriveCallbacks, WarpDriveModule

    config = load_config("cartpole", [*SMALL, f"saving.basedir={tmp_path}", "trainer.stop_at_return=5"])
    module = WarpDriveModule(config)
    trainer = lightning.Trainer(accelerator="cpu", devices=1, max_epochs=1, logger=False, enable_checkpointing=False,
                                enable_progress_bar=False, enable_model_summary=False,
                                callbacks=[WarpDriveCallbacks(run_dir=tmp_path / "run")])
    trainer.fit(module, datamodule=RolloutDataModule(module))
    assert 1 <= module.warp_trainer.iteration < config.trainer.num_iterations
    assert load_checkpoint(tmp_path / "run")["iteration"] == module.warp_trainer.iteration


@pytest.mark.slow  # trains (over ~1.5 s: the full suite, not the fast tier)
def test_a_greedy_evaluation_that_agrees_stops_the_run_where_the_training_episodes_do(tmp_path, capsys):
    # An untrained CartPole policy acts better greedily (~57 steps) than sampled (~22): both reach 40 together.
    _, _, plain = _run(tmp_path / "plain", "trainer.stop_at_return=40", "saving.metrics_log_freq=1")
    _, _, checked = _run(tmp_path / "checked", "trainer.stop_at_return=40", "saving.metrics_log_freq=1",
                         "trainer.stop_eval_episodes=50")
    assert "and a greedy evaluation of 50 episodes too" in capsys.readouterr().out
    assert [row["global_step"] for row in checked] == [row["global_step"] for row in plain]


@pytest.mark.slow  # trains (over ~1.5 s: the full suite, not the fast tier)
def test_a_greedy_evaluation_that_disagrees_holds_the_stop_back_and_leaves_the_training_alone(tmp_path, capsys):
    """A DummyEnv policy that does not learn (lr 1e-12) scores about -27 sampled, -38 greedy: the training episodes
    reach -30 at once, the evaluation never does. The run trains its whole budget, evaluating again only
    after 20 new training episodes, and its iterations are the run without the check's, metric for metric
    (the evaluation plays on envs of its own, with random streams of its own)."""
    def dummy(path, *extra):
        config = load_config("dummy_env", ["trainer.backend=cpu", "trainer.num_envs=16", "trainer.total_steps=6400",
                                           "policy.shared.lr=1e-12", "saving.metrics_log_freq=1",
                                           "saving.model_params_save_freq=100", f"saving.basedir={path}", *extra])
        with (train(config, progress=False, evaluate=False) / "metrics.csv").open(newline="") as handle:
            return config, list(csv.DictReader(handle))

    _, plain = dummy(tmp_path / "plain")  # no target: the whole budget
    config, checked = dummy(tmp_path / "checked", "trainer.stop_at_return=-30", "trainer.stop_eval_episodes=50")
    out = capsys.readouterr().out
    held = out.count("a greedy evaluation of 50 episodes gave shared")
    assert "stopping early" not in out and len(checked) == len(plain) == config.trainer.num_iterations
    assert 2 <= held <= config.trainer.num_iterations // 2  # not every iteration: 20 new episodes each time
    keys = ["global_step", "charts/episodic_return/shared", "losses/policy_loss/shared", "losses/entropy/shared"]
    assert [[row[k] for k in keys] for row in checked] == [[row[k] for k in keys] for row in plain]


def test_stop_eval_episodes_needs_a_target():
    with pytest.raises(ConfigError, match="stop_eval_episodes: an evaluation before stopping needs a target"):
        load_config("cartpole", ["trainer.stop_at_return=null", "trainer.stop_eval_episodes=10"])
    with pytest.raises(ConfigError, match="stop_eval_episodes"):
        load_config("cartpole", ["trainer.stop_eval_episodes=0"])
