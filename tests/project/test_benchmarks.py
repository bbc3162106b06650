"""The benchmark suite's machinery on toy sizes: files written and well formed (no timing asserted)."""

from __future__ import annotations

import csv
import datetime
import sys
from pathlib import Path

import pytest

# benchmarks/ is not an installed package: import it from the checkout (plain `pytest` does not put the
# repository root on sys.path; `python -m pytest` does).
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from benchmarks import common, paper, plots, suite

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def read_csv(path: Path) -> list[dict]:
    with path.open(newline="") as handle:
        return list(csv.DictReader(handle))


@pytest.fixture(scope="module")
def smoke_run(tmp_path_factory):
    """One toy-sized run of the paper suite through ``python -m benchmarks``'s entry point."""
    out = tmp_path_factory.mktemp("results")
    status = suite.main(["--smoke", "--suites", "paper", "--backends", "cpu", "--out", str(out)])
    return status, out


@pytest.mark.slow  # runs the benchmark suite (over ~1.5 s: the full suite, not the fast tier)
def test_suite_writes_csv_plots_and_summary(smoke_run):
    status, out = smoke_run
    assert status == 0
    assert sorted(p.name for p in out.iterdir()) == [
        "paper.csv", "paper_vs_agents.png", "paper_vs_envs.png", "summary.md"]
    for png in ("paper_vs_envs.png", "paper_vs_agents.png"):
        data = (out / png).read_bytes()
        assert data.startswith(PNG_MAGIC) and len(data) > 10_000, png


def test_paper_csv_has_a_row_per_workload_point(smoke_run):
    _, out = smoke_run
    rows = read_csv(out / "paper.csv")
    expected = [(label, str(envs)) for label, _, _, envs, *_ in paper.workloads(quick=False, smoke=True)]
    assert [(row["workload"], row["envs"]) for row in rows] == expected
    assert {"workload", "backend", "envs", "agents", "env steps/s", "agent steps/s", "numpy 1-by-1 steps/s",
            "numpy vectorised steps/s", "paper (A100) env steps/s", "target (GPU) env steps/s",
            "target met"} <= set(rows[0])
    for row in rows:
        assert row["backend"] == "cpu"
        env_rate = float(row["env steps/s"])
        assert env_rate > 0 and float(row["numpy 1-by-1 steps/s"]) > 0
        assert float(row["agent steps/s"]) == pytest.approx(env_rate * int(row["agents"]))
    big = rows[0]
    assert big["workload"].startswith("paper: discrete Tag 2000 envs × 1000 agents (smoke:")
    assert (big["envs"], big["agents"]) == ("2", "20")  # N = taggers + 1 runner
    assert big["paper (A100) env steps/s"] == "2900000" and big["target met"] == "GPU target"
    assert {row["agents"] for row in rows if "continuous" in row["workload"]} == {"5", "10"}
    (rollout,) = [row for row in rows if "rollout with sampling" in row["workload"]]
    assert rollout["paper (A100) env steps/s"] == "8300000" and rollout["target met"] == "GPU target"


def test_the_rollout_row_draws_every_action_with_the_sampler():
    """The paper's 2000 x 5 figure counts sampling: the timed step launches the
    sampler kernel, whose draws land in the wrapper's action array."""
    from benchmarks.envs import rollout_rate
    from warp_drive.env_wrapper import EnvWrapper

    wrapper = EnvWrapper("TagGridWorld", 4, backend="cpu", seed=0, env_config=paper.discrete_tag_config(5))
    wrapper.actions.zero_()
    assert rollout_rate(wrapper, 0.01) > 0
    drawn = wrapper.actions.cpu().numpy()
    assert drawn.min() >= 0 and drawn.max() <= 4 and len(set(drawn.ravel().tolist())) > 1


def test_summary_is_markdown_with_header_tables_and_plots(smoke_run):
    _, out = smoke_run
    text = (out / "summary.md").read_text()
    assert common.machine_description() in text
    assert "**Executors:** cpu" in text
    assert f"`python -m benchmarks --smoke --suites paper --backends cpu --out {out}`" in text
    table = [line for line in text.splitlines() if line.startswith("|")]
    rows = read_csv(out / "paper.csv")
    assert len(table) == 2 + len(rows)  # header, rule, one line per CSV row
    assert all(line.count("|") == table[0].count("|") for line in table)
    assert "![paper_vs_envs](paper_vs_envs.png)" in text and "![paper_vs_agents](paper_vs_agents.png)" in text


def test_sweeps_group_by_workload_and_executor():
    rows = [
        {"workload": "w", "backend": "cpu", "envs": 10, "agents": 5, "env steps/s": 2.0},
        {"workload": "w", "backend": "cpu", "envs": 1, "agents": 5, "env steps/s": 1.0},
        {"workload": "w", "backend": "pycuda", "envs": 1, "agents": 5, "env steps/s": 3.0},  # one point: no line
        {"workload": "a", "backend": "cpu", "envs": 1, "agents": 50, "env steps/s": "n/a"},  # not a number
        {"workload": "b", "backend": "cpu", "envs": 1, "agents": 8, "env steps/s": 4.0},
        {"workload": "b", "backend": "cpu", "envs": 1, "agents": 16, "env steps/s": 5.0},
        {"workload": "c", "backend": "cpu", "envs": 1, "agents": 8, "env steps/s": 4.0},
        {"workload": "c", "backend": "cpu", "envs": 2, "agents": 16, "env steps/s": 5.0},  # both counts vary
    ]
    found = {(s.workload, s.backend): s for s in plots.find_sweeps(rows)}
    assert set(found) == {("w", "cpu"), ("b", "cpu")}
    assert found["w", "cpu"].axis == "envs" and found["w", "cpu"].series("env steps/s") == ([1, 10], [1.0, 2.0])
    assert found["b", "cpu"].axis == "agents"


def test_missing_suite_is_skipped_with_a_note(tmp_path):
    args = suite.parse_args(["--suites", "paper", "--out", str(tmp_path)])
    absent = suite.Suite("absent", "benchmarks.no_such_suite", "a suite not written yet", backends_flag=None)
    outcome = suite.run_suite(absent, args, tmp_path, "machine")
    assert not outcome.ran and "benchmarks/no_such_suite.py is not there" in outcome.note
    assert list(tmp_path.iterdir()) == []
    text = suite.summary_markdown([outcome], args, "python -m benchmarks", "machine",
                                  datetime.datetime(2026, 1, 1), 0.0)
    assert "*skipped: benchmarks/no_such_suite.py is not there*" in text


def test_executors_reach_each_suite_as_its_command_line_names_them():
    args = suite.parse_args(["--quick", "--backends", "cpu"])
    by_name = suite.SUITES_BY_NAME
    assert suite.suite_argvs(by_name["paper"], args) == [["--quick", "--backends", "cpu"]]
    assert suite.suite_argvs(by_name["lightning"], args) == [["--quick", "--backend", "cpu"]]
    assert suite.suite_argvs(by_name["scaling"], args) == [["--quick", "--backends", "cpu"]]
    own_choice = suite.Suite("own", "benchmarks.own", "picks its own executor", None)
    assert suite.suite_argvs(own_choice, args) == [["--quick"]]
    assert suite.suite_argvs(by_name["paper"], suite.parse_args([])) == [[]]  # each suite's own default


@pytest.mark.parametrize("argv, message", [
    (["--suites", "paper,nope"], "unknown 'nope'"),
    (["--smoke", "--suites", "envs"], "--smoke (toy sizes) works with --suites paper,ddpg only"),
    (["--backends", "gpu"], "executors are 'cpu' and 'pycuda'"),
])
def test_bad_arguments_name_the_fix(argv, message, capsys):
    with pytest.raises(SystemExit) as exit_info:
        suite.parse_args(argv)
    assert message in capsys.readouterr().err + str(exit_info.value.code)


def test_csv_of_rows_with_different_columns(tmp_path):
    with common.results_dir_set_to(tmp_path):
        path = common.write_csv("mixed", [{"a": 1, "b": 2.5}, {"a": 3, "c": "x"}])
    assert path == tmp_path / "mixed.csv"
    assert read_csv(path) == [{"a": "1", "b": "2.5", "c": ""}, {"a": "3", "b": "", "c": "x"}]
    assert common.results_dir() == common.RESULTS_DIR  # restored after the block


def test_ddpg_curve_smoke(tmp_path):
    """``benchmarks.ddpg`` on toy sizes: a point before training and at each interval, a CSV row each, a PNG."""
    from benchmarks import ddpg

    rows = ddpg.main(["--smoke", "--backends", "cpu", "--out", str(tmp_path)])
    assert [row["env steps"] for row in rows] == [0, 256, 512]
    assert all(-2000 < row["greedy return"] < 0 for row in rows)
    assert [int(r["env steps"]) for r in read_csv(tmp_path / "ddpg.csv")] == [0, 256, 512]
    assert (tmp_path / "ddpg_pendulum.png").read_bytes().startswith(PNG_MAGIC)


def test_training_workloads_are_valid_configs_at_every_env_count():
    """Every (config, env count) ``benchmarks.training`` runs, the GPU's too, is a
    config ``load_config`` accepts, with total_steps for the timed iterations.
    (The GPU's 16,384 CartPole envs first failed on the device: the shipped
    total_steps was less than one iteration there.)"""
    from benchmarks import training

    for _label, name, cpu_envs, gpu_envs, _target, extra in training.WORKLOADS:
        for num_envs in (*cpu_envs, *gpu_envs):
            cfg = training.workload_config(name, num_envs, "cpu", 3, extra)
            assert cfg.trainer.num_envs == num_envs
            assert cfg.trainer.total_steps == num_envs * cfg.trainer.rollout_length * 4


def test_optimizer_ab_times_both_optimizers_on_the_same_config():
    from benchmarks import optimizer_ab

    rows = optimizer_ab.main(["--config", "cartpole", "--envs", "8", "--rounds", "1", "--iterations", "1",
                              "--backend", "cpu"])
    assert [row["optimizer"] for row in rows] == ["warp_drive Adam", "torch.optim.Adam (foreach)"]
    assert all(row["env steps/s (median)"] > 0 for row in rows)


def test_learning_benchmark_skips_a_missing_peer_saying_how_to_install_it(tmp_path, capsys):
    from benchmarks import learning

    rows = learning.main(["--seeds", "1", "--only", "sb3", "--sb3-python", str(tmp_path / "no-python"),
                          "--out", str(tmp_path)])
    assert rows == []
    assert "SB3 skipped" in capsys.readouterr().out and "pip install" in learning.__doc__


def test_learning_benchmark_medians_count_only_solved_runs():
    from benchmarks.learning import summary_row

    runs = [{"solved": True, "env steps": 100, "seconds from launch": 4.0, "greedy": 500.0, "command seconds": 6.0},
            {"solved": False, "env steps": 999, "seconds from launch": None, "greedy": 100.0, "command seconds": 9.0},
            {"solved": True, "env steps": 300, "seconds from launch": 8.0, "greedy": 480.0, "command seconds": 7.0}]
    row = summary_row("x", runs)
    assert row["solved"] == "2/3" and row["median env steps to solved"] == 200
    assert row["median seconds from launch to solved"] == 6.0 and row["median command seconds"] == 7.0


def test_learning_benchmark_skips_cleanrl_without_its_venv_or_script(tmp_path, capsys):
    from benchmarks import learning

    rows = learning.main(["--seeds", "1", "--only", "cleanrl", "--cleanrl-python", str(tmp_path / "no-python"),
                          "--cleanrl-ppo", str(tmp_path / "ppo.py"), "--out", str(tmp_path)])
    out = capsys.readouterr().out
    assert rows == [] and "CleanRL skipped" in out and "git clone https://github.com/vwxyzjn/cleanrl" in out
