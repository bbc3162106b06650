"""An env's reset kernel draws its starts on the device (``Environment.reset_kernel``, warp_drive/services/reset_kernel.py).

RandomStart (``random_start_env.py``) has no twins and no pools: its reset kernel draws each agent's position
and each env's goal with Philox from ``(reset_seed, env, reset_count)`` and writes the first observation.
Before, starts came from twins (one) or pools (``reset_pool_size`` of them, host-drawn); a reset kernel was
only WarpDrive's ``Cuda<Name>Reset``, launched by hand.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from random_start_env import RandomStart
from resume_check import assert_same_run, straight_and_resumed
from warp_drive.runtime import philox
from warp_drive.env.consistency import ConsistencyError, check
from warp_drive.env.environment import Environment
from warp_drive.env.registry import register_env
from warp_drive.env.wrapper import EnvWrapper

KERNEL_WRITES = ("positions", "goal", "observations")

register_env("RandomStart", RandomStart, overwrite=True)


def state(wrapper: EnvWrapper) -> dict[str, np.ndarray]:
    dm = wrapper.data_manager
    return {name: dm.pull_data_from_device(name).copy() for name in dm.array_names}


def play(wrapper: EnvWrapper, steps: int, seed: int = 0) -> list[dict[str, np.ndarray]]:
    """``steps`` steps of random actions, done envs reset after each, and the state after every one."""
    rng = np.random.default_rng(seed)
    out = [state(wrapper)]
    for _ in range(steps):
        wrapper.actions.copy_(torch.from_numpy(rng.integers(0, 5, tuple(wrapper.actions.shape), dtype=np.int32)))
        wrapper.step_all_envs()
        wrapper.reset_only_done_envs()
        out.append(state(wrapper))
    return out


def test_the_numpy_twin_of_philox_gives_random123s_known_answers():
    kat = [((0, 0, 0, 0), (0, 0), (0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8)),
           ((0xFFFFFFFF,) * 4, (0xFFFFFFFF,) * 2, (0x408F276D, 0x41C83B0E, 0xA20BC7C6, 0x6D5451FD)),
           ((0x243F6A88, 0x85A308D3, 0x13198A2E, 0x03707344), (0xA4093822, 0x299F31D0),
            (0xD16CFE09, 0x94FDCCEB, 0x5001E420, 0x24126EA1))]
    for ctr, key, expected in kat:
        assert tuple(int(w) for w in philox.philox4x32_10(ctr, key)) == expected


def test_starts_drawn_on_the_device_are_distinct_over_100k_resets():
    """1000 envs x 100 forced resets: every start is new (a pool would repeat after reset_pool_size)."""
    wrapper = EnvWrapper(RandomStart, 1000, backend="cpu", seed=0)
    first_obs = []
    for _ in range(100):
        wrapper.reset_all_envs()
        first_obs.append(wrapper.obs.numpy().reshape(1000, -1).copy())
    rows = np.concatenate(first_obs)
    assert rows.shape == (100_000, 8)
    distinct = np.unique(rows.view(np.uint32), axis=0).shape[0]
    assert distinct >= 99_000, distinct
    xy = rows.reshape(-1, 2, 4)[..., :2]
    assert xy.min() >= -0.5 and xy.max() <= 0.5 and xy.std() > 0.25  # uniform in [-spawn, spawn]
    assert set(np.unique(rows[:, 2]).tolist()) == set(range(7))  # every goal index drawn
    assert (rows[:, 3] == 0).all()  # t / episode_length at the start


def test_the_first_start_is_the_documented_draw():
    """The first reset (construction's, reset_count 0) of env e holds wd_reset_*(seed, 0, e, k) (philox.py)."""
    wrapper = EnvWrapper(RandomStart, 5, backend="cpu", seed=123)
    envs = np.arange(5)[:, None]
    x = philox.reset_uniform_in(123, 0, envs, np.array([[1, 3]]), -0.5, 0.5)
    np.testing.assert_array_equal(wrapper.data_manager.pull_data_from_device("positions")[..., 0], x)
    np.testing.assert_array_equal(wrapper.data_manager.pull_data_from_device("goal"),
                                  philox.reset_int(123, 0, np.arange(5), 0, 7))


def test_starts_are_bit_identical_on_cpu_and_cpu_gpu():
    runs = [play(EnvWrapper(RandomStart, 16, backend=backend, seed=9), steps=30) for backend in ("cpu", "cpu-gpu")]
    assert np.unique(runs[0][0]["positions"]).size == 16 * 2 * 2  # drawn starts, not zeros equal on both
    resets = 0
    for step, (a, b) in enumerate(zip(*runs)):
        for name in a:
            np.testing.assert_array_equal(a[name], b[name], err_msg=f"{name} after step {step}")
        resets += int((a["_timestep_"] == 0).sum())
    assert resets > 16  # early terminations were reset too, not only the first start


def test_reseed_restarts_the_reset_kernels_draws():
    fresh = state(EnvWrapper(RandomStart, 6, backend="cpu", seed=5))
    wrapper = EnvWrapper(RandomStart, 6, backend="cpu", seed=5)
    play(wrapper, steps=15)
    wrapper.reseed(5)
    for name in (*KERNEL_WRITES, "_done_", "_timestep_"):  # actions and rewards are no start state
        np.testing.assert_array_equal(state(wrapper)[name], fresh[name], err_msg=name)
    wrapper.reseed(6)
    assert not np.array_equal(state(wrapper)["positions"], fresh["positions"])


def test_the_consistency_checker_compares_the_reset_with_reference_reset():
    report = check(RandomStart, num_envs=8, num_episodes=3, seed=0)[0]
    assert report.terminated > 0 and report.truncated > 0  # envs reset while others ran on

    class WrongReference(RandomStart):
        def reference_reset(self, arrays):
            super().reference_reset(arrays)
            arrays["goal"][np.flatnonzero(arrays["_done_"])] += 1

    with pytest.raises(ConsistencyError, match=r"reset kernel vs reference_reset\): array 'goal'"):
        check(WrongReference, num_envs=8, num_episodes=3, seed=0)


def test_the_consistency_checker_refuses_a_reset_kernel_that_touches_an_env_not_being_reset():
    class Planted(RandomStart):  # PlantedReset draws every env's goal, done or not
        reset_kernel = "PlantedReset"
        reference_reset = Environment.reference_reset  # without a reference: the untouched check alone

    with pytest.raises(ConsistencyError, match=r"reset changed 'goal' in envs that were not done"):
        check(Planted, num_envs=8, num_episodes=3, seed=0)


def test_a_reset_kernel_that_breaks_the_contract_is_refused_at_construction():
    def env(kernel, **attributes):
        return type(kernel, (RandomStart,), {"reset_kernel": kernel, **attributes})

    with pytest.raises(ValueError, match=r"NoDoneReset takes no done flags.*add 'const int\* done'"):
        EnvWrapper(env("NoDoneReset"), 2, backend="cpu")
    with pytest.raises(ValueError, match=r"'int reset_count'.*declare it 'unsigned long long reset_count'"):
        EnvWrapper(env("NarrowCountReset"), 2, backend="cpu")
    with pytest.raises(ValueError, match=r"reset_kernel 'RandomStartRest' is not defined"):
        EnvWrapper(env("RandomStartRest"), 2, backend="cpu")

    class Clash(RandomStart):
        def get_data_dictionary(self, num_envs):
            feed = super().get_data_dictionary(num_envs)
            feed.add_data("reset_seed", 3)
            return feed

    with pytest.raises(ValueError, match=r"'reset_seed' is the framework's name in a reset kernel"):
        EnvWrapper(Clash, 2, backend="cpu")


def test_what_the_reset_kernel_writes_is_checkpointed_state():
    """positions and goal have no twin and are in no written_arrays: the reset kernel writes them (non-const
    pointers), so a checkpoint restores them rather than refusing them as changed constants."""
    wrapper = EnvWrapper(RandomStart, 2, backend="cpu", seed=0)
    assert set(wrapper.reset_kernel_writes) == set(KERNEL_WRITES)
    assert not set(KERNEL_WRITES) & set(wrapper.constant_arrays())


class NoReferenceReset(RandomStart):
    reference_reset = Environment.reference_reset


@pytest.mark.parametrize("env_class", [RandomStart, NoReferenceReset], ids=["reference_reset", "cpu kernel"])
def test_the_host_api_starts_as_env_0_of_a_wrapper(env_class):
    """With reference_reset the host API draws the start in NumPy; without one it runs the reset kernel on the
    cpu executor. Both start as env 0 of EnvWrapper(seed=s), and reset() without a seed takes the next start."""
    env, wrapper = env_class(), EnvWrapper(env_class, 1, backend="cpu", seed=4)
    env.reset(seed=4)
    for name in KERNEL_WRITES:
        np.testing.assert_array_equal(env.single_env_arrays[name], wrapper.data_manager.pull_data_from_device(name))
    first = env.single_env_arrays["positions"].copy()
    env.step(np.zeros(env.num_agents, np.int64))
    env.reset()
    wrapper.reset_all_envs()  # the wrapper's second start (reset_count 1)
    np.testing.assert_array_equal(env.single_env_arrays["positions"],
                                  wrapper.data_manager.pull_data_from_device("positions"))
    assert not np.array_equal(env.single_env_arrays["positions"], first)
    assert int(env.single_env_arrays["_timestep_"][0]) == 0 and int(env.single_env_arrays["_done_"][0]) == 0


@pytest.mark.slow
def test_a_resumed_run_draws_the_starts_an_uninterrupted_one_would(tmp_path):
    """A 4-iteration run killed after iteration 2 and resumed ends as the uninterrupted run: the reset
    kernel's (seed, count) come back with the checkpoint, and its arrays are restored as state."""
    from warp_drive.training.config import load_config

    def config(basedir, iterations):
        return load_config("dummy_env", ["env.name=RandomStart", "env.config={}", "trainer.backend=cpu",
                                         "trainer.num_envs=8", "trainer.rollout_length=16",
                                         f"trainer.total_steps={8 * 16 * iterations}", f"saving.basedir={basedir}",
                                         "saving.model_params_save_freq=1"])

    a, b = straight_and_resumed(config, tmp_path, tmp_path / "runs" / "killed")
    assert_same_run(a, b)
    assert a["reset"] == b["reset"] and a["reset"]["counter"] > 4 * 16  # a reset call per step, and more
