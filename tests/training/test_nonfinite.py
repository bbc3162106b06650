"""A NaN or inf in a rollout or an update stops training before it reaches the
parameters or a checkpoint (real kernels on the cpu executor, real training)."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
import torch

from example_envs.dummy_env.dummy_env import DummyEnv
from warp_drive.env_wrapper import EnvWrapper
from warp_drive.env.registry import register_env
from warp_drive.training.guards import NonFiniteError
from warp_drive.training.runs.checkpoint import load_checkpoint
from warp_drive.training.runs.layout import latest_checkpoint
from warp_drive.training.config import load_config
from warp_drive.training.run import build
from warp_drive.training.trainer import Trainer

KERNEL = Path(__file__).parents[1] / "kernels" / "nan_reward_env.cu"


class NanRewardEnv(DummyEnv):
    """DummyEnv whose kernel rewards agent ``nan_agent`` of env ``nan_env`` NaN at timestep ``nan_step``."""

    name = "NanRewardEnv"
    cuda_source = str(KERNEL)
    step_kernel = "NanRewardStep"

    def __init__(self, nan_env: int = 0, nan_agent: int = 0, nan_step: int = -1, **kwargs):
        kwargs.setdefault("tolerance", -1.0)  # never terminates: every episode reaches nan_step
        kwargs.setdefault("random_starts", False)
        super().__init__(**kwargs)
        self.nan_env, self.nan_agent, self.nan_step = int(nan_env), int(nan_agent), int(nan_step)

    def get_data_dictionary(self, num_envs):
        feed = super().get_data_dictionary(num_envs)
        feed.add_data("nan_env", self.nan_env)
        feed.add_data("nan_agent", self.nan_agent)
        feed.add_data("nan_step", self.nan_step)
        feed.add_data("zero", 0.0)
        return feed


register_env("NanRewardEnv", NanRewardEnv, overwrite=True)

# 8 envs x 16 steps per iteration, episodes of 20 steps: timestep 18 falls in iteration 2.
SHORT = ["trainer.backend=cpu", "trainer.num_envs=8", "trainer.rollout_length=16", "trainer.total_steps=384"]


def nan_config(*overrides, nan_step=18):
    return load_config("dummy_env", [*SHORT, "env.name=NanRewardEnv", "env.config.nan_env=3",
                                     "env.config.nan_agent=2", f"env.config.nan_step={nan_step}", *overrides])


def snapshot(trainer):
    return {tag: {k: v.clone() for k, v in p.model.state_dict().items()} for tag, p in trainer.policies.items()}


def assert_same(a, b):
    for tag in a:
        for key in a[tag]:
            assert torch.equal(a[tag][key], b[tag][key]), (tag, key)


def test_nan_reward_stops_iterate_before_the_update_naming_array_env_agent_iteration():
    trainer = build(nan_config())
    trainer.iterate()  # timesteps 1..16: all finite
    before = snapshot(trainer)
    adam_before = {tag: p.optimizer.state_dict()["state"][0]["exp_avg"].clone() for tag, p in trainer.policies.items()}
    with pytest.raises(NonFiniteError) as info:
        trainer.iterate()
    message = str(info.value)
    assert "rewards" in message and "env 3, agent 2" in message and "iteration 2" in message, message
    assert "nan" in message and "not updated" in message
    assert_same(before, snapshot(trainer))
    for tag, p in trainer.policies.items():
        assert torch.equal(adam_before[tag], p.optimizer.state_dict()["state"][0]["exp_avg"])
    assert trainer.iteration == 1


def test_skip_mode_drops_the_bad_update_and_keeps_training():
    config = nan_config()
    env = EnvWrapper(NanRewardEnv(nan_env=3, nan_agent=2, nan_step=18), 8, backend="cpu", seed=0)
    trainer = Trainer(env, config, on_nonfinite="skip")
    trainer.iterate()
    before = snapshot(trainer)
    with pytest.warns(RuntimeWarning, match="rewards.*env 3, agent 2.*skipped"):
        metrics = trainer.iterate()
    assert metrics["nonfinite/skipped_updates"] == 1.0
    assert_same(before, snapshot(trainer))
    assert torch.isfinite(trainer.rollout.tallies["shared"].running).all()
    with pytest.warns(RuntimeWarning, match="iteration 3"):  # timesteps 13..20 hold 18 again: skipped again
        metrics = trainer.iterate()
    assert metrics["nonfinite/skipped_updates"] == 2.0
    assert_same(before, snapshot(trainer))
    after = trainer.episode_metrics()
    assert np.isfinite(after["charts/episodic_return/shared"])


def test_huge_vf_coef_raises_naming_the_loss_and_leaves_parameters_unchanged():
    trainer = build(load_config("dummy_env", [*SHORT, "policy.shared.vf_coef=1e38",
                                              "policy.shared.max_grad_norm=null"]))
    before = snapshot(trainer)
    with pytest.raises(NonFiniteError, match=r"iteration 1 .*policy 'shared': non-finite (loss|gradient norm).*"
                                             r"loss = .*vf_coef 1e\+38") as info:
        trainer.iterate()
    assert "loss" in str(info.value)
    assert_same(before, snapshot(trainer))
    for p in trainer.policies.values():
        assert all(torch.isfinite(t).all() for t in p.model.state_dict().values())


@pytest.mark.slow
def test_run_train_with_a_nan_env_exits_nonzero_and_keeps_the_last_good_checkpoint(tmp_path):
    script = tmp_path / "run.py"
    script.write_text(textwrap.dedent(f"""
        import sys
        sys.path.insert(0, {str(Path(__file__).parent)!r})
        import test_nonfinite
        from warp_drive.training.run import train
        config = test_nonfinite.nan_config("saving.basedir={tmp_path / 'runs'}", "saving.model_params_save_freq=1")
        train(config, progress=False)
    """))
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=600,
                          cwd=Path(__file__).parents[2])
    assert done.returncode != 0, done.stdout + done.stderr
    assert "NonFiniteError" in done.stderr and "rewards" in done.stderr, done.stderr[-3000:]
    run_dirs = list((tmp_path / "runs").glob("*/*/*"))
    assert len(run_dirs) == 1, run_dirs
    state = load_checkpoint(latest_checkpoint(run_dirs[0]))
    assert state["iteration"] == 1
    for model in state["models"].values():
        assert all(torch.isfinite(t).all() for t in model.values())
