"""An env without a NumPy reference: it builds, trains, checkpoints, resumes exactly and steps on the host.

The reference is the porting oracle (the consistency checker's other side), not a tax on every env: without
one, ``Environment.reset``/``step`` run the env's own kernel, one replica on the cpu executor.
"""

from __future__ import annotations

import numpy as np
import pytest
from resume_check import assert_same_run, straight_and_resumed

from example_envs.dummy_env.dummy_env import DummyEnv
from warp_drive.env.environment import Environment
from warp_drive.env.registry import register_env
from warp_drive.training.config import load_config
from warp_drive.env.wrapper import EnvWrapper


class KernelOnly(DummyEnv):
    """DummyEnv as a user writes it with no reference: its kernel is all there is."""

    name = "KernelOnly"
    reference_step = Environment.reference_step


register_env("KernelOnly", KernelOnly, overwrite=True)


def test_has_reference_tells_the_two_apart():
    assert DummyEnv.has_reference() and not KernelOnly.has_reference()
    with pytest.raises(NotImplementedError, match="KernelOnly has no NumPy reference"):
        KernelOnly().reference_step({})


def test_the_host_api_runs_the_kernel_and_equals_the_reference_step_for_step():
    kernel, reference = KernelOnly(random_starts=False), DummyEnv(random_starts=False)
    obs_k, obs_r = kernel.reset(seed=3), reference.reset(seed=3)
    rng = np.random.default_rng(0)
    for _ in range(kernel.episode_length):
        np.testing.assert_array_equal(np.stack(list(obs_k.values())), np.stack(list(obs_r.values())))
        actions = rng.integers(0, 3, size=kernel.num_agents)
        obs_k, rew_k, done_k, info_k = kernel.step(actions)
        obs_r, rew_r, done_r, info_r = reference.step(actions)
        assert rew_k == rew_r and done_k == done_r and info_k == info_r
        if done_k["__all__"]:
            break
    assert done_k["__all__"]
    with pytest.raises(RuntimeError, match="the episode is over"):
        kernel.step(actions)


def test_the_host_replica_starts_as_env_0_of_a_wrapper_with_the_same_seed():
    env = KernelOnly()
    first = env.reset(seed=11)
    wrapper = EnvWrapper(KernelOnly, num_envs=1, backend="cpu", seed=11)
    np.testing.assert_array_equal(np.stack(list(first.values())), wrapper.obs.numpy()[0])
    env.single_env_arrays["values"][0, 0] = 0.0  # writable views of what the kernel reads
    env.step(np.full(env.num_agents, 1))
    assert env.single_env_arrays["values"][0, 0] == 0.0


@pytest.mark.slow
def test_an_env_without_a_reference_trains_checkpoints_and_resumes_exactly(tmp_path):
    def config(basedir, iterations):
        return load_config("dummy_env", ["env.name=KernelOnly", "trainer.backend=cpu", "trainer.num_envs=8",
                                         "trainer.rollout_length=16", f"trainer.total_steps={8 * 16 * iterations}",
                                         f"saving.basedir={basedir}", "saving.model_params_save_freq=1"])

    assert_same_run(*straight_and_resumed(config, tmp_path, tmp_path / "runs" / "killed"))


def test_the_consistency_checker_says_in_one_line_that_there_is_no_reference():
    from warp_drive.env.consistency import NoReferenceError, check

    with pytest.raises(NoReferenceError) as error:
        check(KernelOnly, num_envs=2, num_episodes=1)
    assert "\n" not in str(error.value) and "KernelOnly: no reference_step" in str(error.value)
