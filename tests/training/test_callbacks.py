"""The training loop's callbacks, ``--callback``, env-drawn GIFs and ``evaluate``'s statistics (cpu executor)."""

from __future__ import annotations

import csv
import re
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from warp_drive.cli import main
from warp_drive.training.runs.callbacks import Callback, render_episode
from warp_drive.training.runs.dirs import RunLock
from warp_drive.training.config import ConfigError, load_config
from warp_drive.training.run import build, evaluate, train

SMALL = ["trainer.backend=cpu", "trainer.num_envs=8", "trainer.rollout_length=16", "trainer.total_steps=384"]


def cartpole(tmp_path, *extra):
    return load_config("cartpole", [*SMALL, f"saving.basedir={tmp_path / 'runs'}", *extra])


class Recorder(Callback):
    """Records every call with what it was given."""

    def __init__(self):
        self.calls = []

    def on_train_start(self, loop):
        self.calls.append(("start", loop.trainer.iteration))

    def on_iteration_end(self, loop, metrics):
        self.calls.append(("iteration", loop.trainer.iteration, "charts/SPS" in metrics))

    def on_log(self, loop, metrics):
        self.calls.append(("log", loop.global_step, dict(metrics)))

    def on_checkpoint(self, loop, state):
        self.calls.append(("checkpoint", state["iteration"]))

    def on_train_end(self, loop):
        self.calls.append(("end", loop.elapsed > 0, (loop.run_dir / "metrics.csv").is_file()))

    def on_exception(self, loop, error):
        self.calls.append(("exception", str(error)))


def test_callbacks_run_in_order_with_the_logged_metrics(tmp_path):
    recorder = Recorder()
    run_dir = train(cartpole(tmp_path, "saving.metrics_log_freq=2", "saving.model_params_save_freq=2"),
                    progress=False, callbacks=[recorder])
    kinds = [c[0] for c in recorder.calls]
    assert kinds == ["start", "iteration", "iteration", "log", "checkpoint", "iteration", "log", "checkpoint", "end"]
    assert [c[1] for c in recorder.calls if c[0] == "checkpoint"] == [2, 3]
    assert recorder.calls[-1] == ("end", True, True)
    with open(run_dir / "metrics.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    logged = [c for c in recorder.calls if c[0] == "log"]
    assert [int(r["global_step"]) for r in rows] == [c[1] for c in logged] == [256, 384]
    for row, (_, _, metrics) in zip(rows, logged):  # the loggers got exactly what the callbacks got
        assert float(row["charts/SPS"]) == metrics["charts/SPS"]
        assert float(row["losses/policy_loss/shared"]) == metrics["losses/policy_loss/shared"]


class FailSecondIteration(Recorder):
    def on_iteration_end(self, loop, metrics):
        super().on_iteration_end(loop, metrics)
        if loop.trainer.iteration == 2:
            raise RuntimeError("stop at iteration 2")


def test_a_failing_callback_stops_the_run_and_every_callback_hears_of_it(tmp_path):
    recorder = FailSecondIteration()
    with pytest.raises(RuntimeError, match="stop at iteration 2"):
        train(cartpole(tmp_path, "saving.metrics_log_freq=1"), progress=False, callbacks=[recorder])
    assert recorder.calls[-1] == ("exception", "stop at iteration 2")
    assert "end" not in [c[0] for c in recorder.calls]
    run_dir = next((tmp_path / "runs").rglob("config.yaml")).parent
    RunLock(run_dir).acquire().release()  # the run's lock was released
    assert len((run_dir / "metrics.csv").read_text().splitlines()) == 2  # header and iteration 1


def test_cli_loads_a_callback_by_import_path(tmp_path, capsys):
    # tests/training/ is on sys.path under pytest (prepend import mode); helpers_dist_callbacks is the distributed tests'.
    code = main(["train", "--config", "cartpole", "--no-progress", "--set", *SMALL,
                 f"saving.basedir={tmp_path / 'runs'}", "--callback", "helpers_dist_callbacks:DumpRankFacts"])
    assert code == 0, capsys.readouterr().err
    run_dir = next((tmp_path / "runs").rglob("config.yaml")).parent
    assert (run_dir / "test_dump" / "rank0.json").is_file()


@pytest.mark.parametrize("spec, message", [
    ("no_colon", "expected module:Class"),
    ("no_such_module_xyz:Thing", "cannot import no_such_module_xyz"),
    ("helpers_dist_callbacks:Missing", "has no Missing"),
    ("helpers_dist_callbacks:model_hashes", "not a callback"),
])
def test_cli_names_a_bad_callback(tmp_path, capsys, spec, message):
    code = main(["train", "--config", "cartpole", "--no-progress", "--set", *SMALL,
                 f"saving.basedir={tmp_path / 'runs'}", "--callback", spec])
    assert code == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "runs").exists()  # refused before a run directory was made


def test_no_env_names_in_the_training_layer():
    """Rendering is the env's own (``render_arrays`` + ``render``), not a branch on env names."""
    training = Path(__file__).parents[2] / "warp_drive" / "training"
    quoted_name = re.compile(r"[\"']Tag(Continuous|GridWorld)[\"']")
    hits = [f"{p.name}:{i + 1}" for p in training.glob("*.py")
            for i, line in enumerate(p.read_text().splitlines()) if quoted_name.search(line)]
    assert hits == []


@pytest.mark.slow
@pytest.mark.parametrize("config", ["cartpole", "pendulum", "mountain_car", "continuous_mountain_car", "acrobot",
                                    "tag_gridworld"])
def test_envs_draw_their_own_episodes(tmp_path, config):
    trainer = build(load_config(config, ["trainer.backend=cpu", "trainer.num_envs=2"]))
    gif = render_episode(trainer, tmp_path / f"{config}.gif")
    image = Image.open(gif)
    assert image.n_frames > 2
    first, later = np.asarray(image.convert("RGB")), None
    image.seek(image.n_frames - 1)
    later = np.asarray(image.convert("RGB"))
    assert first.shape == later.shape and (first != later).any()  # the drawing moved (or at least the clock)


def test_evaluate_reports_the_spread_of_returns_and_the_episode_length(tmp_path, capsys):
    run_dir = train(cartpole(tmp_path), progress=False)
    result = evaluate(str(run_dir), episodes=6, greedy=False)
    stats = result["returns"]["shared"]
    assert stats["min"] <= stats["mean"] <= stats["max"] and stats["std"] >= 0
    assert stats["mean"] == pytest.approx(result["mean_return"]["shared"], rel=1e-6)
    # CartPole pays 1 a step: the return of an episode is its length.
    assert result["mean_length"] == pytest.approx(stats["mean"], rel=1e-6)
    capsys.readouterr()
    assert main(["evaluate", str(run_dir), "--episodes", "6"]) == 0
    out = capsys.readouterr().out
    assert "mean episode length" in out and re.search(r"shared\s+[\d.]+ ± [\d.]+\s+\(min [\d.]+, max [\d.]+\)", out)


def test_evaluate_render_of_an_env_without_a_renderer_is_refused(tmp_path):
    run_dir = train(load_config("dummy_env", ["trainer.backend=cpu", "trainer.num_envs=4",
                                              "trainer.rollout_length=8", "trainer.total_steps=32",
                                              f"saving.basedir={tmp_path / 'runs'}"]), progress=False)
    assert not (run_dir / "episode.gif").exists()  # no renderer: no GIF, no error
    with pytest.raises(ConfigError, match="DummyEnv has no renderer"):
        evaluate(str(run_dir), episodes=2, render=str(tmp_path / "x.gif"))


@pytest.mark.parametrize("evaluate", [True, False])
def test_train_without_evaluation_plays_no_episode_and_draws_nothing(tmp_path, capsys, evaluate):
    """``train(..., evaluate=False)`` (``warp-drive train --no-evaluate``): no before/after
    episodes, no summary, no GIF; checkpoints and metrics as usual."""
    run_dir = train(cartpole(tmp_path), progress=False, evaluate=evaluate)
    printed = capsys.readouterr().out
    assert (run_dir / "episode.gif").is_file() is evaluate
    assert ("Mean return per agent" in printed) is evaluate
    assert (run_dir / "metrics.csv").is_file() and list((run_dir / "checkpoints").glob("*"))


def test_cli_no_evaluate_reaches_train(tmp_path, monkeypatch):
    from warp_drive.cli import main
    from warp_drive.training import run

    seen = {}
    monkeypatch.setattr(run, "train", lambda config, **kwargs: seen.update(kwargs) or tmp_path)
    assert main(["train", "--config", "cartpole", "--backend", "cpu", "--no-evaluate", "--no-progress"]) == 0
    assert seen["evaluate"] is False


def test_the_end_of_a_run_plays_one_episode_for_the_gif_and_the_summary(tmp_path, capsys, monkeypatch):
    """The GIF's episode is the summary's "after training" episode: one set of episodes is played at the end,
    not two (each a full 500-step CartPole episode per env), and the summary prints that episode's returns."""
    from warp_drive.training.loop import OnDeviceTrainer

    played = []
    real = OnDeviceTrainer.run_episodes

    def counted(self, *args, **kwargs):
        played.append(kwargs.get("record", ()))
        result = real(self, *args, **kwargs)
        played[-1] = (played[-1], result["mean_return"]["shared"])
        return result

    monkeypatch.setattr(OnDeviceTrainer, "run_episodes", counted)
    run_dir = train(cartpole(tmp_path), progress=False)
    assert (run_dir / "episode.gif").is_file()
    assert len(played) == 2  # before training, and once at the end (recording the GIF's frames)
    assert played[1][0] != ()
    after = re.search(r"shared\s+yes\s+[\d.]+\s+([\d.]+)", capsys.readouterr().out).group(1)
    assert float(after) == pytest.approx(played[1][1], abs=0.01)
