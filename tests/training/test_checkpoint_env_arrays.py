"""A checkpoint restores only an env's state: constants and index tables must equal the env's own, and
restored state must have the env's shapes and dtypes, be finite and lie in the env's declared ranges
(Environment's checkpoint rule, warp_drive/env/environment.py).

Before: every saved env array was copied back. TagContinuous indexes with ``tagger_ids`` unchecked, so a
received checkpoint's ``tagger_ids = 10**8`` killed the process with SIGSEGV and 40000 read out of bounds
(the process crashed at exit or finished with rc 0 on garbage). Real runs on the cpu executor: TagContinuous
with full observation (each runner scans every tagger by ``tagger_ids`` on every step).
"""

from __future__ import annotations

import shutil
import subprocess
import sys

import pytest
import torch

from resume_check import assert_same_run, straight_and_resumed
from shared_runs import TINY
from warp_drive.training.runs.checkpoint import CheckpointError
from warp_drive.training.runs.layout import latest_checkpoint
from warp_drive.training.config import load_config
from warp_drive.training.run import train

TAG = ["env.config.use_full_observation=true", "saving.model_params_save_freq=1"]


def tag_config(basedir, iterations: int = 2, *extra: str):
    """TagContinuous, 7 agents (2 taggers), 8 envs x 16 steps per iteration, a checkpoint after each."""
    return load_config("tag_continuous_small", [*TINY, *TAG, f"trainer.total_steps={8 * 16 * iterations}",
                                                f"saving.basedir={basedir}", *extra])


@pytest.fixture(scope="module")
def tag_run(tmp_path_factory):
    return train(tag_config(tmp_path_factory.mktemp("tag_runs")), progress=False, evaluate=False)


@pytest.fixture
def run_copy(tag_run, tmp_path):
    copy = tmp_path / "runs" / "tag_continuous_small" / "experiment" / "copy"
    shutil.copytree(tag_run, copy)
    return copy


def plant(run_dir, name, value):
    """Set every element of the latest checkpoint's env array ``name`` (a received checkpoint's)."""
    path = latest_checkpoint(run_dir)
    state = torch.load(path, weights_only=True)
    state["env_arrays"][name] = torch.full_like(state["env_arrays"][name], value)
    torch.save(state, path)
    return path


def resume(run_dir, tmp_path, iterations: int = 3):
    return train(tag_config(tmp_path / "runs", iterations), resume=str(run_dir), progress=False, evaluate=False)


@pytest.mark.parametrize("value", [10**8, 40000])
@pytest.mark.slow  # trains, then a child process (over ~1.5 s: the full suite, not the fast tier)
def test_a_planted_tagger_ids_is_refused_on_resume_naming_it(run_copy, tmp_path, value):
    """Before: rc 139 (SIGSEGV) for both values (checked by resuming such a checkpoint with the code of the
    commit before this test in a subprocess); now a one-line refusal naming the array, exit status 1."""
    plant(run_copy, "tagger_ids", value)
    proc = subprocess.run([sys.executable, "-m", "warp_drive", "train", "--config", "tag_continuous_small",
                           "--resume", str(run_copy), "--no-progress", "--set", "trainer.total_steps=384",
                           f"saving.basedir={tmp_path / 'runs'}"], cwd=tmp_path, capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 1, (proc.returncode, proc.stderr[-2000:])
    assert "checkpoint env array 'tagger_ids' differs from TagContinuous's own" in proc.stderr, proc.stderr
    assert "saved with a different env config" in proc.stderr and "Traceback" not in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr


def test_a_checkpoint_of_another_env_config_is_refused_naming_the_array(run_copy, tmp_path):
    """Another env seed picks other agents as taggers: same shapes, other index tables."""
    other = train(tag_config(tmp_path / "other", 2, "env.config.seed=1"), progress=False, evaluate=False)
    shutil.copyfile(latest_checkpoint(other), latest_checkpoint(run_copy))
    with pytest.raises(CheckpointError, match=r"checkpoint env array 'agent_types' differs from TagContinuous's "
                                              r"own: it is a constant .* saved with a different env config"):
        resume(run_copy, tmp_path)


@pytest.mark.parametrize("name, value, message", [
    ("loc_x", float("nan"), r"'loc_x' holds nan at \[0, 0\]: state must be finite"),
    ("speed_at_reset", float("inf"), r"'speed_at_reset' holds inf at \[0, 0\]: state must be finite"),
    ("tagged_by", 7, r"'tagged_by' holds 7 at \[0, 0\], outside -1..6"),
    ("num_runners", -1, r"'num_runners' holds -1 at \[0\], outside 0..5"),
    ("_timestep_", 10**6, r"'_timestep_' holds 1000000 at \[0\], outside 0..100"),
    ("_done_", 3, r"'_done_' holds 3 at \[0\], outside 0..2"),
    ("loc_x_reset_pool", 0.5, r"'loc_x_reset_pool' differs from TagContinuous's own: it is a reset pool"),
])
def test_restored_state_out_of_its_range_or_not_finite_is_refused_naming_it(run_copy, tmp_path, name, value,
                                                                              message):
    """Before: each was copied into the env as it was."""
    plant(run_copy, name, value)
    with pytest.raises(CheckpointError, match="checkpoint env array " + message):
        resume(run_copy, tmp_path)


def test_an_array_the_env_does_not_have_is_refused(run_copy, tmp_path):
    path = latest_checkpoint(run_copy)
    state = torch.load(path, weights_only=True)
    state["env_arrays"]["planted"] = torch.zeros(3)
    torch.save(state, path)
    with pytest.raises(CheckpointError, match="checkpoint env array 'planted' is not an array of TagContinuous"):
        resume(run_copy, tmp_path)


def test_a_refused_checkpoint_changes_no_env_array():
    """Everything is checked before anything is copied."""
    from warp_drive.training.runs.env_arrays import restore_env_arrays
    from warp_drive.training.run import build

    trainer = build(tag_config("unused"))
    dm = trainer.env.data_manager
    before = {n: dm.data_on_device_via_torch(n).clone() for n in dm.array_names}
    arrays = {n: v + (1 if n == "loc_x" else 0) for n, v in before.items()}
    arrays["tagger_ids"] = arrays["tagger_ids"] + 1  # after loc_x in the env's order
    with pytest.raises(CheckpointError, match="'tagger_ids'"):
        restore_env_arrays(trainer.env, arrays)
    assert all(torch.equal(dm.data_on_device_via_torch(n), v) for n, v in before.items())


def test_state_and_constants_follow_the_environment_rule():
    from warp_drive.env.wrapper import EnvWrapper

    env = EnvWrapper("TagContinuous", 2, backend="cpu", seed=0,
                     env_config={"num_taggers": 2, "num_runners": 5, "use_full_observation": True})
    constants = set(env.constant_arrays())
    assert {"tagger_ids", "agent_types", "skill_levels", "step_rewards", "acceleration_actions",
            "turn_actions", "loc_x_reset_pool", "loc_y_reset_pool", "direction_reset_pool",
            "observations_reset_pool"} == constants
    ranges = env.state_ranges()
    assert ranges["tagged_by"] == ranges["tagged_by_at_reset"] == (-1, 6)
    assert ranges["_done_"] == (0, 2) and ranges["_timestep_"] == (0, env.episode_length)


def test_a_wrong_checkpoint_declaration_is_an_error_at_construction():
    from example_envs.dummy_env.dummy_env import DummyEnv
    from warp_drive.env.wrapper import EnvWrapper

    class Typo(DummyEnv):
        written_arrays = ("agents_on_targt",)

    class BadRange(DummyEnv):
        def array_ranges(self):
            return {"values": (0, 1)}  # a float32 array

    with pytest.raises(ValueError, match=r"written_arrays names 'agents_on_targt'"):
        EnvWrapper(Typo(), 2, backend="cpu", seed=0)
    with pytest.raises(ValueError, match=r"array_ranges\(\): 'values'"):
        EnvWrapper(BadRange(), 2, backend="cpu", seed=0)


def test_resume_stays_bit_exact(tmp_path):
    """A 4-iteration run killed after iteration 2 and resumed ends as the uninterrupted run: the constants are
    compared, not copied, and the written scratch (neighbor_grid) is restored with the rest of the state."""
    a, b = straight_and_resumed(tag_config, tmp_path, tmp_path / "runs" / "tag_continuous_small" / "experiment"
                                / "killed")
    assert_same_run(a, b)
