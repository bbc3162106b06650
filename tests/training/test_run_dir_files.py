"""What a run writes in its directory: never through a planted symbolic link, and a metrics.csv left
half-written (or not a metrics file at all) is repaired or refused on resume, not appended to."""

from __future__ import annotations

import csv
import shutil

import pytest

from shared_runs import tiny_cartpole
from warp_drive.training.config import RunError
from warp_drive.training.run import train
from warp_drive.training.runs.dirs import RunLock


@pytest.fixture
def run_copy(finished_cartpole_run, tmp_path):
    copy = tmp_path / "runs" / "cartpole" / "experiment" / "copy"
    shutil.copytree(finished_cartpole_run, copy)
    return copy


def resume(run_dir, tmp_path, iterations=3):
    return train(tiny_cartpole(tmp_path / "runs", iterations), resume=str(run_dir), progress=False, evaluate=False)


def rows(run_dir):
    with (run_dir / "metrics.csv").open(newline="") as handle:
        return list(csv.reader(handle))


@pytest.mark.parametrize("name", [".lock", "provenance.yaml"])
def test_a_planted_link_in_a_run_directory_is_refused_and_its_target_kept(run_copy, tmp_path, name):
    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n")
    (run_copy / name).unlink(missing_ok=True)
    (run_copy / name).symlink_to(victim)
    with pytest.raises(RunError, match=rf"{name} is a symbolic link .*victim.txt.*remove the link"):
        if name == ".lock":
            RunLock(run_copy).acquire()
        else:
            resume(run_copy, tmp_path)
    assert victim.read_text() == "precious\n"


def test_a_metrics_file_torn_in_its_last_row_loses_that_row_only(run_copy, tmp_path):
    whole = rows(run_copy)
    text = (run_copy / "metrics.csv").read_text()
    (run_copy / "metrics.csv").write_text(text[: len(text) - len(text.splitlines()[-1]) // 2 - 1])  # half a row
    run_dir = resume(run_copy, tmp_path)
    after = rows(run_dir)
    assert all(len(row) == len(after[0]) for row in after)  # no row glued onto a torn one
    assert after[: len(whole) - 1] == whole[:-1]  # the torn row is gone, the others kept
    steps = [int(row[0]) for row in after[1:]]
    assert steps == sorted(steps) and steps[-1] == 3 * 8 * 16


def test_a_metrics_file_without_its_header_is_refused_naming_it(run_copy, tmp_path):
    lines = (run_copy / "metrics.csv").read_text().splitlines(keepends=True)
    (run_copy / "metrics.csv").write_text("".join(lines[1:]))
    with pytest.raises(RunError, match=r"metrics.csv: its first line is not a metrics header"):
        resume(run_copy, tmp_path)


def _poison(run_dir):
    """Every weight of the newest checkpoint made NaN, as a diverged run would leave them."""
    import torch

    from warp_drive.training.runs.layout import latest_checkpoint

    path = latest_checkpoint(run_dir)
    state = torch.load(path, weights_only=True)
    for weights in state["models"].values():
        for value in weights.values():
            if value.is_floating_point():
                value.fill_(float("nan"))
    torch.save(state, path)
    return path, state


def test_evaluate_refuses_a_checkpoint_with_nan_weights_naming_it(run_copy):
    from warp_drive.training.runs.checkpoint import CheckpointError
    from warp_drive.training.run import evaluate

    path, _ = _poison(run_copy)
    with pytest.raises(CheckpointError, match=rf"{path.name}: policy 'shared'.s .* holds NaN or inf"):
        evaluate(str(run_copy), episodes=4)


def test_a_checkpoint_with_nan_weights_is_not_saved_and_latest_is_kept(run_copy):
    from warp_drive.training.runs.checkpoint import CheckpointError, save_checkpoint
    from warp_drive.training.runs.layout import latest_checkpoint

    before = latest_checkpoint(run_copy)
    _, state = _poison(run_copy)
    with pytest.raises(CheckpointError, match=r"not saving .*ckpt_000007.pt: policy 'shared'.s .* holds NaN"):
        save_checkpoint(run_copy, 7, state)
    assert latest_checkpoint(run_copy) == before and not (run_copy / "checkpoints" / "ckpt_000007.pt").exists()


@pytest.mark.parametrize("tamper", ["scalar", "float64"])
def test_a_checkpoint_env_array_of_another_shape_or_dtype_is_refused_naming_it(run_copy, tmp_path, tamper):
    """A single value used to be broadcast over the env array, and float64 cast into int32, silently."""
    import torch

    from warp_drive.training.runs.checkpoint import CheckpointError
    from warp_drive.training.runs.layout import latest_checkpoint

    path = latest_checkpoint(run_copy)
    state = torch.load(path, weights_only=True)
    name = next(n for n, v in state["env_arrays"].items() if v.dtype == torch.int32)
    value = state["env_arrays"][name]
    state["env_arrays"][name] = torch.tensor(7, dtype=torch.int32) if tamper == "scalar" else value.double()
    torch.save(state, path)
    import re

    with pytest.raises(CheckpointError, match=rf"checkpoint env array '{name}' is .*, the env's is "
                                              + re.escape(f"{tuple(value.shape)} torch.int32")):
        resume(run_copy, tmp_path)
