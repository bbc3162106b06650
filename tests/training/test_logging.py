"""Run logging: metrics without NaN rows, provenance, the config in TensorBoard, W&B offline, CLI errors."""

from __future__ import annotations

import csv
import json
import logging
import struct
import subprocess
from pathlib import Path

import pytest
import torch
import yaml

import warp_drive
from warp_drive.cli import main
from warp_drive.training.config import ConfigError, RunConfig, load_config
from warp_drive.training.run import train

SMALL = ["trainer.backend=cpu", "trainer.num_envs=2", "trainer.rollout_length=16"]


def pendulum(tmp_path, *extra):
    """Pendulum never terminates: with 20-step episodes the first episodes end in iteration 2."""
    return load_config("pendulum", [*SMALL, "trainer.total_steps=96", "env.config.episode_length=20",
                                    "saving.metrics_log_freq=1",
                                    f"saving.basedir={tmp_path / 'runs'}", *extra])


@pytest.fixture(scope="module")
def pendulum_run(tmp_path_factory):
    return train(pendulum(tmp_path_factory.mktemp("logging")), progress=False)


def test_no_nan_before_the_first_episode_ends(pendulum_run):
    text = (pendulum_run / "metrics.csv").read_text()
    assert "nan" not in text.lower()
    with open(pendulum_run / "metrics.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == 3
    assert rows[0]["charts/episodic_return/shared"] == ""  # no episode had ended: an empty cell
    assert all(float(r["charts/episodic_return/shared"]) < 0 for r in rows[1:])  # Pendulum's costs
    assert float(rows[0]["charts/episodes/shared"]) == 0


def test_tensorboard_has_no_nan_point_and_the_config_and_provenance_as_text(pendulum_run):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(str(pendulum_run), size_guidance={"scalars": 0, "tensors": 0}).Reload()
    returns = events.Scalars("charts/episodic_return/shared")
    assert [e.step for e in returns] == [64, 96]  # nothing at step 32, before the first episode ended
    texts = {tag: events.Tensors(tag)[0].tensor_proto.string_val[0].decode() for tag in events.Tags()["tensors"]}
    config_text = next(v for k, v in texts.items() if k.startswith("config"))
    assert "rollout_length: 16" in config_text and "name: pendulum" in config_text
    assert "backend: cpu" in next(v for k, v in texts.items() if k.startswith("provenance"))


def test_provenance_names_versions_commit_backend_and_device(pendulum_run):
    where = yaml.safe_load((pendulum_run / "provenance.yaml").read_text())
    assert where["warp_drive"] == warp_drive.__version__ and where["torch"] == str(torch.__version__)
    assert where["backend"] == "cpu" and "CPU" in where["device"]
    package = Path(warp_drive.__file__).resolve().parent
    head = subprocess.run(["git", "-C", str(package), "rev-parse", "HEAD"], capture_output=True, text=True)
    if head.returncode == 0:
        assert where["git_commit"].split("-")[0] == head.stdout.strip()
    else:
        assert where["git_commit"] is None
    # The run's config.yaml stays a plain run config (provenance lives beside it).
    RunConfig.from_dict(yaml.safe_load((pendulum_run / "config.yaml").read_text()))


@pytest.mark.slow
def test_wandb_runs_offline_into_the_run_directory_without_a_login(tmp_path, monkeypatch):
    pytest.importorskip("wandb")
    for name in ("WANDB_API_KEY", "WANDB_MODE", "WANDB_DIR"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("NETRC", str(tmp_path / "no-netrc"))
    monkeypatch.setenv("WANDB_SILENT", "true")
    run_dir = train(pendulum(tmp_path, "saving.wandb={project: wd-test}"), progress=False, track=True)
    offline = list((run_dir / "wandb").glob("offline-run-*"))
    assert len(offline) == 1 and list(offline[0].glob("run-*.wandb"))
    run_id = (run_dir / "wandb_run_id").read_text().strip()
    assert offline[0].name.endswith(run_id)
    # The run file's records, read back: W&B got every metrics.csv row with its values, and the config.
    records = wandb_records(next(offline[0].glob("run-*.wandb")))
    history = [{item.key or "/".join(item.nested_key): json.loads(item.value_json) for item in r.history.item}
               for r in records if r.WhichOneof("record_type") == "history"]
    with open(run_dir / "metrics.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert [h["global_step"] for h in history] == [int(r["global_step"]) for r in rows] == [32, 64, 96]
    for logged, row in zip(history, rows):
        assert {k for k, v in row.items() if v} == set(logged) - {"_step", "_runtime", "_timestamp"}
        for key, value in row.items():
            if value:
                assert logged[key] == pytest.approx(float(value), rel=1e-12), key
    assert "charts/episodic_return/shared" not in history[0] and "charts/episodic_return/shared" in history[-1]
    config = next(r.config for r in records if r.WhichOneof("record_type") == "config")
    values = {item.key: json.loads(item.value_json) for item in config.update}
    assert values["trainer"]["rollout_length"] == 16 and values["env"]["name"] == "Pendulum"
    assert values["provenance"]["backend"] == "cpu" and "torch" in values["provenance"]


def wandb_records(path: Path) -> list:
    """The protobuf records of a W&B run file (``run-*.wandb``, written offline).

    The file is a 7-byte header (``:W&B``, magic, version) and 32 KiB blocks of
    LevelDB-log records (CRC, length, type: full, or first/middle/last pieces);
    this wandb has no public reader for offline runs.
    """
    from wandb.proto import wandb_internal_pb2

    data, block, pos, pieces, out = path.read_bytes(), 32768, 7, b"", []
    assert data[:4] == b":W&B", data[:7]
    while pos + 7 <= len(data):
        left = block - pos % block
        if left < 7:  # a block's tail too short for a record header is padding
            pos += left
            continue
        _, length, kind = struct.unpack("<IHB", data[pos:pos + 7])
        if kind == 0:
            pos += left
            continue
        pieces += data[pos + 7:pos + 7 + length]
        pos += 7 + length
        if kind in (1, 4):  # a full record, or the last piece of one
            record = wandb_internal_pb2.Record()
            record.ParseFromString(pieces)
            out.append(record)
            pieces = b""
    return out


def test_unknown_wandb_settings_are_refused_before_a_run_directory(tmp_path):
    pytest.importorskip("wandb")
    with pytest.raises(ConfigError, match="saving.wandb: unknown key.*projekt"):
        train(pendulum(tmp_path, "saving.wandb={projekt: x}"), progress=False, track=True)
    assert not (tmp_path / "runs").exists()


def test_pycuda_without_pycuda_is_one_error_line_naming_the_fix(tmp_path, capsys):
    try:
        import pycuda.driver  # noqa: F401
    except Exception:
        pass
    else:
        pytest.skip("PyCUDA is installed here")
    code = main(["train", "--config", "cartpole", "--backend", "pycuda", "--no-progress",
                 "--set", f"saving.basedir={tmp_path / 'runs'}"])
    err = capsys.readouterr().err
    assert code == 1
    assert len(err.strip().splitlines()) <= 2 and "Traceback" not in err
    assert "pip install 'warp_drive[cuda]'" in err and "GPU" in err
    assert not (tmp_path / "runs").exists()


def test_the_cli_sends_warp_drive_diagnostics_to_stderr(capsys):
    logger = logging.getLogger("warp_drive")
    saved = list(logger.handlers)
    logger.handlers.clear()
    try:
        assert main(["envs"]) == 0
        logging.getLogger("warp_drive.training").warning("a diagnostic")
        assert "warp-drive: WARNING: a diagnostic" in capsys.readouterr().err
    finally:
        logger.handlers[:] = saved
