"""Learning runs: each shipped algorithm reaches a return on the cpu executor that an untrained policy does not.

They are the slow tier's (each 8-25 s here) and live apart from the unit tests of ``tests/training/``.
"""

from __future__ import annotations

import pytest

from warp_drive.training.config import load_config
from warp_drive.training.ddpg import DDPG
from warp_drive.training.run import build
from warp_drive.training.vtrace import VTrace


def config(name, *overrides):
    return load_config(name, ["trainer.backend=cpu", *overrides])


@pytest.mark.slow
def test_cartpole_greedy_return_rises_past_195():
    trainer = build(config("cartpole", "trainer.total_steps=122880"))
    before = trainer.run_episodes(greedy=True)["mean_return"]["shared"]
    while trainer.iteration < trainer.num_iterations:
        trainer.iterate()
    after = trainer.run_episodes(greedy=True)["mean_return"]["shared"]
    assert before < 100 and after >= 195, (before, after)


@pytest.mark.slow
def test_vtrace_learns_cartpole_from_a_one_update_stale_behaviour_policy():
    """The small algorithm added on the Algorithm contract (training/vtrace.py) learns on the shipped CartPole
    config with only ``algorithm`` changed. Measured at 122,880 env steps, greedy: seed 1 52 -> 498, seed 2
    46 -> 288, seed 3 47 -> 9 (PPO on the same seeds: 2 -> 171, 3 -> 409): the seed is the config's."""
    trainer = build(config("cartpole", "trainer.total_steps=122880", "policy.shared.algorithm=VTRACE"))
    assert isinstance(trainer.algorithm, VTrace)
    before = trainer.run_episodes(greedy=True)["mean_return"]["shared"]
    while trainer.iteration < trainer.num_iterations:
        trainer.iterate()
    after = trainer.run_episodes(greedy=True)["mean_return"]["shared"]
    assert before < 100 and after >= 195, (before, after)


@pytest.mark.slow
def test_tag_continuous_taggers_learn_to_tag():
    trainer = build(config("tag_continuous_small", "trainer.num_envs=100", "trainer.total_steps=320000",
                           "policy.runner.to_train=false"))
    before = trainer.run_episodes(greedy=False)["mean_return"]["tagger"]
    while trainer.iteration < trainer.num_iterations:
        trainer.iterate()
    after = trainer.run_episodes(greedy=False)["mean_return"]["tagger"]
    assert after > before + 0.5, (before, after)


@pytest.mark.slow
def test_pendulum_ddpg_learns_above_minus_400():
    """25,600 env steps (about 10 s here); five seeds measured all end between -170 and -130 (greedy)."""
    trainer = build(config("pendulum_ddpg", "trainer.total_steps=25600"))
    assert isinstance(trainer.algorithm, DDPG)
    before = trainer.run_episodes(greedy=True)["mean_return"]["shared"]
    while trainer.iteration < trainer.num_iterations:
        trainer.iterate()
    after = trainer.run_episodes(greedy=True)["mean_return"]["shared"]
    assert before < -900 and after > -400 and after > before + 500, (before, after)


@pytest.mark.slow
def test_the_shipped_cartpole_config_solves_and_stops_itself(tmp_path):
    """`warp-drive train --config cartpole` (a child process) stops at the solved rule well inside its
    budget, and its greedy policy scores >= 475 over 100 episodes (benchmarks/learning.py: 5 seeds)."""
    from benchmarks.learning import run_ours

    result = run_ours(2, tmp_path)
    assert result["solved"], result
    assert result["env steps"] < load_config("cartpole").trainer.total_steps
