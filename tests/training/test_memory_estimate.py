"""The up-front memory estimate of a training config (``training/runs/memory.py``): the pure sizing on its
own, the refusal's message, and ``warp-drive train`` refusing CartPole with ``episode_length=10**9`` at once
(it allocated a 16 GB log buffer, then would have recorded a billion-step episode for the GIF)."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest

from warp_drive.runtime.backends import get_backend
from warp_drive.training.config import ConfigError, available_configs, load_config
from warp_drive.training.runs.memory import (
    Item,
    MemoryEstimateError,
    PolicySizes,
    check_config,
    estimate,
    refuse_if_over,
)
from warp_drive.env.wrapper import make_env

GiB = 2**30


def test_estimate_sizes_each_allocation_from_the_config_sizes():
    shared = PolicySizes("shared", agents=3, obs_dim=10, action_bytes=8)
    ddpg = PolicySizes("ddpg", agents=1, obs_dim=4, action_bytes=4, replay_capacity=1000, action_dim=1)
    critic = PolicySizes("mappo", agents=2, obs_dim=5, action_bytes=8, critic_width=12)
    items = {i.what: i for i in estimate(num_envs=100, rollout_length=16, episode_length=499, env_fixed_bytes=64,
                                         env_bytes_per_env=40, policies=[shared, ddpg, critic],
                                         recorded_row_bytes=[16, 4])}
    assert items["env arrays"].nbytes == 64 + 40 * 100 and items["env arrays"].key == "trainer.num_envs"
    assert items["env arrays' host copies (feed, reset snapshots)"].nbytes == 2 * (64 + 40 * 100)
    # per agent and step: obs and final obs, the action, rewards/logprobs/values/advantages/returns
    assert items["rollout buffers of policy 'shared'"].nbytes == 16 * 100 * 3 * (2 * 10 * 4 + 8 + 20)
    assert items["rollout buffers of policy 'mappo'"].nbytes == 16 * 100 * 2 * (2 * 5 * 4 + 8 + 20 + 2 * 12 * 4)
    assert items["replay buffer of policy 'ddpg'"].nbytes == 1000 * (2 * 4 + 1 + 2) * 4
    assert items["replay buffer of policy 'ddpg'"].key == "policy.ddpg.replay_buffer_size"
    recorded = items["the episode recorded for the GIF"]
    assert recorded.nbytes == 500 * ((2 * 16 + 120) + (2 * 4 + 120)) and "episode_length" in recorded.key
    assert "the episode recorded for the GIF" not in {i.what for i in estimate(1, 1, 10**9, 0, 4, [shared])}
    sizes = [i.nbytes for i in estimate(100, 16, 499, 64, 40, [shared, ddpg, critic], [16, 4])]
    assert sizes == sorted(sizes, reverse=True)  # biggest first


def test_refusal_names_the_figure_the_biggest_item_and_the_key():
    items = [Item("rollout buffers of policy 'shared'", 3 * GiB, "device", "trainer.rollout_length or trainer.num_envs"),
             Item("env arrays", 2 * GiB, "device", "trainer.num_envs"),
             Item("the episode recorded for the GIF", 1 * GiB, "host", "env.config.episode_length")]
    refuse_if_over(items, {"host": 6 * GiB})  # the cpu executor: everything in host memory, 6 GiB fit
    with pytest.raises(MemoryEstimateError, match=r"needs at least 6\.0 GiB of host memory, more than the 5\.0 GiB "
                       r"available; the biggest item is rollout buffers of policy 'shared' \(3\.0 GiB\): lower "
                       r"trainer.rollout_length or trainer.num_envs"):
        refuse_if_over(items, {"host": 5 * GiB})
    with pytest.raises(MemoryEstimateError, match=r"12\.0 GiB of host memory \(2 processes\)"):
        refuse_if_over(items, {"host": 11 * GiB}, processes=2)
    # on a GPU the device items meet the GPU's free memory, the host ones the host's
    refuse_if_over(items, {"host": 1 * GiB, "device": 5 * GiB})
    with pytest.raises(MemoryEstimateError, match=r"5\.0 GiB of GPU memory, more than the 4\.0 GiB available"):
        refuse_if_over(items, {"host": 1 * GiB, "device": 4 * GiB})
    assert issubclass(MemoryEstimateError, ConfigError)  # the CLI prints it as one line, exit status 2


@pytest.mark.parametrize("name", available_configs())
def test_every_shipped_config_is_accepted(name):
    config = load_config(name, ["trainer.backend=cpu"])
    env = make_env(config.env.name, dict(config.env.config))
    items = check_config(config, env, get_backend("cpu"), record_episode=True)
    assert sum(i.nbytes for i in items) < GiB, items  # every shipped config is small


def test_check_config_measures_the_env_and_scales_it():
    config = load_config("cartpole", ["trainer.backend=cpu", "trainer.num_envs=1000"])
    env = make_env("CartPole", {})
    items = {i.what: i.nbytes for i in check_config(config, env, get_backend("cpu"), record_episode=True)}
    # state and observations (1 x 4 float32, each with its reset twin), actions, rewards
    assert items["env arrays"] == 1000 * (16 * 2 + 16 * 2 + 4 + 4)
    assert items["rollout buffers of policy 'shared'"] == 32 * 1000 * (2 * 4 * 4 + 8 + 20)
    assert items["the episode recorded for the GIF"] == 501 * (2 * 16 + 120)


@pytest.mark.slow  # a child process (over ~1.5 s: the full suite, not the fast tier)
def test_cartpole_with_a_billion_step_episode_is_refused_at_once_with_the_figure(tmp_path):
    started = time.monotonic()
    result = subprocess.run([sys.executable, "-m", "warp_drive", "train", "--config", "cartpole", "--no-progress",
                             "--backend", "cpu", "--set", "env.config.episode_length=1000000000",
                             f"saving.basedir={tmp_path}"], capture_output=True, text=True, timeout=120)
    err = result.stderr.strip().splitlines()
    assert result.returncode == 2 and len(err) == 1, result.stderr
    assert "needs at least" in err[0] and "GiB of host memory" in err[0] and "episode recorded for the GIF" in err[0]
    assert "lower env.config.episode_length" in err[0], err
    assert time.monotonic() - started < 60
