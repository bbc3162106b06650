"""Exploded weights (finite, beyond ``trainer.max_weight_magnitude``) are never saved and are refused by
evaluate and --resume, naming the policy, the parameter and its largest value.

Before: A2C at lr 3e37 saved +-3e37 weights as ``latest`` after iteration 1; iteration 2 raised
NonFiniteError saying nothing was saved, yet ``latest`` was that model and evaluated to a plausible 9.5.
"""

from __future__ import annotations

import shutil
from types import SimpleNamespace

import pytest
import torch
import yaml

from shared_runs import tiny_cartpole
from warp_drive.training.runs.checkpoint import CheckpointError, save_checkpoint
from warp_drive.training.runs.layout import latest_checkpoint
from warp_drive.training.config import ConfigError, load_config
from warp_drive.training.run import build, evaluate, train

A2C_EXPLODING = ["policy.shared.algorithm=A2C", "policy.shared.num_epochs=1", "policy.shared.num_minibatches=1",
                 "policy.shared.lr=3e37"]


@pytest.fixture
def run_copy(finished_cartpole_run, tmp_path):
    copy = tmp_path / "runs" / "cartpole" / "experiment" / "copy"
    shutil.copytree(finished_cartpole_run, copy)
    return copy


def explode(run_dir, value=3e37):
    """One weight of the newest checkpoint set to ``value`` (finite): what lr 3e37 left behind."""
    path = latest_checkpoint(run_dir)
    state = torch.load(path, weights_only=True)
    weights = state["models"]["shared"]
    name = next(n for n, v in weights.items() if v.is_floating_point() and v.dim() == 2)
    weights[name].view(-1)[3] = value
    torch.save(state, path)
    return path, name


def test_a2c_at_lr_3e37_saves_nothing_and_stops_naming_the_weight(tmp_path):
    with pytest.raises(CheckpointError, match=r"not saving .*ckpt_000001.pt: policy 'shared''s \S+ holds "
                                              r"-?\d(\.\d+)?e\+3[67] \(its largest magnitude\), beyond "
                                              r"trainer.max_weight_magnitude = 1e\+06: the weights exploded"):
        train(tiny_cartpole(tmp_path, 5, *A2C_EXPLODING), progress=False, evaluate=False)
    run_dir = next((tmp_path / "cartpole").glob("*/*"))
    assert latest_checkpoint(run_dir) is None and not list((run_dir / "checkpoints").glob("ckpt_*"))


def test_an_exploded_model_is_not_saved_and_latest_keeps_the_previous(run_copy):
    before = latest_checkpoint(run_copy)
    config = tiny_cartpole(run_copy.parents[2], 2)
    trainer = build(config)
    trainer.load_state_dict(torch.load(before, weights_only=True))
    with torch.no_grad():
        next(trainer.policies["shared"].model.parameters()).view(-1)[0] = -2.5e7
    with pytest.raises(CheckpointError, match=r"not saving .*ckpt_000007.pt: policy 'shared''s \S+ holds -2.5e\+07"):
        save_checkpoint(run_copy, 7, trainer.state_dict(), policies=trainer.policies,
                        max_weight_magnitude=config.trainer.max_weight_magnitude)
    assert latest_checkpoint(run_copy) == before and not (run_copy / "checkpoints" / "ckpt_000007.pt").exists()


def test_evaluate_refuses_exploded_weights_naming_file_policy_parameter_and_value(run_copy):
    path, name = explode(run_copy)
    with pytest.raises(CheckpointError, match=rf"{path.name}: policy 'shared''s {name} holds 3e\+37 \(its largest "
                                              rf"magnitude\), beyond trainer.max_weight_magnitude = 1e\+06"):
        evaluate(str(run_copy), episodes=4)


def test_resume_refuses_exploded_weights_unless_the_bound_is_raised(run_copy, tmp_path):
    path, name = explode(run_copy, 5e6)
    with pytest.raises(CheckpointError, match=rf"{path.name}: policy 'shared''s {name} holds 5e\+06"):
        train(tiny_cartpole(tmp_path / "runs", 3), resume=str(run_copy), progress=False, evaluate=False)
    # trainer.max_weight_magnitude may change on resume (config.RESUMABLE_KEYS)
    train(tiny_cartpole(tmp_path / "runs", 3, "trainer.max_weight_magnitude=1e7"), resume=str(run_copy),
          progress=False, evaluate=False)
    assert torch.load(latest_checkpoint(run_copy), weights_only=True)["iteration"] == 3


def test_the_bound_is_configurable_and_null_turns_it_off(run_copy):
    """The run's config.yaml holds the key only when it is not the default (1e6), so older runs read alike."""
    config = run_copy / "config.yaml"
    saved = yaml.safe_load(config.read_text())
    assert "max_weight_magnitude" not in saved["trainer"]
    explode(run_copy, 5e6)
    with pytest.raises(CheckpointError, match=r"holds 5e\+06 .* beyond trainer.max_weight_magnitude = 1e\+06"):
        evaluate(str(run_copy), episodes=2)
    for bound in (1e7, None):
        saved["trainer"]["max_weight_magnitude"] = bound
        config.write_text(yaml.safe_dump(saved))
        explode(run_copy, 3e37 if bound is None else 5e6)
        assert evaluate(str(run_copy), episodes=2)["episodes"] == 2


@pytest.mark.parametrize("value", ["0", "-1", ".nan", ".inf", "big"])
def test_the_bound_must_be_a_positive_number(value):
    with pytest.raises(ConfigError, match=r"trainer.max_weight_magnitude: expected a number > 0"):
        load_config("cartpole", [f"trainer.max_weight_magnitude={value}"])


def test_buffers_are_not_weights():
    """An observation normaliser's running count passes 1e6 in a long run; only parameters are bounded."""
    from warp_drive.training.runs.checkpoint import exploded_weight

    model = torch.nn.Linear(2, 2)
    model.register_buffer("count", torch.tensor(3e9, dtype=torch.float64))
    policies = {"shared": SimpleNamespace(model=model)}
    assert exploded_weight(policies, 1e6) is None
    with torch.no_grad():
        model.bias[1] = -4e6
    assert exploded_weight(policies, 1e6) == ("policy 'shared''s bias holds -4e+06 (its largest magnitude), beyond "
                                              "trainer.max_weight_magnitude = 1e+06")
    assert exploded_weight(policies, None) is None


@pytest.mark.parametrize("value", [float("nan"), -3e37])
def test_the_lightning_bridge_saves_no_broken_weights_either(tmp_path, value):
    """Before: WarpDriveModule.on_save_checkpoint put NaN or exploded weights into Lightning's checkpoint."""
    pytest.importorskip("lightning")
    from warp_drive.training.lightning import WarpDriveModule

    module = WarpDriveModule(build(tiny_cartpole(tmp_path, 2)))
    with torch.no_grad():
        next(module.warp_trainer.policies["shared"].model.parameters()).view(-1)[0] = value
    checkpoint = {}
    with pytest.raises(CheckpointError, match=r"not saving the Lightning checkpoint: policy 'shared''s \S+ holds"):
        module.on_save_checkpoint(checkpoint)
    assert checkpoint == {}
