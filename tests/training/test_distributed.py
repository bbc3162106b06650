"""Data-parallel training on CPU: 2 gloo processes launched by ``warp-drive train --nproc 2`` (torchrun).

The runs write per-rank facts through a training-loop callback loaded with
``--callback`` (``helpers_dist_callbacks.DumpRankFacts``: model hashes, local
episode counts and SPS) so the tests can compare ranks.
"""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys

from pathlib import Path

import pytest
import torch

from warp_drive.training.runs.checkpoint import load_checkpoint
from warp_drive.training.runs.layout import latest_checkpoint
from warp_drive.training.config import load_config
from warp_drive.training.run import build, state_for_rank

pytestmark = pytest.mark.slow  # multi-process torchrun runs (the fast tier: pytest -m 'not slow')

ITERATIONS = 3
SETTINGS = ["trainer.backend=cpu", "trainer.num_envs=8", "trainer.rollout_length=16",
            f"trainer.total_steps={8 * 16 * ITERATIONS}"]


HELPERS = str(Path(__file__).parent)  # tests/training/helpers_dist_callbacks.py, imported by the torchrun workers


def launch(tmp_path, *callbacks, extra_env=(), extra_set=(), timeout=120):
    path = os.pathsep.join(p for p in (HELPERS, os.environ.get("PYTHONPATH")) if p)
    env = {**os.environ, "PYTHONPATH": path, **dict(extra_env)}
    command = [sys.executable, "-m", "warp_drive", "train", "--config", "cartpole", "--nproc", "2",
               "--no-progress", "--set", *SETTINGS, *extra_set, f"saving.basedir={tmp_path / 'runs'}"]
    for spec in callbacks:
        command += ["--callback", spec]
    return subprocess.run(command, env=env, capture_output=True, text=True, timeout=timeout)


@pytest.fixture(scope="module")
def two_rank_run(tmp_path_factory):
    tmp_path = tmp_path_factory.mktemp("dist")
    result = launch(tmp_path, "helpers_dist_callbacks:DumpRankFacts")
    assert result.returncode == 0, result.stdout + result.stderr
    run_dirs = [p for p in (tmp_path / "runs").rglob("config.yaml")]
    assert len(run_dirs) == 1, run_dirs  # only rank 0 creates a run directory
    run_dir = run_dirs[0].parent
    dumps = [json.loads((run_dir / "test_dump" / f"rank{r}.json").read_text()) for r in range(2)]
    return run_dir, dumps, result


def test_ranks_hold_identical_parameters_that_changed(two_rank_run):
    run_dir, (r0, r1), result = two_rank_run
    assert r0["initial"] == r1["initial"]  # rank 0's parameters were broadcast
    assert r0["final"] == r1["final"]  # same averaged gradients, same steps
    assert r0["final"] != r0["initial"]
    assert result.stdout.count("run directory:") == 1
    assert (run_dir / "metrics.csv").is_file() and latest_checkpoint(run_dir) is not None


def test_metrics_are_aggregated_over_ranks(two_rank_run):
    run_dir, dumps, _ = two_rank_run
    with open(run_dir / "metrics.csv") as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == ITERATIONS
    for i, row in enumerate(rows):
        local = [d["logged"][i] for d in dumps]
        assert int(row["global_step"]) == local[0]["step"] == 2 * 8 * 16 * (i + 1)  # both ranks' env steps
        assert float(row["charts/episodes/shared"]) == sum(x["episodes"]["charts/episodes/shared"] for x in local)
        assert float(row["charts/SPS"]) == pytest.approx(sum(x["sps"] for x in local))


def test_checkpoint_loads_into_a_single_process_trainer(two_rank_run):
    run_dir, _, _ = two_rank_run
    state = load_checkpoint(run_dir)
    assert len(state["ranks"]) == 2
    assert not any(k.startswith("module.") for k in state["models"]["shared"])
    trainer = build(load_config("cartpole", SETTINGS))
    trainer.load_state_dict(state)  # rank 0's full state: models, optimizers, envs
    for tag, p in trainer.policies.items():
        for name, tensor in p.model.state_dict().items():
            assert torch.equal(tensor, state["models"][tag][name])
    assert trainer.run_episodes(greedy=True)["mean_return"]["shared"] > 0
    with pytest.raises(ValueError, match="2 process"):
        state_for_rank(state, None, run_dir)  # resuming 2 ranks' envs in one process is refused


def test_a_failing_worker_stops_the_run(tmp_path):
    result = launch(tmp_path, "helpers_dist_callbacks:FailOnRank1", extra_env=[("WARP_DRIVE_DIST_TIMEOUT", "60")],
                    timeout=90)
    assert result.returncode != 0
    assert "injected failure on rank 1" in result.stdout + result.stderr


@pytest.mark.parametrize("backend, collective, device", [
    ("pycuda", "nccl", torch.device("cuda", 1)),
])
def test_init_takes_the_collective_backend_and_device_from_the_executors_capabilities(
        monkeypatch, backend, collective, device):
    """``init`` reads ``capabilities`` (no executor names): nccl and GPU ``LOCAL_RANK``
    where arrays live in CUDA memory. Without a GPU the process group is recorded,
    not created; the cpu executors' real gloo groups run in the tests above."""
    from warp_drive.training import distributed

    calls = []
    monkeypatch.setenv("RANK", "1")
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("LOCAL_RANK", "1")
    monkeypatch.setattr(distributed.dist, "is_initialized", lambda: False)
    monkeypatch.setattr(distributed.dist, "init_process_group",
                        lambda pg_backend, **kwargs: calls.append(("init_process_group", pg_backend, kwargs)))
    monkeypatch.setattr(torch.cuda, "set_device", lambda index: calls.append(("set_device", index)))
    group = distributed.init(backend)
    assert (group.rank, group.world_size, group.local_rank, group.device) == (1, 2, 1, device)
    bound = [("set_device", 1)] if device.type == "cuda" else []
    assert calls[:-1] == bound
    name, pg_backend, kwargs = calls[-1]
    assert (name, pg_backend, kwargs["rank"], kwargs["world_size"]) == ("init_process_group", collective, 1, 2)
    assert kwargs.get("device_id") == (device if collective == "nccl" else None)


def test_ranks_keep_identical_value_normalisation_statistics(tmp_path):
    """Each rank merges its own returns, then the statistics are averaged: every rank normalises alike and the
    models stay identical."""
    result = launch(tmp_path, "helpers_dist_callbacks:DumpRankFacts", extra_set=["policy.shared.value_normalization=true"])
    assert result.returncode == 0, result.stdout + result.stderr
    run_dir = next((tmp_path / "runs").rglob("config.yaml")).parent
    r0, r1 = (json.loads((run_dir / "test_dump" / f"rank{r}.json").read_text()) for r in range(2))
    assert r0["value_norms"] == r1["value_norms"] and r0["value_norms"]["shared"][2] > 0
    assert r0["final"] == r1["final"] and r0["final"] != r0["initial"]



def test_ranks_keep_identical_recurrent_models(tmp_path):
    """GRU states stay local to each rank (its own envs); the averaged gradients keep the models identical."""
    result = launch(tmp_path, "helpers_dist_callbacks:DumpRankFacts",
                    extra_set=["policy.shared.model.type=gru", "policy.shared.sequence_length=8"])
    assert result.returncode == 0, result.stdout + result.stderr
    run_dir = next((tmp_path / "runs").rglob("config.yaml")).parent
    r0, r1 = (json.loads((run_dir / "test_dump" / f"rank{r}.json").read_text()) for r in range(2))
    assert r0["final"] == r1["final"] and r0["final"] != r0["initial"]
