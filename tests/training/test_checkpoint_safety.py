"""Checkpoints: loaded with weights_only=True (a planted pickle never runs), truncated ones skipped, pruning,
stale temp files, a full disk named.

Real runs on the cpu executor (tiny cartpole), real subprocesses for the CLI.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time

import numpy as np
import pytest
import torch

from warp_drive.training.runs import checkpoint
from warp_drive.training.runs.checkpoint import load_checkpoint, save_checkpoint
from warp_drive.training.runs.layout import list_checkpoints
from warp_drive.training.config import load_config
from warp_drive.training.run import train

from shared_runs import tiny_cartpole

tiny = tiny_cartpole


@pytest.fixture(scope="module")
def finished_run(finished_cartpole_run):
    """A real 2-iteration cartpole run with a checkpoint after each iteration (the session's, conftest.py)."""
    return finished_cartpole_run


@pytest.fixture
def run_copy(finished_run, tmp_path):
    copy = tmp_path / "runs" / "cartpole" / "experiment" / "copy"
    shutil.copytree(finished_run, copy)
    return copy


class Planted:
    """Unpickling this runs ``touch <marker>``: what a malicious checkpoint does."""

    def __init__(self, marker):
        self.marker = str(marker)

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def plant(run_dir, marker):
    path = run_dir / "checkpoints" / "ckpt_999999.pt"
    torch.save({"iteration": 999999, "models": Planted(marker)}, path)
    (run_dir / "checkpoints" / "latest").write_text(path.name + "\n")  # whoever can write the dir can do this too
    return path


def cli(*argv, cwd, timeout=300):
    return subprocess.run([sys.executable, "-m", "warp_drive", *argv], cwd=cwd, capture_output=True, text=True,
                          timeout=timeout)


@pytest.mark.slow
@pytest.mark.parametrize("command", ["evaluate", "resume"])
def test_a_planted_pickle_checkpoint_is_refused_and_never_runs(run_copy, tmp_path, command):
    marker = tmp_path / "pwned"
    planted = plant(run_copy, marker)
    if command == "evaluate":
        proc = cli("evaluate", str(run_copy), "--episodes", "2", cwd=tmp_path)
    else:
        proc = cli("train", "--config", "cartpole", "--resume", str(run_copy), "--no-progress",
                   "--set", f"saving.basedir={tmp_path / 'runs'}", cwd=tmp_path)
    assert not marker.exists(), "loading the checkpoint ran the code pickled in it"
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "refusing to load" in proc.stderr and planted.name in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr


def test_saved_checkpoints_load_with_weights_only_numpy_included(finished_run, tmp_path):
    state = torch.load(list_checkpoints(finished_run)[-1], weights_only=True)
    assert state["iteration"] == 2 and "shared" in state["models"]
    # NumPy values (env arrays, counters) are stored as tensors and Python scalars.
    path = save_checkpoint(tmp_path, 1, {"arrays": {"x": np.arange(3, dtype=np.float32)}, "n": np.int64(7)})
    loaded = torch.load(path, weights_only=True)
    assert torch.equal(loaded["arrays"]["x"], torch.arange(3, dtype=torch.float32)) and loaded["n"] == 7


def test_a_truncated_newest_checkpoint_falls_back_to_the_previous_one(run_copy):
    newest = list_checkpoints(run_copy)[-1]
    assert newest.name == "ckpt_000002.pt"
    newest.write_bytes(newest.read_bytes()[: newest.stat().st_size // 3])  # a disk that lost the tail
    warning = getattr(checkpoint, "CheckpointWarning", Warning)
    with pytest.warns(warning, match="ckpt_000002.pt"):
        assert load_checkpoint(run_copy)["iteration"] == 1
    with pytest.warns(warning, match="ckpt_000002.pt"):
        train(tiny(run_copy.parents[2]), resume=str(run_copy), progress=False)
    assert load_checkpoint(run_copy)["iteration"] == 2  # iteration 2 was trained again and saved whole


def test_only_the_newest_keep_checkpoints_are_kept(tmp_path):
    run_dir = train(tiny(tmp_path, 4, "saving.keep_checkpoints=2"), progress=False)
    assert [p.name for p in list_checkpoints(run_dir)] == ["ckpt_000003.pt", "ckpt_000004.pt"]


def test_temp_files_of_a_killed_save_are_removed_by_the_next_save(tmp_path):
    ckpt_dir = tmp_path / "checkpoints"
    ckpt_dir.mkdir()
    stale = ckpt_dir / ".ckpt_000001.pt.k1ll3d.tmp"
    stale.write_bytes(b"half a checkpoint")
    old = time.time() - 3600
    os.utime(stale, (old, old))
    save_checkpoint(tmp_path, 2, {"iteration": 2})
    assert not stale.exists()
    assert sorted(p.name for p in ckpt_dir.iterdir()) == ["ckpt_000002.pt", "latest"]


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full (Linux)")
def test_a_full_disk_is_named_not_unexpected_pos(tmp_path):
    """/dev/full answers every write with ENOSPC, as a full filesystem does."""
    from warp_drive.training.runs.checkpoint import CheckpointError, write_bytes

    target = tmp_path / "checkpoints" / "ckpt_000001.pt"
    with open("/dev/full", "wb") as f, pytest.raises(CheckpointError) as info:
        write_bytes(f, b"x" * (1 << 16), target)
    message = str(info.value)
    assert "no space left" in message and str(target.parent) in message and "free" in message
