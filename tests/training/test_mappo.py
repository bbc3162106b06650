"""MAPPO: a centralised critic over the env's state arrays or the policy's agents' observations side by side
(``critic_input``), on the cpu executor with real kernels and real training."""

from __future__ import annotations

import math

import pytest
import torch

from warp_drive.training.config import load_config
from warp_drive.training.models.central_critic import CentralCritic
from warp_drive.training.policies import policy_obs
from warp_drive.training.ppo.critic import critic_input
from warp_drive.training.run import build


def config(name, *overrides):
    return load_config(name, ["trainer.backend=cpu", *overrides])


def small_tag(critic_input, *overrides):
    return config("tag_continuous_small", "trainer.num_envs=8", "trainer.rollout_length=16",
                  "trainer.total_steps=512", f"policy.tagger.critic_input={critic_input}",
                  f"policy.runner.critic_input={critic_input}", *overrides)


def test_the_state_critic_reads_the_envs_state_arrays_and_the_agent_index():
    trainer = build(small_tag("state"))
    env, E = trainer.env, trainer.num_envs
    assert env.state.shape == (E, 5 * env.num_agents)  # loc_x, loc_y, speed, direction, still_in_the_game
    for tag, p in trainer.policies.items():
        n = len(p.agent_ids)
        assert isinstance(p.model, CentralCritic) and p.model.critic_dim == 5 * env.num_agents + n
        expected = torch.cat([env.state.repeat_interleave(n, dim=0), torch.eye(n).repeat(E, 1)], dim=1)
        assert torch.equal(critic_input(trainer.env, p), expected)
    trainer.collect_rollout()
    tagger = trainer.policies["tagger"]
    # The recorded input of the last step is the state before that step: it differs from the state now.
    assert trainer.rollout.buffers["tagger"]["critic_obs"].shape[-1] == tagger.model.critic_dim
    assert not torch.equal(trainer.rollout.buffers["tagger"]["critic_obs"][-1], critic_input(trainer.env, tagger))


def test_concat_obs_gives_each_agent_all_the_policys_observations():
    trainer = build(small_tag("concat_obs"))
    p = trainer.policies["runner"]
    n, E = len(p.agent_ids), trainer.num_envs
    obs = policy_obs(trainer.env, p).reshape(E, n * p.obs_dim)
    row = critic_input(trainer.env, p)[3 * n + 1]  # env 3, the policy's agent 1
    assert torch.equal(row[: n * p.obs_dim], obs[3]) and row[n * p.obs_dim + 1] == 1 and row[-n:].sum() == 1


def test_concat_obs_too_wide_and_a_state_critic_without_state_are_refused_at_construction():
    with pytest.raises(ValueError, match=r"policy 'shared': critic_input: concat_obs gives the critic 600 agents x 2 "
                                         r"observations = 1200 inputs, above max_concat_obs_width \(1024\)"):
        build(config("dummy_env", "env.config.num_agents=600", "policy.shared.critic_input=concat_obs"))
    with pytest.raises(ValueError, match=r"critic_input: state needs the env's state, but CartPole declares no "
                                         r"state_arrays"):
        build(config("cartpole", "policy.shared.critic_input=state"))


@pytest.mark.parametrize("critic_input", ["state", "concat_obs"])
def test_mappo_trains_and_resumes_exactly(critic_input):
    trainer = build(small_tag(critic_input))
    uninterrupted = [trainer.iterate() for _ in range(3)]
    assert all(math.isfinite(m["losses/value_loss/tagger"]) for m in uninterrupted)
    first = build(small_tag(critic_input))
    first.iterate()
    resumed = build(small_tag(critic_input))
    resumed.load_state_dict(first.state_dict())
    later = [resumed.iterate() for _ in range(2)]
    for x, y in zip(uninterrupted[1:], later):
        assert x["losses/value_loss/tagger"] == y["losses/value_loss/tagger"]
        assert x["losses/policy_loss/tagger"] == y["losses/policy_loss/tagger"]


@pytest.mark.slow  # learns (over ~1.5 s: the full suite, not the fast tier)
def test_mappo_with_a_state_critic_learns_the_dummy_env():
    trainer = build(config("dummy_env", "policy.shared.critic_input=state", "policy.shared.value_normalization=true"))
    before = trainer.run_episodes(greedy=True)["mean_return"]["shared"]
    while trainer.iteration < trainer.num_iterations:
        trainer.iterate()
    after = trainer.run_episodes(greedy=True)["mean_return"]["shared"]
    assert after > before + 3.0, (before, after)


def test_agent_id_input_appends_each_agents_one_hot_index_to_what_the_actor_sees():
    trainer = build(small_tag("concat_obs", "policy.tagger.agent_id_input=true"))
    tagger, runner = trainer.policies["tagger"], trainer.policies["runner"]
    n, E = len(tagger.agent_ids), trainer.num_envs
    width = runner.obs_dim  # no agent index for the runners
    assert tagger.obs_dim == width + n and tagger.model.actor.obs_dim == width + n
    obs = policy_obs(trainer.env, tagger)
    assert torch.equal(obs[:, width:], torch.eye(n).repeat(E, 1))
    assert tagger.model.critic_dim == n * width + n  # the critic's observations come without the index
    assert critic_input(trainer.env, tagger).shape == (E * n, n * width + n)
    metrics = [trainer.iterate() for _ in range(2)]
    assert all(math.isfinite(m["losses/policy_loss/tagger"]) for m in metrics)
