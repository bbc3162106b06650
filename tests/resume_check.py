"""A run killed after iteration 2 of 4 and resumed, beside the run that was never interrupted: shared by the
bit-exact resume tests (tests/ is on sys.path through tests/conftest.py)."""

from __future__ import annotations

import shutil

import numpy as np
import torch

from warp_drive.training.runs.layout import latest_checkpoint
from warp_drive.training.run import train


def straight_and_resumed(config_of, tmp_path, killed):
    """The last checkpoints ``(straight, resumed)`` of ``config_of(basedir, 4)`` trained without a stop and
    resumed from its iteration-2 checkpoint, copied to ``killed`` (a run directory under tmp_path/runs)."""
    straight = train(config_of(tmp_path / "straight", 4), progress=False, evaluate=False)
    shutil.copytree(straight, killed)
    for late in ("ckpt_000003.pt", "ckpt_000004.pt"):
        (killed / "checkpoints" / late).unlink()
    (killed / "checkpoints" / "latest").write_text("ckpt_000002.pt\n")
    resumed = train(config_of(tmp_path / "runs", 4), resume=str(killed), progress=False, evaluate=False)
    return (torch.load(latest_checkpoint(straight), weights_only=True),
            torch.load(latest_checkpoint(resumed), weights_only=True))


def assert_same_run(a: dict, b: dict) -> None:
    """Both checkpoints at iteration 4 with bit-identical models and env arrays."""
    assert a["iteration"] == b["iteration"] == 4
    for tag in a["models"]:
        for key, value in a["models"][tag].items():
            assert torch.equal(value, b["models"][tag][key]), (tag, key)
    for name, value in a["env_arrays"].items():
        np.testing.assert_array_equal(value.numpy(), b["env_arrays"][name].numpy(), err_msg=name)
