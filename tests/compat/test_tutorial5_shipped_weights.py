"""This project's own weights for WarpDrive's tutorial 5, laid out under ``get_project_root()`` (issue 30).

Tutorial 5 ends with ``trainer.load_model_checkpoint({"tagger": f"{get_project_root()}/tutorials/assets/
tag_continuous_training/tagger_1000010000.state_dict", "runner": ...})``. Those paths hold this project's weights
(package data ``warp_drive/compat/assets/tutorial5/``, made by ``benchmarks/train_tutorial5_weights.py`` on the
tutorial's config), laid out by ``warp_drive.compat.project_root``. Here: the root has them, the tutorial's Trainer
(its env config and policies; 2 envs) loads them with the tutorial's dict, the parameters are the shipped tensors,
they are not an untrained policy, and the wheel's package-data pattern covers them.
"""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest
import torch
import yaml

ROOT = Path(__file__).resolve().parents[2]
PACKAGE_ASSETS = ROOT / "warp_drive" / "compat" / "assets" / "tutorial5"
NAMES = {"tagger": "tagger_1000010000.state_dict", "runner": "runner_1000010000.state_dict"}

# Tutorial 5's run config: its env and policy sections as written; 2 envs instead of 400.
CFG = """
name: "tag_continuous"
env:
    num_taggers: 5
    num_runners: 100
    grid_length: 20
    episode_length: 500
    max_acceleration: 0.1
    min_acceleration: -0.1
    max_turn: 2.35
    min_turn: -2.35
    num_acceleration_levels: 10
    num_turn_levels: 10
    skill_level_runner: 1
    skill_level_tagger: 1
    seed: 274880
    use_full_observation: False
    runner_exits_game_after_tagged: True
    num_other_agents_observed: 10
    tag_reward_for_tagger: 10.0
    tag_penalty_for_runner: -10.0
    step_penalty_for_tagger: -0.00
    step_reward_for_runner: 0.00
    edge_hit_penalty: -0.0
    end_of_game_reward_for_runner: 1.0
    tagging_distance: 0.02
trainer:
    num_envs: 2
    train_batch_size: 1000
    num_episodes: 500
policy:
    runner:
        to_train: True
        algorithm: "A2C"
        gamma: 0.98
        lr: 0.005
        vf_loss_coeff: 1
        entropy_coeff:
        - [0, 0.5]
        - [2000000, 0.05]
        model:
            type: "fully_connected"
            fc_dims: [256, 256]
            model_ckpt_filepath: ""
    tagger:
        to_train: True
        algorithm: "A2C"
        gamma: 0.98
        lr: 0.002
        vf_loss_coeff: 1
        model:
            type: "fully_connected"
            fc_dims: [256, 256]
            model_ckpt_filepath: ""
saving:
    metrics_log_freq: 100
    model_params_save_freq: 5000
    basedir: "BASEDIR"
    name: "tag_continuous"
    tag: "100runners_5taggers"
"""


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("WARP_DRIVE_CACHE", str(tmp_path / "cache"))  # a fresh get_project_root()
    return tmp_path / "cache"


def tutorial_trainer(tmp_path):
    """The tutorial's calls (WarpDrive's import paths, the cpu backend)."""
    from example_envs.tag_continuous.tag_continuous import TagContinuous
    from warp_drive.env_wrapper import EnvWrapper
    from warp_drive.training.trainer import Trainer

    run_config = yaml.safe_load(CFG.replace("BASEDIR", str(tmp_path / "runs")))
    env_wrapper = EnvWrapper(env_obj=TagContinuous(**run_config["env"]), num_envs=run_config["trainer"]["num_envs"],
                             env_backend="cpu")
    policy_tag_to_agent_id_map = {"tagger": list(env_wrapper.env.taggers), "runner": list(env_wrapper.env.runners)}
    return Trainer(env_wrapper, run_config, policy_tag_to_agent_id_map, verbose=False)


def load_as_the_tutorial(trainer):
    from warp_drive.utils.common import get_project_root

    trainer.load_model_checkpoint(
        {
            "tagger": f"{get_project_root()}/tutorials/assets/tag_continuous_training/tagger_1000010000.state_dict",
            "runner": f"{get_project_root()}/tutorials/assets/tag_continuous_training/runner_1000010000.state_dict",
        }
    )


def test_the_root_holds_this_projects_weights_at_the_tutorials_paths(cache):
    from warp_drive.compat.project_root import TUTORIAL5_TRAINING, not_shipped
    from warp_drive.utils.common import get_project_root

    root = Path(get_project_root())
    assets = root / "tutorials" / "assets" / "tag_continuous_training"
    for name in NAMES.values():
        assert (assets / name).read_bytes() == (PACKAGE_ASSETS / name).read_bytes(), name
    readme = (root / "README.txt").read_text()
    assert "this project's own weights" in readme and f"for {TUTORIAL5_TRAINING['env_steps']} env steps" in readme
    assert TUTORIAL5_TRAINING["env_steps"] > 0

    # Written only when missing: WarpDrive's files (or a user's) copied over them stay; a deleted one comes back.
    (assets / NAMES["tagger"]).write_bytes(b"a user's file")
    (assets / NAMES["runner"]).unlink()
    assert Path(get_project_root()) == root
    assert (assets / NAMES["tagger"]).read_bytes() == b"a user's file"
    assert (assets / NAMES["runner"]).read_bytes() == (PACKAGE_ASSETS / NAMES["runner"]).read_bytes()

    # WarpDrive's other assets there are still named as not shipped.
    assert "not shipped by this project" in not_shipped(assets / "t=0.png")


def test_other_weights_make_another_root():
    from warp_drive.compat import project_root

    files, binary = project_root._files(), dict(project_root._binary_files())
    version = project_root._version(files, binary)
    name = next(iter(binary))
    binary[name] = binary[name] + b"\0"
    assert project_root._version(files, binary) != version


def test_the_wheels_package_data_covers_the_weights():
    patterns = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]["warp_drive"]
    covered = {p.relative_to(ROOT / "warp_drive").as_posix()
               for pattern in patterns for p in (ROOT / "warp_drive").glob(pattern)}
    for name in NAMES.values():
        assert f"compat/assets/tutorial5/{name}" in covered, name


@pytest.mark.slow
def test_the_tutorials_trainer_loads_them_as_written(cache, tmp_path):
    trainer = tutorial_trainer(tmp_path)
    fresh = {tag: {k: v.clone() for k, v in p.model.state_dict().items()} for tag, p in trainer.policies.items()}
    load_as_the_tutorial(trainer)
    assert trainer.env_steps == 1000010000  # the file name's step, as WarpDrive's load set it
    for tag, name in NAMES.items():
        shipped = torch.load(PACKAGE_ASSETS / name, map_location="cpu", weights_only=True)
        loaded = trainer.policies[tag].model.state_dict()
        assert set(loaded) == set(shipped), tag
        assert all(torch.equal(loaded[k], shipped[k]) for k in shipped), tag
        assert any(not torch.equal(fresh[tag][k], shipped[k]) for k in shipped), f"{tag}: an untrained policy"

    # How they play (measured once, when they were made) is TUTORIAL5_TRAINING's figures, not re-measured here:
    # two 500-step episodes of 105 agents cost more than the rest of this file.
    trainer.graceful_close()
