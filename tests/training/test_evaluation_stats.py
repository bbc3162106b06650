"""IQM, its bootstrap interval over runs, marl-eval's JSON, and `warp-drive evaluate RUN RUN --json`."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest
import yaml

from warp_drive.cli import main
from warp_drive.training.evaluation import bootstrap_ci, iqm, marl_eval_json, summarize


def test_iqm_is_the_mean_of_the_middle_half():
    assert iqm([1, 2, 3, 4, 5, 6, 7, 100]) == pytest.approx(np.mean([3, 4, 5, 6]))  # 2 dropped from each end
    assert iqm([5.0]) == 5.0 and iqm([1, 2, 3]) == 2.0  # n < 4: nothing dropped


def test_iqm_matches_scipys_trimmed_mean():
    scipy_stats = pytest.importorskip("scipy.stats")
    x = np.random.default_rng(0).normal(size=101)
    assert iqm(x) == pytest.approx(scipy_stats.trim_mean(x, 0.25))


def test_the_interval_resamples_runs_and_narrows_with_agreeing_runs():
    rng = np.random.default_rng(1)
    spread = [rng.normal(loc, 1.0, size=100) for loc in (-80, -70, -60, -50, -40)]
    agree = [rng.normal(-60, 1.0, size=100) for _ in range(5)]
    lo, hi = bootstrap_ci(spread)
    lo2, hi2 = bootstrap_ci(agree)
    assert lo < iqm(np.concatenate(spread)) < hi and (hi - lo) > 5 * (hi2 - lo2)
    assert bootstrap_ci([[1.0, 2.0, 3.0]]) == (2.0, 2.0)  # one run: nothing to resample
    s = summarize({"a": [1, 2], "b": [3, 4]})
    assert s["runs"] == 2 and s["episodes"] == 4 and s["mean"] == 2.5


def test_marl_eval_json_layout():
    data = marl_eval_json("SimpleSpread", "simple_spread_mappo/shared", "PPO-state", {"run_0": [-60.0, -58.5]},
                          step_count=3_000_000)
    run = data["SimpleSpread"]["simple_spread_mappo/shared"]["PPO-state"]["run_0"]
    assert run["step_0"] == {"step_count": 3_000_000, "return": [-60.0, -58.5]}
    assert run["absolute_metrics"] == {"return": [-60.0, -58.5]}
    with pytest.raises(ValueError, match="non-finite"):
        marl_eval_json("E", "t", "a", {"run_0": [float("nan")]}, step_count=0)


def test_evaluate_several_runs_prints_the_iqm_and_writes_marl_eval_json(finished_cartpole_run, tmp_path, capsys):
    second = tmp_path / "second_seed"
    shutil.copytree(finished_cartpole_run, second)
    out = tmp_path / "eval.json"
    assert main(["evaluate", str(finished_cartpole_run), str(second), "--episodes", "4", "--json", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "2 run(s) x 4 episodes (greedy actions)" in printed and "shared:" in printed and "[" in printed
    data = json.loads(out.read_text())
    config = yaml.safe_load((finished_cartpole_run / "config.yaml").read_text())
    settings = ",".join(f"{k}={v}" for k, v in sorted(config["env"]["config"].items()))
    task = f"shared[{settings}]" if settings else "shared"  # the policy and the env's settings; the config: algorithm
    runs = data["CartPole"][task][config["name"]]
    assert sorted(runs) == ["run_0", "run_1"] and len(runs["run_0"]["absolute_metrics"]["return"]) == 4
    assert runs["run_0"] == runs["run_1"]  # the same checkpoint, greedy: the same episodes
