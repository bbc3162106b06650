"""A user's own env reaches the CLI without packaging (``env.name: package.module:Class``), and the CLI's
refusals of a user's env are one line each (issue 42, items 7 and 9).

The env is written into ``tmp_path`` the way a user writes one beside a run config (a Python class and its
``.cu``, in a folder of their own) and named by its module path; the CLI runs with that folder as its
current directory, as ``warp-drive train --config my.yaml`` does in the folder holding ``my_env/``.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from warp_drive.cli import main
from warp_drive.env.registry import EnvLookupError, get_env_class

PACKAGE = "lantern_env"
CLASS = f"{PACKAGE}.lantern:Lantern"

ENV_PY = '''
import numpy as np
from gymnasium import spaces

from warp_drive import DataFeed, Environment


class Lantern(Environment):
    """Agents step their position towards 0 (one float each); the reward is minus the distance."""

    name = "Lantern"
    cuda_source = "lantern.cu"
    step_kernel = "LanternStep"

    def __init__(self, num_agents=3, episode_length=10, speed=0.5):
        if not speed > 0:
            raise ValueError(f"Lantern: speed must be > 0, got {speed}")
        self.num_agents, self.episode_length, self.speed = int(num_agents), int(episode_length), float(speed)

    def observation_space(self, agent_id):
        return spaces.Box(-np.inf, np.inf, shape=(1,), dtype=np.float32)

    def action_space(self, agent_id):
        return spaces.Discrete(3)

    def get_data_dictionary(self, num_envs):
        position = np.ones((num_envs, self.num_agents), np.float32)
        feed = DataFeed()
        feed.add_data("position", position, save_copy_and_apply_at_reset=True)
        feed.add_data("observations", position[..., None].copy(), save_copy_and_apply_at_reset=True)
        feed.add_data("sampled_actions", np.ones((num_envs, self.num_agents), np.int32))
        feed.add_data("rewards", np.zeros((num_envs, self.num_agents), np.float32))
        feed.add_data("speed", self.speed)
        return feed


class BrokenLantern(Lantern):
    cuda_source = "broken.cu"  # a planted compile error on its line 11


class WideLantern(Lantern):
    def observation_space(self, agent_id):  # wider than the 1 float per agent the array holds
        return spaces.Box(-np.inf, np.inf, shape=(3,), dtype=np.float32)


NOT_AN_ENV = 42
'''

ENV_CU = '''#include <warp_drive/core.h>

extern "C" __global__ void LanternStep(float* position, const int* sampled_actions, float* observations,
                                       float* rewards, int* _done_, int* _timestep_, float speed, int n_agents,
                                       int episode_length) {
  const int env = wd_env_id();
  const int agent = wd_agent_id();
  if (agent < n_agents) {
    const int row = wd_agent_index(n_agents);
    const float p = position[row] + speed * (float)(sampled_actions[row] - 1);
    position[row] = p;
    observations[row] = p;
    rewards[row] = -fabsf(p);
  }
  if (agent == 0) {
    const int t = _timestep_[env] + 1;
    _timestep_[env] = t;
    if (t >= episode_length) _done_[env] = 2;
  }
}
'''
BROKEN_LINE = 11  # the line of ENV_CU that broken.cu breaks (1-based)


def write_env(root: Path) -> Path:
    """``root/lantern_env/`` (the env package) and ``root/cfg.yaml`` (a tiny run config naming it); the config."""
    package = root / PACKAGE
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "lantern.py").write_text(ENV_PY)
    (package / "lantern.cu").write_text(ENV_CU)
    lines = ENV_CU.splitlines()
    assert "position[row] = p;" in lines[BROKEN_LINE - 1]
    lines[BROKEN_LINE - 1] = "    position[row] = p + undeclared_brightness;"
    (package / "broken.cu").write_text("\n".join(lines) + "\n")
    config = {
        "name": "lantern",
        "env": {"name": CLASS, "config": {"num_agents": 3, "episode_length": 10}},
        "trainer": {"num_envs": 4, "rollout_length": 10, "total_steps": 80, "seed": 0, "backend": "cpu"},
        "policy": {"shared": {"algorithm": "PPO", "num_minibatches": 1, "num_epochs": 1,
                              "model": {"type": "fully_connected", "fc_dims": [8], "activation": "tanh"}}},
        "saving": {"basedir": "runs", "tag": "experiment", "model_params_save_freq": 1},
    }
    (root / "cfg.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    return root / "cfg.yaml"


@pytest.fixture
def env_folder(tmp_path, monkeypatch):
    """The env package in ``tmp_path``, the current directory; ``sys.path`` and the imported modules put back
    after (the registry adds the current directory to ``sys.path``; another test's package must not be found)."""
    write_env(tmp_path)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p not in ("", os.getcwd(), str(tmp_path))])
    yield tmp_path
    for name in [m for m in sys.modules if m == PACKAGE or m.startswith(PACKAGE + ".")]:
        del sys.modules[name]


def run_cli(args: list[str], cwd: Path) -> subprocess.CompletedProcess:
    """``warp-drive`` as a user runs it: the console script's own ``sys.path`` (its bin folder first), not
    ``python -m``'s, so the current directory is found by the registry, not by Python."""
    script = Path(sys.executable).with_name("warp-drive")
    command = [str(script)] if script.is_file() else [sys.executable, "-c",
                                                       "import sys; from warp_drive.cli import main; "
                                                       "sys.path.remove('') if '' in sys.path else None; "
                                                       "sys.exit(main())"]
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    return subprocess.run([*command, *args], capture_output=True, text=True, timeout=600, cwd=cwd, env=env)


def one_line(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("warp-drive ") and ": error: " in lines[0], err
    return lines[0]


def files_under(path: Path) -> list[Path]:
    return sorted(path.rglob("*")) if path.exists() else []


# --------------------------------------------------------------------------- item 7: the journey, end to end
@pytest.mark.slow  # child processes: two trainings, three evaluations (~30 s)
def test_a_custom_env_trains_resumes_and_evaluates_from_its_folder_without_packaging(tmp_path):
    write_env(tmp_path)
    trained = run_cli(["train", "--config", "cfg.yaml", "--no-progress"], tmp_path)
    assert trained.returncode == 0, trained.stderr
    run_dir = tmp_path / re.search(r"run directory: (\S+)", trained.stdout).group(1)
    assert yaml.safe_load((run_dir / "config.yaml").read_text())["env"]["name"] == CLASS
    assert sorted(p.name for p in (run_dir / "checkpoints").glob("*.pt"))  # 2 iterations, a checkpoint each
    assert f"Trained {CLASS}" in trained.stdout and "team return after" in trained.stdout

    resumed = run_cli(["train", "--config", "cfg.yaml", "--no-progress", "--resume", "latest",
                       "--set", "trainer.total_steps=120"], tmp_path)
    assert resumed.returncode == 0, resumed.stderr
    assert "3 iterations" in resumed.stdout

    evaluated = run_cli(["evaluate", str(run_dir), "--episodes", "3"], tmp_path)
    assert evaluated.returncode == 0, evaluated.stderr
    assert "3 episodes (greedy actions)" in evaluated.stdout
    assert re.search(r"shared\s+-?[\d.]+ ± [\d.]+\s+\(min -?[\d.]+, max -?[\d.]+\)\s+-?[\d.]+ ± [\d.]+\s+\(3 agents\)",
                     evaluated.stdout), evaluated.stdout

    baseline = run_cli(["evaluate", "--random", "cfg.yaml", "--episodes", "3"], tmp_path)
    assert baseline.returncode == 0, baseline.stderr
    assert "3 episodes (uniformly random legal actions)" in baseline.stdout and "(3 agents)" in baseline.stdout

    elsewhere = run_cli(["evaluate", str(run_dir)], tmp_path.parent)  # not from the env's folder: one line
    assert elsewhere.returncode == 2
    line = one_line(elsewhere.stderr)
    assert f"cannot import module '{PACKAGE}.lantern'" in line and f"folder that holds {PACKAGE}/" in line


# --------------------------------------------------------------------------- item 7: the lookup's messages
def test_a_module_path_imports_the_class_from_the_current_directory(env_folder):
    cls = get_env_class(CLASS)
    assert cls.__name__ == "Lantern" and cls.cuda_source_path() == env_folder / PACKAGE / "lantern.cu"


@pytest.mark.parametrize("name, expected", [
    (f"{PACKAGE}.nowhere:Lantern", rf"cannot import module '{PACKAGE}\.nowhere': package {PACKAGE} \(.*\) has no "
                                   r"module 'nowhere'"),
    ("no_such_pkg.env:Lantern", r"cannot import module 'no_such_pkg\.env' \(no module named 'no_such_pkg' in the "
                                r"current directory .* or on sys\.path\): run from the folder that holds "
                                r"no_such_pkg/, or add that folder to PYTHONPATH"),
    (f"{PACKAGE}.lantern:Lanter", r"module lantern_env\.lantern \(.*lantern\.py\) has no attribute 'Lanter'; its "
                                  r"Environment classes: BrokenLantern, Lantern, WideLantern"),
    (f"{PACKAGE}.lantern:NOT_AN_ENV", r"NOT_AN_ENV is 42, not a subclass of warp_drive\.Environment"),
    (f"{PACKAGE}.lantern:", r"expected package\.module:Class"),
])
def test_a_module_path_that_leads_nowhere_says_why_in_one_line(env_folder, name, expected):
    with pytest.raises(KeyError) as caught:
        get_env_class(name)
    assert isinstance(caught.value, EnvLookupError)
    message = str(caught.value)
    assert "\n" not in message and re.search(expected, message), message


def test_an_unknown_name_lists_the_ways_to_register_one():
    with pytest.raises(EnvLookupError) as caught:
        get_env_class("LBF")
    message = str(caught.value)
    assert message.startswith("no environment named 'LBF'; registered: ") and "DummyEnv" in message
    for way in ("package.module:Class in env.name", "warp_drive.register_env(name, cls)",
                '[project.entry-points."warp_drive.envs"] MyEnv = "my_pkg.my_env:MyEnv"',
                '[tool.setuptools.package-data] my_pkg = ["*.cu"]'):
        assert way in message, way


def test_the_cli_refuses_an_unknown_env_in_one_line_and_a_run_config_accepts_a_module_path(env_folder, capsys):
    basedir = env_folder / "runs"
    assert main(["train", "--config", "cfg.yaml", "--set", "env.name=LBF"]) == 2
    line = one_line(capsys.readouterr().err)
    assert "env.name: no environment named 'LBF'" in line and "warp_drive.envs" in line
    assert main(["train", "--config", "cfg.yaml", "--set", "env.config.speed=-1"]) == 2
    assert "Lantern: speed must be > 0, got -1" in one_line(capsys.readouterr().err)
    assert not basedir.exists()


# --------------------------------------------------------------------------- item 9: one line, no run dir
def test_a_build_error_is_one_line_with_the_compilers_file_and_line_and_leaves_no_run_dir(env_folder, capsys):
    argv = ["train", "--config", "cfg.yaml", "--no-progress", "--set", f"env.name={PACKAGE}.lantern:BrokenLantern"]
    assert main(argv) == 2
    line = one_line(capsys.readouterr().err)
    assert f"broken.cu:{BROKEN_LINE}:" in line and "error:" in line and "undeclared_brightness" in line, line
    assert "command:" not in line
    assert files_under(env_folder / "runs") == []
    from warp_drive.runtime.backends import KernelBuildError

    with pytest.raises(KernelBuildError, match="undeclared_brightness"):  # --debug: the traceback
        main(["--debug", *argv])


def test_a_shape_mismatch_is_one_line_naming_the_array_and_leaves_no_run_dir(env_folder, capsys):
    assert main(["train", "--config", "cfg.yaml", "--no-progress",
                 "--set", f"env.name={PACKAGE}.lantern:WideLantern"]) == 2
    line = one_line(capsys.readouterr().err)
    assert "'observations' has shape (4, 3, 1)" in line and "observation space" in line, line
    assert files_under(env_folder / "runs") == []


def test_a_refused_library_run_leaves_no_run_dir(env_folder):
    """``run.train`` without the CLI's check: the env's constructor refuses inside the build."""
    from warp_drive.training.config import load_config
    from warp_drive.training.run import train

    with pytest.raises(ValueError, match="speed must be > 0"):
        train(load_config("cfg.yaml", ["env.config.speed=-1"]), progress=False)
    assert files_under(env_folder / "runs") == []


@pytest.mark.slow  # a training and two builds of the env's kernel (~3.7 s)
def test_a_resume_refused_at_the_build_keeps_the_run(env_folder, capsys):
    assert main(["train", "--config", "cfg.yaml", "--no-progress", "--no-evaluate"]) == 0
    capsys.readouterr()
    before = files_under(env_folder / "runs")
    assert any(p.suffix == ".pt" for p in before)
    source = env_folder / PACKAGE / "lantern.cu"
    source.write_text((env_folder / PACKAGE / "broken.cu").read_text())  # the kernel broken after the run
    assert main(["train", "--config", "cfg.yaml", "--no-progress", "--resume", "latest",
                 "--set", "trainer.total_steps=120"]) == 2
    assert "lantern.cu:" in one_line(capsys.readouterr().err)
    assert files_under(env_folder / "runs") == before


class FailsAtStart:
    """A callback that refuses the run after its directory exists and before the first iteration."""

    def __getattr__(self, name):
        if name.startswith("on_"):
            return lambda *args: None
        raise AttributeError(name)

    def on_train_start(self, loop):
        raise RuntimeError("refused before the first iteration")


def test_a_run_that_fails_before_its_first_iteration_is_removed_but_nothing_that_existed(tmp_path):
    from warp_drive.training.config import load_config
    from warp_drive.training.run import train

    config = load_config("dummy_env", ["trainer.backend=cpu", "trainer.num_envs=2", "trainer.rollout_length=4",
                                       "trainer.total_steps=8", f"saving.basedir={tmp_path / 'runs'}"])
    with pytest.raises(RuntimeError, match="refused before the first iteration"):
        train(config, progress=False, evaluate=False, callbacks=[FailsAtStart()])
    assert not (tmp_path / "runs").exists()  # the basedir too: this run made it
    other = tmp_path / "runs" / "dummy_env" / "experiment" / "other"
    other.mkdir(parents=True)
    (other / "keep.txt").write_text("a run beside it\n")
    named = other.parent / "mine"
    named.mkdir()  # --run-name of an empty directory that exists: it stays, empty
    with pytest.raises(RuntimeError, match="refused before the first iteration"):
        train(config, progress=False, evaluate=False, callbacks=[FailsAtStart()], run_name="mine")
    assert named.is_dir() and list(named.iterdir()) == []
    assert files_under(tmp_path / "runs") == sorted([other, other / "keep.txt", named, other.parent,
                                                     other.parent.parent])


# --------------------------------------------------------------------------- item 9: team returns
def test_the_summary_and_evaluate_print_the_team_return_beside_the_per_agent_mean(tmp_path, capsys):
    """DummyEnv's 4 agents: the team return is their sum, 4 x the per-agent mean."""
    assert main(["train", "--config", "dummy_env", "--no-progress", "--set", "trainer.backend=cpu",
                 "trainer.num_envs=4", "trainer.rollout_length=8", "trainer.total_steps=32",
                 f"saving.basedir={tmp_path}"]) == 0
    out = capsys.readouterr().out
    assert "team return: the policy's agents' returns summed" in out
    header = next(line for line in out.splitlines() if line.startswith("policy"))
    assert header.split("  ")[-2:] == ["team return before", "team return after"]
    row = next(line for line in out.splitlines() if line.startswith("shared")).split()
    before, after, team_before, team_after = map(float, row[2:6])
    assert team_before == pytest.approx(4 * before, abs=0.03) and team_after == pytest.approx(4 * after, abs=0.03)

    run_dir = re.search(r"run directory: (\S+)", out).group(1)
    assert main(["evaluate", run_dir, "--episodes", "3"]) == 0
    out = capsys.readouterr().out
    assert "team return (agents summed)" in out
    found = re.search(r"shared\s+(-?[\d.]+) ± [\d.]+\s+\(min .*\)\s+(-?[\d.]+) ± [\d.]+\s+\(4 agents\)", out)
    assert found, out
    assert float(found.group(2)) == pytest.approx(4 * float(found.group(1)), abs=0.005)


# --------------------------------------------------------------------------- item 9: evaluate --random
def test_evaluate_random_prints_the_baseline_table_for_a_config(capsys):
    assert main(["evaluate", "--random", "dummy_env", "--episodes", "5", "--backend", "cpu"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("5 episodes (uniformly random legal actions), mean episode length")
    assert re.search(r"shared\s+-?[\d.]+ ± [\d.]+\s+\(min -?[\d.]+, max -?[\d.]+\)\s+-?[\d.]+ ± [\d.]+\s+\(4 agents\)",
                     out), out


@pytest.mark.parametrize("argv", [["evaluate"], ["evaluate", "latest", "--random", "dummy_env"],
                                  ["evaluate", "--random", "dummy_env", "--sample"]])
def test_evaluate_needs_a_run_or_random_not_both(argv, capsys):
    assert main(argv) == 2
    one_line(capsys.readouterr().err)
