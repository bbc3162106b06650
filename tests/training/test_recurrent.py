"""Recurrent policies (``model.type: gru``): hidden states on the device, zeroed where an episode ended,
PPO over sequence chunks replayed from the stored states, and a memory task that only memory solves
(cpu executor, real kernels, real training)."""

from __future__ import annotations

import copy
from pathlib import Path

import numpy as np
import pytest
import torch
from gymnasium import spaces

from warp_drive.runtime.data_feed import DataFeed
from warp_drive.env.environment import TERMINATED, Environment
from warp_drive.env.registry import register_env
from warp_drive.training.config import ConfigError, RunConfig, load_config
from warp_drive.training.policies import policy_obs
from warp_drive.training.run import build
from warp_drive.training.ppo.recurrent import chunk_states, episode_starts, rollout_batch, update_units

KERNEL = Path(__file__).parents[1] / "kernels" / "memory_cue.cu"


class MemoryCue(Environment):
    """A cue in the first observation, recalled ``delay`` steps later (tests/kernels/memory_cue.cu)."""

    name = "MemoryCue"
    cuda_source = str(KERNEL)
    step_kernel = "MemoryCueStep"

    def __init__(self, num_agents: int = 2, delay: int = 3):
        self.num_agents, self.delay = int(num_agents), int(delay)
        self.episode_length = self.delay + 1

    def observation_space(self, agent_id: int):
        return spaces.Box(0.0, 1.0, shape=(3,), dtype=np.float32)

    def action_space(self, agent_id: int):
        return spaces.Discrete(2)

    def get_data_dictionary(self, num_envs: int) -> DataFeed:
        E, n = num_envs, self.num_agents
        feed = DataFeed()
        feed.add_data("sampled_actions", np.zeros((E, n), np.int32))
        feed.add_data("observations", np.zeros((E, n, 3), np.float32), save_copy_and_apply_at_reset=True)
        feed.add_data("rewards", np.zeros((E, n), np.float32))
        feed.add_data("cue", np.zeros((E, n), np.int32), save_copy_and_apply_at_reset=True)
        feed.add_data("delay", self.delay)
        return feed

    def get_reset_pools(self, pool_size: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
        cue = rng.integers(0, 2, size=(pool_size, self.num_agents)).astype(np.int32)
        obs = np.zeros((pool_size, self.num_agents, 3), np.float32)
        obs[..., 0], obs[..., 1] = cue == 0, cue == 1
        return {"cue": cue, "observations": obs}  # same-size pools: the same row per env

    def reference_step(self, a: dict) -> None:
        a["_timestep_"] += 1
        t = a["_timestep_"][:, None]
        judged = t == a["delay"] + 1
        a["rewards"][...] = (judged & (a["sampled_actions"] == a["cue"])).astype(np.float32)
        a["observations"][...] = 0.0
        a["observations"][..., 2] = (t == a["delay"]).astype(np.float32)
        a["_done_"][...] = np.where(a["_timestep_"] > a["delay"], TERMINATED, 0)


register_env("MemoryCue", MemoryCue, overwrite=True)


def memory_config(model_type: str, total_steps: int, backend: str = "cpu") -> RunConfig:
    return RunConfig.from_dict({
        "name": "memory_cue", "env": {"name": "MemoryCue", "config": {"num_agents": 2, "delay": 3}},
        "trainer": {"num_envs": 64, "rollout_length": 16, "total_steps": total_steps, "seed": 0, "backend": backend},
        "policy": {"shared": {"algorithm": "PPO", "lr": 3e-3, "num_epochs": 4, "num_minibatches": 4,
                              "model": {"type": model_type, "fc_dims": [32], "gru_hidden": 32}}},
    })


def cartpole_gru(*overrides):
    return build(load_config("cartpole", ["trainer.backend=cpu", "trainer.num_envs=16", "trainer.rollout_length=32",
                                          "trainer.total_steps=8192", "policy.shared.model.type=gru", *overrides]))


# ---------------------------------------------------------------------- the fixture env
def test_the_memory_kernel_matches_its_reference(env_backend):
    from warp_drive.env.consistency import check

    report, = check(MemoryCue, {"num_agents": 3, "delay": 2}, num_envs=5, num_episodes=3, backend=env_backend)
    assert report.terminated == 15 and "cue" in report.arrays


# ---------------------------------------------------------------------- units of an update
def test_update_units_keep_each_step_of_each_agent_where_the_model_expects_it():
    T, E, n, L = 6, 3, 2, 3
    code = torch.tensor([[t * 100 + e * 10 + i for e in range(E) for i in range(n)] for t in range(T)])  # (T, E * n)
    assert update_units(code, E, n, False, None).tolist() == code.reshape(-1).tolist()
    per_env = update_units(code, E, n, True, None)  # (T * E, n)
    assert per_env[1 * E + 2].tolist() == [120, 121]  # step 1, env 2: both agents
    seq = update_units(code, E, n, False, L)  # (C * E * n, L)
    assert seq[1 * E * n + 2 * n + 1].tolist() == [321, 421, 521]  # chunk 1, env 2, agent 1: steps 3..5
    seq_per_env = update_units(code, E, n, True, L)  # (C * E, L, n)
    assert seq_per_env[0 * E + 1].tolist() == [[10, 11], [110, 111], [210, 211]]
    states = torch.arange(2 * E * n).reshape(2, E * n, 1, 1).float()  # (C, E * n, K, H)
    assert chunk_states(states, E, n, False)[E * n + 3].item() == states[1, 3].item()
    assert chunk_states(states, E, n, True)[E + 1, 1].item() == states[1, 1 * n + 1].item()
    ended = torch.tensor([[False, True], [True, False], [False, False]])
    assert episode_starts(ended).tolist() == [[False, False], [False, True], [True, False]]
    with pytest.raises(ValueError, match="rollout of 6 steps does not split into sequences of 4"):
        update_units(code, E, n, False, 4)


# ---------------------------------------------------------------------- hidden states on the device
def test_a_done_env_restarts_from_a_zero_state_and_the_other_envs_keep_theirs():
    trainer = cartpole_gru("trainer.rollout_length=1")  # one step per collect_rollout
    p = trainer.policies["shared"]
    hidden = trainer.algorithm.states["shared"].recurrence.hidden
    assert hidden.shape == (16, 2, 64) and hidden.device == trainer.device
    for _ in range(200):
        before, obs = hidden.clone(), policy_obs(trainer.env, p).clone()
        trainer.collect_rollout()
        done = trainer.rollout.done[0] > 0
        if bool(done.any()) and not bool(done.all()):
            break
    else:
        pytest.fail("no step ended some envs but not all")
    with torch.no_grad():
        _, _, advanced = p.model(obs, before)
    assert torch.count_nonzero(hidden[done]) == 0
    assert torch.equal(hidden[~done], advanced[~done]) and torch.count_nonzero(hidden[~done]) > 0
    with torch.no_grad():  # the done envs' next forward is a forward from the zero state
        now = policy_obs(trainer.env, p)
        dist, value, _ = p.model(now, hidden)
        fresh_dist, fresh_value, _ = p.model(now, torch.zeros_like(hidden))
    assert torch.equal(dist.logits[0][done], fresh_dist.logits[0][done]) and torch.equal(value[done], fresh_value[done])


@pytest.mark.parametrize("variant", ["cartpole, shared weights", "simple_spread, per-agent weights, MAPPO"])
def test_replayed_chunks_give_the_behaviour_log_probs_across_episode_ends(variant):
    if variant.startswith("cartpole"):
        trainer = cartpole_gru("policy.shared.sequence_length=8")
    else:
        trainer = build(load_config("simple_spread_mappo", [
            "trainer.backend=cpu", "trainer.num_envs=8", "trainer.rollout_length=20", "trainer.total_steps=1600",
            "env.config.episode_length=7", "policy.shared.model.type=gru", "policy.shared.share=agent",
            "policy.shared.sequence_length=10"]))
    for _ in range(3):  # a policy that has learnt something depends on its memory
        trainer.iterate()
    trainer.collect_rollout()
    p = trainer.policies["shared"]
    buf = trainer.rollout.buffers[p.tag]
    batch = rollout_batch(buf, p, trainer.num_envs, trainer.algorithm.states[p.tag].recurrence, buf["values"],
                          buf["values"], buf["values"])
    assert bool(batch.starts[:, 1:].any()), "some chunk should cross an episode end"
    with torch.no_grad():
        dist, _ = p.model.unroll(batch.obs, batch.hidden, batch.starts)
        replayed = dist.log_prob(batch.actions)
        assert float((replayed - batch.logprobs).abs().max()) <= 1e-5
        # The resets inside the chunks matter: replayed without them, the log-probabilities differ.
        dist, _ = p.model.unroll(batch.obs, batch.hidden, torch.zeros_like(batch.starts))
        assert float((dist.log_prob(batch.actions) - batch.logprobs).abs().max()) > 1e-3, "control"


def test_a_resumed_recurrent_run_continues_exactly_from_its_hidden_states():
    a = cartpole_gru("policy.shared.sequence_length=8")
    a.iterate()
    state = copy.deepcopy(a.state_dict())
    assert torch.count_nonzero(state["hidden_states"]["shared"]) > 0  # envs mid-episode remember something
    a.iterate()
    b = cartpole_gru("policy.shared.sequence_length=8")
    b.load_state_dict(state)
    b.iterate()
    for x, y in zip(a.policies["shared"].model.parameters(), b.policies["shared"].model.parameters()):
        assert torch.equal(x, y)
    assert torch.equal(a.algorithm.states["shared"].recurrence.hidden, b.algorithm.states["shared"].recurrence.hidden)


# ---------------------------------------------------------------------- what is refused
def test_a_sequence_length_that_does_not_divide_the_rollout_is_refused_at_construction():
    with pytest.raises(ValueError, match=r"policy 'shared': sequence_length 5 does not divide "
                                         r"trainer.rollout_length 32"):
        cartpole_gru("policy.shared.sequence_length=5")
    with pytest.raises(ValueError, match=r"policy 'shared': sequence_length applies to recurrent models, and "
                                         r"'fully_connected' is not one"):
        cartpole_gru("policy.shared.sequence_length=8", "policy.shared.model.type=fully_connected")


def test_a_ddpg_policy_refuses_a_model_type_it_would_ignore():
    with pytest.raises(ConfigError, match=r"policy.shared.model.type: DDPG builds its own fully connected actor "
                                          r"and critic, so 'gru' would be ignored"):
        load_config("pendulum_ddpg", ["policy.shared.model.type=gru"])


# ---------------------------------------------------------------------- memory
@pytest.mark.slow
def test_a_gru_solves_the_memory_task_and_a_feed_forward_policy_stays_at_chance():
    """A cue shown at t = 0 and recalled at t = 3: greedy success over 64 envs x 2 agents."""
    success = {}
    for model_type in ("gru", "fully_connected"):
        trainer = build(memory_config(model_type, 30 * 64 * 16))
        for _ in range(trainer.num_iterations):
            trainer.iterate()
        success[model_type] = trainer.run_episodes(greedy=True)["mean_return"]["shared"]
    assert success["gru"] >= 0.95, success
    assert 0.3 <= success["fully_connected"] <= 0.7, success
