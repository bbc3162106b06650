"""The ``warp-drive`` command line, with the training entry points replaced by recording fakes.

``train`` and ``evaluate`` import ``warp_drive.training.run`` lazily; the
``fake_run`` fixture installs a stand-in module there, so these tests neither
import torch nor compile anything.
"""

from __future__ import annotations

import subprocess
import sys
import types
from pathlib import Path

import pytest

import warp_drive.training
from warp_drive.cli import main
from warp_drive.env.registry import registered_envs
from warp_drive.training.config import RunConfig, available_configs, load_config


@pytest.fixture
def fake_run(monkeypatch, tmp_path):
    """A stand-in for warp_drive.training.run that records its calls."""
    module = types.ModuleType("warp_drive.training.run")
    module.calls = []

    def train(config, resume=None, progress=True):
        module.calls.append(("train", config, resume, progress))
        return tmp_path / "runs" / config.saving.name / config.saving.tag / "20250101-000000"

    def evaluate(run_dir, episodes=10, render=None, greedy=True, backend=None):
        module.calls.append(("evaluate", run_dir, episodes, render, greedy, backend))
        return {"episodes": episodes, "mean_return": {"tagger": 12.5, "runner": -3.25}, "gif": render}

    module.train, module.evaluate = train, evaluate
    monkeypatch.setitem(sys.modules, "warp_drive.training.run", module)
    monkeypatch.setattr(warp_drive.training, "run", module, raising=False)
    return module


def test_configs_lists_every_shipped_config(capsys):
    assert main(["configs"]) == 0
    out = capsys.readouterr().out
    for name in available_configs():
        assert name in out
    assert "tag_continuous_small" in out and "TagContinuous" in out and "tagger:PPO" in out


def test_envs_lists_registered_envs(capsys):
    assert main(["envs"]) == 0
    assert capsys.readouterr().out.split() == registered_envs()


def test_train_calls_run_train_with_the_validated_config(fake_run, capsys):
    code = main(["train", "--config", "cartpole", "--set", "trainer.num_envs=16", "policy.shared.lr=1e-3",
                 "--set", "trainer.total_steps=4096", "--backend", "cpu", "--no-progress"])
    assert code == 0
    (kind, config, resume, progress), = fake_run.calls
    assert kind == "train" and isinstance(config, RunConfig)
    assert (config.trainer.num_envs, config.trainer.total_steps, config.trainer.backend) == (16, 4096, "cpu")
    assert config.policy["shared"].lr == 1e-3
    assert resume is None and progress is False
    assert "run directory:" in capsys.readouterr().out


def test_train_passes_resume_and_progress(fake_run, tmp_path):
    run_dir = tmp_path / "runs" / "dummy_env" / "experiment" / "20250101-000000"
    run_dir.mkdir(parents=True)
    saved = load_config("dummy_env", [f"saving.basedir={tmp_path / 'runs'}", "trainer.seed=3"])
    (run_dir / "config.yaml").write_text(saved.to_yaml())
    assert main(["train", "-c", "dummy_env", "--resume", "latest", "--set", f"saving.basedir={tmp_path / 'runs'}"]) == 0
    (_, config, resume, progress), = fake_run.calls
    # The run's own config (seed 3), and the run resolved to its path.
    assert resume == str(run_dir.resolve()) and progress is True and config.trainer.seed == 3


def test_backend_flag_wins_over_set(fake_run):
    assert main(["train", "-c", "dummy_env", "--set", "trainer.backend=pycuda", "--backend", "cpu"]) == 0
    assert fake_run.calls[0][1].trainer.backend == "cpu"


def test_train_accepts_a_yaml_path(fake_run, tmp_path):
    path = tmp_path / "mine.yaml"
    path.write_text("env: {name: DummyEnv, config: {num_agents: 2}}\n"
                    "trainer: {num_envs: 2, rollout_length: 4, total_steps: 64}\n"
                    "policy: {shared: {algorithm: A2C}}\n")
    assert main(["train", "--config", str(path)]) == 0
    config = fake_run.calls[0][1]
    assert config.name == "mine" and config.policy["shared"].num_epochs == 1


@pytest.mark.parametrize(
    "argv, expected",
    [
        (["--set", "trainer.num_envz=3"], "trainer.num_envz"),
        (["--set", "policy.shared.gamma=2"], "policy.shared.gamma"),
        (["--set", "policy.shared.algorithm=DQN"], "policy.shared.algorithm"),
        (["--set", "trainer.total_steps=10"], "trainer.total_steps"),
        (["--set", "env.name=CartPol"], "did you mean 'CartPole'"),
        (["--set", "env.config.episode_lenght=3"], "episode_lenght"),
        (["--set", "oops"], "KEY=VALUE"),
    ],
)
def test_train_config_errors_exit_2_without_traceback(fake_run, capsys, argv, expected):
    assert main(["train", "--config", "cartpole", *argv]) == 2
    err = capsys.readouterr().err
    assert expected in err and "Traceback" not in err
    assert fake_run.calls == []


def test_train_unknown_config_name(fake_run, capsys):
    assert main(["train", "--config", "tag_continous"]) == 2
    assert "did you mean 'tag_continuous'" in capsys.readouterr().err


def test_train_bad_backend_is_a_usage_error(fake_run, capsys):
    assert main(["train", "--config", "cartpole", "--backend", "cuda"]) == 2
    assert "invalid choice" in capsys.readouterr().err


def test_config_errors_raised_by_train_also_exit_2(monkeypatch, fake_run, capsys):
    from warp_drive.training.config import ConfigError

    def train(config, resume=None, progress=True):
        raise ConfigError("policy: tags do not match")

    monkeypatch.setattr(fake_run, "train", train)
    assert main(["train", "-c", "dummy_env"]) == 2
    assert "policy: tags do not match" in capsys.readouterr().err


def test_evaluate_calls_run_evaluate_and_prints_returns(fake_run, capsys):
    assert main(["evaluate", "runs/x/experiment/1", "--episodes", "7", "--render", "out.gif", "--sample"]) == 0
    assert fake_run.calls == [("evaluate", "runs/x/experiment/1", 7, "out.gif", False, None)]
    out = capsys.readouterr().out
    assert "7 episodes (sampled actions)" in out
    assert "tagger" in out and "12.500" in out and "-3.250" in out and "out.gif" in out


def test_evaluate_defaults(fake_run, capsys):
    assert main(["evaluate", "latest", "--backend", "cpu"]) == 0
    assert fake_run.calls == [("evaluate", "latest", 10, None, True, "cpu")]
    assert "greedy" in capsys.readouterr().out


def test_evaluate_missing_run_dir_exits_2(monkeypatch, fake_run, capsys):
    def evaluate(*args, **kwargs):
        raise FileNotFoundError("runs/nope has no config.yaml")

    monkeypatch.setattr(fake_run, "evaluate", evaluate)
    assert main(["evaluate", "runs/nope"]) == 2
    assert "runs/nope has no config.yaml" in capsys.readouterr().err


@pytest.mark.parametrize("episodes", ["0", "-1", "many"])
def test_evaluate_rejects_bad_episode_counts(fake_run, capsys, episodes):
    assert main(["evaluate", "runs/x", "--episodes", episodes]) == 2
    assert "positive integer" in capsys.readouterr().err


@pytest.mark.parametrize("command", [[], ["train"], ["evaluate"], ["configs"], ["envs"]])
def test_help_for_every_command(capsys, command):
    assert main([*command, "--help"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("usage: warp-drive")
    if command in (["train"], ["evaluate"]):
        assert "examples:" in out


def test_no_command_is_a_usage_error(capsys):
    assert main([]) == 2
    assert "COMMAND" in capsys.readouterr().err


@pytest.mark.slow
def test_python_dash_m_warp_drive():
    root = Path(__file__).resolve().parents[2]
    result = subprocess.run([sys.executable, "-m", "warp_drive", "configs"], cwd=root, capture_output=True,
                            text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert "cartpole" in result.stdout


@pytest.mark.slow  # a child process each (over ~1.5 s on the 2-core VM)
@pytest.mark.parametrize("command", [["--help"], ["configs"], ["envs"], ["train", "--config", "no_such_config"]])
def test_commands_that_do_not_train_never_import_torch(command):
    """--help, configs, envs and a config mistake answer without the executors (and torch's ~2 s import)."""
    script = ("import sys\nfrom warp_drive.cli import main\ntry:\n    main(%r)\nexcept SystemExit:\n    pass\n"
              "print('torch' in sys.modules)" % (command,))
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert out.stdout.strip().splitlines()[-1] == "False", out.stdout + out.stderr


def test_run_failures_are_one_line_with_the_fix_and_debug_shows_the_traceback(tmp_path, capsys):
    """A NaN in an update and a file where the run directory must go: one line each, status 1, no traceback
    (they used to escape main() as a NonFiniteError's 39 lines and a NotADirectoryError)."""
    diverging = ["train", "--config", "dummy_env", "--no-progress", "--no-evaluate", "--set", "trainer.backend=cpu",
                 "trainer.num_envs=8", "trainer.rollout_length=16", "trainer.total_steps=384",
                 "policy.shared.vf_coef=1e38", "policy.shared.max_grad_norm=null", f"saving.basedir={tmp_path / 'a'}"]
    assert main(diverging) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("warp-drive train: error: ") and "vf_coef" in err[0]

    (tmp_path / "file").write_text("not a directory\n")
    blocked = ["train", "--config", "dummy_env", "--no-progress", "--set", "trainer.backend=cpu",
               f"saving.basedir={tmp_path / 'file' / 'runs'}"]
    assert main(blocked) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "Not a directory" in err[0] and "choose another saving.basedir" in err[0], err

    with pytest.raises(NotADirectoryError):
        main(["--debug", *blocked])


# --------------------------------------------------------------------------- unparsable environment variables
TINY_RUN = ["train", "--config", "dummy_env", "--no-progress", "--no-evaluate", "--backend", "cpu", "--set",
            "trainer.num_envs=8", "trainer.rollout_length=8", "trainer.total_steps=64"]


def run_cli(args: list[str], env: dict[str, str] | None = None, cwd: Path | None = None):
    import os

    return subprocess.run([sys.executable, "-m", "warp_drive", *args], capture_output=True, text=True, timeout=300,
                          env={**os.environ, **(env or {})}, cwd=cwd)


@pytest.mark.slow  # a child process each (over ~1.5 s on the 2-core VM)
@pytest.mark.parametrize("name, value", [
    ("WARP_DRIVE_CPU_THREADS", "abc"),           # was ignored (one worker per core), rc 0
    ("WARP_DRIVE_CPU_STACK_KB", "x"),            # was a 16 KiB stack (atol gave 0, clamped), rc 0
    ("WARP_DRIVE_TORCH_UPDATE_THREADS", "-3"),   # was ignored, rc 0
    ("WARP_DRIVE_TORCH_UPDATE_THREADS", "abc"),  # int()'s ValueError after the first rollout, 38 lines
    ("WARP_DRIVE_TORCH_THREADS", "0"),           # torch's RuntimeError, 28 lines
    ("WARP_DRIVE_CPU_SHUFFLE", "fast"),          # ValueError traceback
    ("WARP_DRIVE_CPU_MODE", "fast"),             # ValueError traceback
    ("WARP_DRIVE_NVCC_DEBUG", "maybe"),          # read as off, rc 0
    ("WARP_DRIVE_BACKEND", "gpu"),               # ignored, rc 0
    ("WARP_DRIVE_DIST_TIMEOUT", "abc"),          # ignored outside torchrun, float()'s traceback inside
])
def test_an_unparsable_environment_variable_is_one_line_naming_it(tmp_path, name, value):
    result = run_cli([*TINY_RUN, f"saving.basedir={tmp_path}"], env={name: value})
    err = result.stderr.strip().splitlines()
    assert result.returncode != 0 and len(err) == 1, result.stderr
    assert f"{name}={value!r}" in err[0] and "set it to" in err[0], err


def test_the_variables_choices_are_the_executors():
    from warp_drive.runtime import env_vars
    from warp_drive.runtime.backend_names import BACKEND_NAMES
    from warp_drive.runtime.backends.cpu import MODES

    assert env_vars.CPU_MODES == tuple(MODES) and env_vars.BACKENDS == BACKEND_NAMES


def test_a_file_where_the_build_cache_goes_is_one_line_naming_warp_drive_cache(tmp_path):
    """A file under WARP_DRIVE_CACHE's path: the line blamed saving.basedir (NotADirectoryError's fix)."""
    (tmp_path / "afile").write_text("")
    result = run_cli([*TINY_RUN, f"saving.basedir={tmp_path / 'runs'}"],
                     env={"WARP_DRIVE_CACHE": str(tmp_path / "afile" / "cache")})
    err = result.stderr.strip().splitlines()
    assert result.returncode != 0 and len(err) == 1, result.stderr
    assert "WARP_DRIVE_CACHE" in err[0] and "is a file" in err[0] and "saving.basedir" not in err[0], err


@pytest.mark.parametrize("content, where", [(b"name: dummy_env\nenv: [unclosed\n", "line 3, column 1: not valid YAML"),
                                            (b"name: dummy_env\n# caf\xe9\n", "line 2: not UTF-8 text")])
@pytest.mark.parametrize("command", ["resume", "evaluate"])
@pytest.mark.slow  # a child process per case (over ~1.5 s: the full suite, not the fast tier)
def test_a_damaged_run_config_yaml_is_one_line_naming_the_file_and_line(tmp_path, content, where, command):
    """A run directory's config.yaml that is not YAML or not UTF-8 (damaged, or received from elsewhere):
    yaml's ParserError and a UnicodeDecodeError reached the user as tracebacks."""
    run_dir = tmp_path / "runs" / "dummy_env" / "experiment" / "20250101-000000"
    run_dir.mkdir(parents=True)
    (run_dir / "config.yaml").write_bytes(content)
    args = (["train", "--config", "dummy_env", "--no-progress", "--resume", str(run_dir), "--set",
             f"saving.basedir={tmp_path / 'runs'}"] if command == "resume" else ["evaluate", str(run_dir)])
    result = run_cli(args)
    err = result.stderr.strip().splitlines()
    assert result.returncode != 0 and len(err) == 1, result.stderr
    assert f"{run_dir / 'config.yaml'}: {where}" in err[0] and "repair it" in err[0], err
