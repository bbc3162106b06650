"""Run directories: what --resume accepts, 'latest' per config, one process per run, paths inside basedir,
config limits and ranges, the summary of a finished run, and signals through the --nproc launcher.

Real runs on the cpu executor (tiny cartpole); real subprocesses and signals for the launcher.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from warp_drive.cli import main
from warp_drive.training.runs.checkpoint import load_checkpoint
from warp_drive.training.config import ConfigError, load_config
from warp_drive.training.run import train

TINY = ["trainer.backend=cpu", "trainer.num_envs=8", "trainer.rollout_length=16"]


@pytest.fixture(scope="module")
def finished_run(finished_cartpole_run):
    """A real, finished 2-iteration cartpole run (the session's, conftest.py)."""
    return finished_cartpole_run


@pytest.fixture
def run_copy(finished_run, tmp_path):
    copy = tmp_path / "runs" / "cartpole" / "experiment" / "20250101-000000"
    shutil.copytree(finished_run, copy)
    return copy


def resume(run, *argv):
    basedir = run.parents[2]
    return main(["train", "--config", "cartpole", "--resume", str(run), "--no-progress",
                 "--set", f"saving.basedir={basedir}", *argv])


# --------------------------------------------------------------------------- --resume and its flags
def test_resume_refuses_a_different_config_naming_both(run_copy, capsys):
    assert main(["train", "--config", "pendulum", "--resume", str(run_copy), "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert "'pendulum'" in err and "'cartpole'" in err and str(run_copy) in err


def test_resume_refuses_a_different_backend_naming_both(run_copy, capsys):
    assert resume(run_copy, "--backend", "pycuda") == 2
    err = capsys.readouterr().err
    assert "--backend pycuda" in err and "'cpu'" in err


def test_resume_refuses_set_of_a_key_that_cannot_change(run_copy, capsys):
    assert resume(run_copy, "--set", "policy.shared.lr=1e-2") == 2
    err = capsys.readouterr().err
    assert "policy.shared.lr cannot change when resuming" in err and "trainer.total_steps" in err


def test_resume_with_a_larger_total_steps_extends_a_finished_run(run_copy, capsys):
    assert resume(run_copy, "--set", "trainer.total_steps=512") == 0
    assert load_checkpoint(run_copy)["iteration"] == 4
    assert "512 env steps" in capsys.readouterr().out


def test_resuming_a_finished_run_says_nothing_to_do(run_copy, capsys):
    assert resume(run_copy) == 0
    out = capsys.readouterr().out
    assert "nothing to do: the run has reached trainer.total_steps" in out and "env steps/s" not in out


def test_latest_is_the_newest_run_of_the_given_config(run_copy, capsys):
    # A newer run of another config under the same basedir.
    other = run_copy.parents[2] / "pendulum" / "experiment" / "20250101-000001"
    shutil.copytree(run_copy, other)
    config = other / "config.yaml"
    config.write_text(config.read_text().replace("name: cartpole", "name: pendulum"))
    later = time.time() + 60
    os.utime(other, (later, later))
    os.utime(config, (later, later))
    assert main(["train", "--config", "cartpole", "--resume", "latest", "--no-progress",
                 "--set", f"saving.basedir={run_copy.parents[2]}"]) == 0
    assert f"run directory: {run_copy.resolve()}" in capsys.readouterr().out


@pytest.mark.slow
def test_a_second_concurrent_resume_fails_at_once_naming_the_holder(run_copy, capsys):
    holder = subprocess.Popen([sys.executable, "-m", "warp_drive", "train", "--config", "cartpole", "--resume",
                               str(run_copy), "--no-progress", "--set", f"saving.basedir={run_copy.parents[2]}",
                               "trainer.total_steps=100000000"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        lock = run_copy / ".lock"
        deadline = time.monotonic() + 120
        while not (lock.is_file() and lock.read_text().strip() == str(holder.pid)):
            assert holder.poll() is None, holder.stderr.read().decode()[-2000:]
            assert time.monotonic() < deadline, "the first resume never took the run's lock"
            time.sleep(0.2)
        rows = (run_copy / "metrics.csv").read_text()
        started = time.monotonic()
        assert resume(run_copy, "--set", "trainer.total_steps=100000000") == 1
        assert time.monotonic() - started < 30
        err = capsys.readouterr().err
        assert str(run_copy) in err and f"pid {holder.pid}" in err
        assert (run_copy / "metrics.csv").read_text().startswith(rows)  # the refused resume wrote nothing
    finally:
        holder.kill()
        holder.wait(timeout=60)


# --------------------------------------------------------------------------- saving paths
@pytest.mark.parametrize("override, expected", [
    ("saving.name=/tmp/elsewhere", "saving.name: must be a relative path"),
    ("saving.tag=../..", "saving.tag: must not contain '..'"),
    ("saving.tag=a/../../b", "saving.tag: must not contain '..'"),
    ("name=../up", "name: must not contain '..'"),
])
def test_saving_paths_stay_inside_basedir(tmp_path, capsys, override, expected):
    basedir = tmp_path / "base" / "runs"
    assert main(["train", "--config", "cartpole", "--no-progress", "--set", *TINY, "trainer.total_steps=128",
                 f"saving.basedir={basedir}", override]) == 2
    assert expected in capsys.readouterr().err
    assert not any(tmp_path.rglob("config.yaml"))


def test_keep_checkpoints_is_validated():
    with pytest.raises(ConfigError, match="saving.keep_checkpoints: expected an integer >= 0"):
        load_config("cartpole", ["saving.keep_checkpoints=-1"])
    assert load_config("cartpole").saving.keep_checkpoints == 5


# --------------------------------------------------------------------------- YAML limits and ranges
def test_a_yaml_alias_bomb_is_refused_fast(tmp_path):
    levels = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    levels += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 10)}]" for i in range(1, 9)]
    path = tmp_path / "bomb.yaml"
    path.write_text("name: bomb\nenv:\n  name: CartPole\n  config:\n" + "".join(f"    {line}\n" for line in levels)
                    + "policy: {shared: {algorithm: PPO}}\n")
    started = time.monotonic()
    with pytest.raises(ConfigError, match="aliases"):
        load_config(path)
    assert time.monotonic() - started < 2


def test_an_oversized_yaml_file_is_refused(tmp_path):
    path = tmp_path / "huge.yaml"
    path.write_text("name: huge\n# " + "x" * (2 << 20) + "\n")
    with pytest.raises(ConfigError, match="larger than"):
        load_config(path)


@pytest.mark.parametrize("override, expected", [
    ("policy.shared.lr=-1", "policy.shared.lr: a learning rate must be > 0"),
    ("policy.shared.lr=0", "policy.shared.lr: a learning rate must be > 0"),
    ("policy.shared.lr={type: linear, start: -1e-3, end: 0}", "policy.shared.lr: a learning rate must be > 0"),
    ("policy.shared.model.type=transfomer", "unknown model type 'transfomer'"),
])
def test_ranges_are_validated_at_load_time(override, expected):
    with pytest.raises(ConfigError, match=expected.replace(".", r"\.").replace("(", r"\(")):
        load_config("cartpole", [override])


def test_a_learning_rate_may_decay_to_zero_but_not_below():
    assert load_config("cartpole", ["policy.shared.lr={type: linear, start: 1e-3, end: 0}"]).policy["shared"].lr
    with pytest.raises(ConfigError, match="a learning rate must be > 0"):
        load_config("cartpole", ["policy.shared.lr={type: linear, start: 1e-3, end: -1e-3}"])


# --------------------------------------------------------------------------- signals through the launcher
def _stat(pid):
    """(ppid, state, start time) of ``pid`` from /proc, or None when it is gone."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = text.rsplit(")", 1)[1].split()
    return int(fields[1]), fields[0], int(fields[19])


def _descendants(pid):
    children = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit() and (st := _stat(int(entry))) is not None:
            children.setdefault(st[0], []).append(int(entry))
    out, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            out.append(child)
            todo.append(child)
    return out


def _alive(proc):
    pid, start = proc
    st = _stat(pid)
    return st is not None and st[1] != "Z" and st[2] == start


def _start_long_two_rank_run(tmp_path):
    """``warp-drive train --nproc 2`` on a run of hours; returns (launcher, [(pid, start time)] of its tree)."""
    basedir = tmp_path / "runs"
    launcher = subprocess.Popen([sys.executable, "-m", "warp_drive", "train", "--config", "cartpole", "--nproc", "2",
                                 "--no-progress", "--set", *TINY, "trainer.total_steps=1000000000",
                                 f"saving.basedir={basedir}"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 180
    while True:
        tree = [(p, st[2]) for p in _descendants(launcher.pid) if (st := _stat(p)) is not None]
        # torchrun and both workers, and rank 0 has created the run directory: the workers are training.
        if len(tree) >= 3 and any(basedir.rglob("config.yaml")):
            return launcher, tree
        assert launcher.poll() is None, "the launcher exited before its workers started"
        assert time.monotonic() < deadline, "the workers did not start within 180 s"
        time.sleep(0.3)


def _assert_tree_gone(tree, within):
    deadline = time.monotonic() + within
    while any(_alive(p) for p in tree):
        if time.monotonic() > deadline:
            left = [p for p, _ in tree if _alive((p, _))]
            raise AssertionError(f"processes still running {within} s after the signal: {left}")
        time.sleep(0.2)


def _kill_all(launcher, tree):
    for proc in tree:
        if _alive(proc):
            try:
                os.kill(proc[0], signal.SIGKILL)
            except ProcessLookupError:
                pass
    if launcher.poll() is None:
        launcher.kill()
    launcher.wait(timeout=30)


@pytest.mark.slow  # a torchrun run
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_sigterm_to_the_launcher_ends_torchrun_and_every_worker(tmp_path):
    launcher, tree = _start_long_two_rank_run(tmp_path)
    try:
        launcher.send_signal(signal.SIGTERM)
        assert launcher.wait(timeout=60) == 128 + signal.SIGTERM
        _assert_tree_gone(tree, within=30)
    finally:
        _kill_all(launcher, tree)


@pytest.mark.slow  # a torchrun run
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc and uses prctl")
def test_workers_die_with_a_sigkilled_torchrun_agent(tmp_path):
    launcher, tree = _start_long_two_rank_run(tmp_path)
    try:
        agent = next(p for p in tree if _stat(p[0]) and _stat(p[0])[0] == launcher.pid)
        os.kill(agent[0], signal.SIGKILL)
        _assert_tree_gone(tree, within=30)
        launcher.wait(timeout=30)
    finally:
        _kill_all(launcher, tree)
