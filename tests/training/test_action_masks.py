"""Action masks: an env's ``action_mask`` is honoured by the distribution, the device sampler, the
trainer's rollouts, greedy episodes and the PPO update, on both cpu executors (real kernels).

The fixture env (``tests/kernels/masked_choice.cu``) draws a new mask for every agent at every
step, a quarter of its rows with a single legal action, and counts every masked action chosen.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
import torch
from gymnasium import spaces

from warp_drive.runtime.data_feed import DataFeed
from warp_drive.env.environment import ACTION_MASK, TRUNCATED, Environment
from warp_drive.env.registry import register_env
from warp_drive.training.config import load_config
from warp_drive.training.models.distribution import MASKED_LOGIT, ActionDistribution
from warp_drive.training.run import build
from warp_drive.env.wrapper import EnvWrapper

KERNEL = Path(__file__).parents[1] / "kernels" / "masked_choice.cu"


def _mix(x: np.ndarray) -> np.ndarray:
    x = x.astype(np.uint32)
    x ^= x >> np.uint32(16)
    x *= np.uint32(0x7FEB352D)
    x ^= x >> np.uint32(15)
    x *= np.uint32(0x846CA68B)
    x ^= x >> np.uint32(16)
    return x


class MaskedChoice(Environment):
    """The fixture env of the module docstring; the NumPy reference mirrors the kernel."""

    name = "MaskedChoice"
    cuda_source = str(KERNEL)
    step_kernel = "MaskedChoiceStep"

    def __init__(self, num_agents: int = 10, num_actions: int = 6, episode_length: int = 100,
                 mask_width: int | None = None, mask_dtype=np.int32):
        self.num_agents, self.num_actions, self.episode_length = int(num_agents), int(num_actions), int(episode_length)
        self.mask_width, self.mask_dtype = mask_width or self.num_actions, mask_dtype  # wrong ones for the errors

    def observation_space(self, agent_id: int):
        return spaces.Box(0.0, 1.0, shape=(self.num_actions,), dtype=np.float32)

    def action_space(self, agent_id: int):
        return spaces.Discrete(self.num_actions)

    def get_data_dictionary(self, num_envs: int) -> DataFeed:
        shape = (num_envs, self.num_agents, self.num_actions)
        feed = DataFeed()
        feed.add_data("sampled_actions", np.zeros(shape[:2], np.int32))
        feed.add_data(ACTION_MASK, np.ones((*shape[:2], self.mask_width), self.mask_dtype),
                      save_copy_and_apply_at_reset=True)
        feed.add_data("observations", np.ones(shape, np.float32), save_copy_and_apply_at_reset=True)
        feed.add_data("rewards", np.zeros(shape[:2], np.float32))
        feed.add_data("illegal_actions", np.zeros(shape[:2], np.int32))
        feed.add_data("n_actions", self.num_actions)
        return feed

    def reference_step(self, arrays: dict) -> None:
        arrays["_timestep_"] += 1
        t = arrays["_timestep_"]
        mask, actions = arrays[ACTION_MASK], arrays["sampled_actions"]
        E, N, A = mask.shape
        highest = A - 1 - np.argmax(mask[..., ::-1] != 0, axis=-1)
        chosen_legal = np.take_along_axis(mask, actions[..., None], -1)[..., 0] != 0
        arrays["illegal_actions"] += (~chosen_legal).astype(np.int32)
        arrays["rewards"][...] = (actions == highest).astype(np.float32)
        env = np.arange(E, dtype=np.uint32)[:, None]
        agent = np.arange(N, dtype=np.uint32)[None, :]
        h = _mix(env * np.uint32(7919) + _mix(agent * np.uint32(104729) + _mix(t.astype(np.uint32)[:, None])))
        single = (h & np.uint32(3)) == 0
        i = np.arange(A, dtype=np.uint32)
        random_bits = ((_mix(h[..., None] + i) >> np.uint32(3)) & np.uint32(1)).astype(np.int32)
        one_hot = (i == ((h >> np.uint32(2)) % np.uint32(A))[..., None]).astype(np.int32)
        new = np.where(single[..., None], one_hot, random_bits)
        empty = new.sum(-1) == 0
        fallback = (i == (h % np.uint32(A))[..., None]).astype(np.int32)
        mask[...] = np.where(empty[..., None], fallback, new)
        arrays["observations"][...] = mask.astype(np.float32)
        arrays["_done_"][...] = np.where(t >= arrays["episode_length"], TRUNCATED, 0)


register_env("MaskedChoice", MaskedChoice, overwrite=True)


def masked_config(backend: str, num_envs: int, *overrides: str):
    return load_config("dummy_env", [f"trainer.backend={backend}", f"trainer.num_envs={num_envs}",
                                     "env.name=MaskedChoice", "env.config={}", *overrides])


# ------------------------------------------------------------------------------------------ the distribution
def test_masked_distribution_gives_masked_actions_probability_zero_and_stays_finite():
    logits = torch.randn(64, 6, requires_grad=True)
    mask = torch.rand(64, 6) < 0.5
    mask[torch.arange(64), torch.randint(0, 6, (64,))] = True  # every row keeps a legal action
    mask[:8] = False
    mask[:8, 2] = True  # single-legal-action rows
    dist = ActionDistribution(logits=[logits]).masked(mask)
    probs = dist.probs_per_head()[0]
    assert bool((probs[~mask] == 0).all()) and torch.allclose(probs.sum(-1), torch.ones(64))
    assert bool((probs[:8, 2] == 1).all())
    assert bool((dist.mode()[..., 0] == probs.argmax(-1)).all()) and bool(mask.gather(1, dist.mode()).all())
    drawn = dist.sample(torch.Generator().manual_seed(0))
    assert bool(mask.gather(1, drawn).all())
    entropy, logp = dist.entropy(), dist.log_prob(drawn)
    assert bool(torch.isfinite(entropy).all()) and bool(torch.isfinite(logp).all())
    assert bool((entropy[:8] == 0).all())  # one legal action: no uncertainty
    (entropy.sum() - logp.sum()).backward()
    assert bool(torch.isfinite(logits.grad).all()) and bool((logits.grad[~mask] == 0).all())
    assert MASKED_LOGIT > torch.finfo(torch.float32).min  # finite, so log-softmax never reaches -inf


def test_masked_distribution_refuses_a_mask_of_another_width():
    with pytest.raises(ValueError, match=r"action mask of shape \(4, 5\) does not match batch \(4,\) with heads of \[6\]"):
        ActionDistribution(logits=[torch.zeros(4, 6)]).masked(torch.ones(4, 5))


# ------------------------------------------------------------------------------------------ the wrapper
def test_a_mask_of_the_wrong_shape_or_dtype_fails_at_construction_naming_it():
    with pytest.raises(ValueError, match=r"'action_mask' is int32 \(2, 3, 4\); expected int32 \(2, 3, 6\)"):
        EnvWrapper(MaskedChoice(num_agents=3, mask_width=4), 2, backend="cpu")
    with pytest.raises(ValueError, match=r"'action_mask' is float32 .* expected int32"):
        EnvWrapper(MaskedChoice(num_agents=3, mask_dtype=np.float32), 2, backend="cpu")


def test_check_actions_names_a_masked_choice(env_backend):
    wrapper = EnvWrapper(MaskedChoice(num_agents=3), 2, backend=env_backend, seed=0)
    wrapper.action_mask[1, 2] = torch.tensor([1, 1, 0, 1, 1, 1], dtype=torch.int32)
    wrapper.actions[1, 2] = 2
    with pytest.raises(ValueError, match=r"agent 2 of env 1 chose action 2, which its 'action_mask' row "
                                         r"\[1, 1, 0, 1, 1, 1\] masks"):
        wrapper.check_actions()
    wrapper.actions[1, 2] = 3
    wrapper.check_actions()  # legal now


def test_the_kernel_matches_its_reference(env_backend):
    from warp_drive.env.consistency import check

    check(MaskedChoice, {"num_agents": 5, "episode_length": 15}, num_envs=4, num_episodes=2, backend=env_backend, seed=3)


# ------------------------------------------------------------------------------------------ the trainer
@pytest.mark.parametrize("backend", ["cpu", "cpu-gpu"])
@pytest.mark.slow  # a million samples (over ~1.5 s: the full suite, not the fast tier)
def test_a_million_sampled_and_greedy_actions_hold_no_masked_one(backend):
    """1000 envs x 10 agents x 100 steps, sampled by the device sampler, then greedy."""
    trainer = build(masked_config(backend, 1000, "trainer.rollout_length=100", "trainer.total_steps=100000"))
    illegal = trainer.env.data_manager.data_on_device_via_torch("illegal_actions")
    masks = trainer.env.action_mask
    trainer.collect_rollout()
    single = trainer.rollout.buffers["shared"]["masks"].sum(-1) == 1
    # A quarter of the rows are made single; of the others, 7 in 64 draw one or no legal action: 0.33 in all.
    assert 0.3 < float(single.float().mean()) < 0.36
    assert int(illegal.sum()) == 0 and masks is not None
    trainer.run_episodes(greedy=True)  # another 10^6 choices, by argmax
    assert int(illegal.sum()) == 0


def test_ppo_updates_stay_finite_and_recompute_the_behaviour_log_probs():
    trainer = build(masked_config("cpu", 16, "trainer.rollout_length=32", "trainer.total_steps=2048",
                                  "policy.shared.num_epochs=2", "policy.shared.num_minibatches=4"))
    p = trainer.policies["shared"]
    trainer.collect_rollout()
    buf = trainer.rollout.buffers[p.tag]
    with torch.no_grad():  # before any update, the stored masks give back the stored log-probabilities
        dist, _ = p.model(buf["obs"].reshape(-1, p.obs_dim))
        again = dist.masked(buf["masks"].reshape(-1, 6)).log_prob(buf["actions"].reshape(-1, 1))
        unmasked = dist.log_prob(buf["actions"].reshape(-1, 1))
    assert float((again - buf["logprobs"].reshape(-1)).abs().max()) <= 1e-5
    assert float((unmasked - buf["logprobs"].reshape(-1)).abs().max()) > 1e-3  # the masks do matter
    metrics = trainer.end_iteration(trainer.update())
    for _ in range(3):
        metrics = trainer.iterate()
    losses = {k: v for k, v in metrics.items() if k.startswith("losses/")}
    assert losses and all(math.isfinite(v) for v in losses.values()), losses
    assert int(trainer.env.data_manager.data_on_device_via_torch("illegal_actions").sum()) == 0
