"""GAE against hand-computed values, and the PPO / A2C update mechanics."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn

from warp_drive.training.ppo import (Batch, PPOSettings, UpdateHooks, ValueNormalizer, compute_gae, explained_variance,
                                     ppo_update)

GAMMA, LAM = 0.9, 0.8
REWARDS = torch.tensor([[1.0], [2.0], [3.0]])
VALUES = torch.tensor([[0.5], [1.0], [1.5]])


def gae(next_values, terminated, ended):
    t = lambda xs: torch.tensor(xs, dtype=torch.float32).reshape(3, 1)  # noqa: E731
    return compute_gae(REWARDS, VALUES, t(next_values), t(terminated).bool(), t(ended).bool(), GAMMA, LAM)


def test_gae_without_episode_end_bootstraps_from_the_next_state():
    # delta_t = r_t + g V(s_t+1) - V(s_t):  1.4, 2.35, 3.3 (bootstrap V(s_3) = 2.0)
    adv, ret = gae([1.0, 1.5, 2.0], [0, 0, 0], [0, 0, 0])
    expected = [1.4 + 0.72 * (2.35 + 0.72 * 3.3), 2.35 + 0.72 * 3.3, 3.3]
    assert adv[:, 0].tolist() == pytest.approx(expected)
    assert ret[:, 0].tolist() == pytest.approx([a + v for a, v in zip(expected, [0.5, 1.0, 1.5])])


def test_termination_does_not_bootstrap_and_cuts_the_trace():
    # Step 1 terminates: delta_1 = 2 - 1.0 = 1 (whatever V says after it); A_0 sees only A_1.
    adv, _ = gae([1.0, 123.0, 2.0], [0, 1, 0], [0, 1, 0])
    assert adv[:, 0].tolist() == pytest.approx([1.4 + 0.72 * 1.0, 1.0, 3.3])


def test_truncation_bootstraps_from_the_final_observation_and_cuts_the_trace():
    # Step 1 is truncated; V(final obs) = 5: delta_1 = 2 + 0.9 * 5 - 1 = 5.5; A_1 does not see step 2.
    adv, _ = gae([1.0, 5.0, 2.0], [0, 0, 0], [0, 1, 0])
    assert adv[:, 0].tolist() == pytest.approx([1.4 + 0.72 * 5.5, 5.5, 3.3])


def test_lambda_one_gives_discounted_returns_to_the_bootstrap():
    adv, ret = compute_gae(REWARDS, VALUES, torch.tensor([[1.0], [1.5], [2.0]]), torch.zeros(3, 1, dtype=torch.bool),
                           torch.zeros(3, 1, dtype=torch.bool), GAMMA, 1.0)
    assert ret[0, 0].item() == pytest.approx(1 + 0.9 * 2 + 0.81 * 3 + 0.729 * 2.0)


class TinyPolicy(nn.Module):
    """A categorical policy over 3 actions with a value head, returning (dist, value) like ActorCritic."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.pi = nn.Linear(4, 3)
        self.v = nn.Linear(4, 1)

    def forward(self, obs):
        return Dist(torch.distributions.Categorical(logits=self.pi(obs))), self.v(obs).squeeze(-1)


class Dist:
    def __init__(self, d):
        self.d = d

    def log_prob(self, actions):
        return self.d.log_prob(actions[:, 0])

    def entropy(self):
        return self.d.entropy()


def make_batch(model, n=256, stale=0.0):
    g = torch.Generator().manual_seed(1)
    obs = torch.randn(n, 4, generator=g)
    with torch.no_grad():
        dist, values = model(obs)
        actions = dist.d.sample()[:, None]
        logprobs = dist.log_prob(actions) - stale
    advantages = torch.randn(n, generator=g) * 5
    return Batch(obs, actions, logprobs, values, advantages, values + advantages)


def update(model, batch, algorithm="PPO", lr=0.5, **kw):
    args = dict(algorithm=algorithm, clip_param=0.05, clip_value_loss=False, entropy_coef=0.0, vf_coef=0.5,
                max_grad_norm=None, normalize_advantage=True, num_epochs=2, num_minibatches=4, target_kl=None)
    args.update(kw)
    return ppo_update(model, torch.optim.SGD(model.parameters(), lr=lr), batch, PPOSettings(**args),
                      UpdateHooks(generator=torch.Generator().manual_seed(0)))


def test_ppo_ratio_moves_after_the_first_minibatch_and_the_clip_engages():
    model = TinyPolicy()
    metrics = update(model, make_batch(model))
    # The first minibatch starts at ratio 1 exactly; only later minibatches can be clipped.
    assert metrics["clipfrac"] > 0 and metrics["approx_kl"] > 0
    assert metrics["updates"] == 8


def test_ppo_uses_the_stored_behaviour_logprobs():
    model = TinyPolicy()
    metrics = update(model, make_batch(model, stale=0.5), num_epochs=1, num_minibatches=1, lr=0.0)
    # One step with lr 0: the ratio is exactly e^0.5 everywhere, all of it outside the clip range.
    assert metrics["clipfrac"] == pytest.approx(1.0)
    assert metrics["approx_kl"] == pytest.approx((torch.tensor(0.5).exp() - 1 - 0.5).item(), rel=1e-5)


def test_target_kl_stops_the_epochs_early():
    model = TinyPolicy()
    metrics = update(model, make_batch(model), num_epochs=10, target_kl=1e-6)
    assert metrics["updates"] < 40


def test_a2c_is_one_full_batch_policy_gradient_step():
    model = TinyPolicy()
    batch = make_batch(model)
    reference = TinyPolicy()
    reference.load_state_dict(model.state_dict())
    metrics = update(model, batch, algorithm="A2C", num_epochs=1, num_minibatches=1, lr=0.1, normalize_advantage=False)
    assert metrics["updates"] == 1
    dist, value = reference(batch.obs)
    loss = -(batch.advantages * dist.log_prob(batch.actions)).mean() + 0.5 * 0.5 * ((value - batch.returns) ** 2).mean()
    loss.backward()
    with torch.no_grad():
        for p, q in zip(reference.parameters(), model.parameters()):
            torch.testing.assert_close(p - 0.1 * p.grad, q)


def test_value_clipping_uses_the_rollout_values():
    model = TinyPolicy()
    batch = make_batch(model)
    # The rollout's values sit 1 below the current ones and the returns far above: the clipped value
    # (old + 0.05) is further from the return than the current value, so the pessimistic max picks it.
    shifted = Batch(batch.obs, batch.actions, batch.logprobs, batch.values - 1.0, batch.advantages,
                    batch.values + 10.0)
    free = update(TinyPolicy(), shifted, lr=0.0, num_epochs=1, num_minibatches=1)
    clipped = update(TinyPolicy(), shifted, lr=0.0, num_epochs=1, num_minibatches=1, clip_value_loss=True)
    assert free["value_loss"] == pytest.approx(0.5 * 10.0**2, rel=1e-4)
    assert clipped["value_loss"] == pytest.approx(0.5 * 10.95**2, rel=1e-4)


def test_explained_variance():
    target = torch.tensor([1.0, 2.0, 3.0, 4.0])
    assert explained_variance(target, target) == pytest.approx(1.0)
    assert explained_variance(torch.full((4,), 2.5), target) == pytest.approx(0.0)


def count_host_reads(monkeypatch) -> dict:
    """Count the ways a tensor's value reaches Python (each one is a host sync on a GPU)."""
    reads = {"n": 0}
    for name in ("tolist", "item", "__float__", "__bool__", "__int__", "numpy"):
        original = getattr(torch.Tensor, name)

        def counted(self, *args, _original=original, **kwargs):
            reads["n"] += 1
            return _original(self, *args, **kwargs)

        monkeypatch.setattr(torch.Tensor, name, counted)
    return reads


class UncheckedTinyPolicy(TinyPolicy):
    """TinyPolicy without torch.distributions' argument checks, which read the
    device themselves (the trainer's own ActionDistribution has none)."""

    def forward(self, obs):
        logits = self.pi(obs)
        return Dist(torch.distributions.Categorical(logits=logits, validate_args=False)), self.v(obs).squeeze(-1)


def test_the_update_reads_the_device_a_fixed_number_of_times_however_many_minibatches(monkeypatch):
    """Metrics and the non-finite check come to the host once per update, not once
    per minibatch: a read per minibatch makes the host wait for the GPU before it
    can queue the next minibatch's kernels. 1 minibatch and 4 epochs x 8 minibatches
    must read alike."""
    model = UncheckedTinyPolicy()
    batch = make_batch(model)
    reads = count_host_reads(monkeypatch)
    counts = []
    for epochs, minibatches in ((1, 1), (4, 8)):
        reads["n"] = 0
        metrics = update(model, batch, num_epochs=epochs, num_minibatches=minibatches, lr=0.01)
        assert metrics["updates"] == epochs * minibatches
        counts.append(reads["n"])
    assert counts[0] == counts[1], counts


def test_the_deferred_metrics_are_the_means_of_every_minibatch():
    """The one read at the end returns what a read per minibatch would: each
    metric the mean over the minibatches (checked against the same update run
    step by step here)."""
    torch.manual_seed(0)
    model, reference = TinyPolicy(), TinyPolicy()
    reference.load_state_dict(model.state_dict())
    batch = make_batch(model)
    metrics = update(model, batch, num_epochs=1, num_minibatches=1, lr=0.0)
    with torch.no_grad():
        dist, value = reference(batch.obs)
    entropy = dist.entropy().mean()
    assert metrics["entropy"] == pytest.approx(float(entropy), rel=1e-6)
    assert metrics["value_loss"] == pytest.approx(float(0.5 * ((value - batch.returns) ** 2).mean()), rel=1e-6)
    two = update(model, batch, num_epochs=2, num_minibatches=1, lr=0.0)  # lr 0: both steps see the same model
    assert two["updates"] == 2 and two["value_loss"] == pytest.approx(metrics["value_loss"], rel=1e-6)


def test_value_normalizer_merges_batches_exactly_and_inverts():
    rng = np.random.default_rng(0)
    batches = [torch.tensor(rng.normal(-300.0, 40.0, size=n)) for n in (7, 100, 1)]
    norm = ValueNormalizer()
    for b in batches:
        norm.update(b.float())
    seen = torch.cat(batches).float().double().numpy()
    assert float(norm.mean) == pytest.approx(seen.mean(), rel=1e-9) and float(norm.var) == pytest.approx(seen.var(),
                                                                                                           rel=1e-9)
    x = torch.tensor([-400.0, -300.0, 0.0])
    assert torch.allclose(norm.denormalize(norm.normalize(x)), x, rtol=1e-6)
    assert abs(float(norm.normalize(torch.tensor([float(seen.mean())])))) < 1e-6


@pytest.mark.parametrize("max_norm", [0.05, 1e9, float("inf")])
def test_clip_grad_norm_matches_torch_bit_for_bit(max_norm):
    from warp_drive.training.optim import clip_grad_norm

    torch.manual_seed(0)
    models = [torch.nn.Sequential(torch.nn.Linear(5, 16), torch.nn.Tanh(), torch.nn.Linear(16, 3)) for _ in range(2)]
    models[1].load_state_dict(models[0].state_dict())
    x = torch.randn(32, 5)
    for m in models:
        m(x).pow(3).sum().backward()
    ours = clip_grad_norm(list(models[0].parameters()), max_norm)
    theirs = torch.nn.utils.clip_grad_norm_(models[1].parameters(), max_norm)
    assert torch.equal(ours, theirs)
    for a, b in zip(models[0].parameters(), models[1].parameters()):
        assert torch.equal(a.grad, b.grad)
    if max_norm == 0.05:  # it did clip
        assert torch.linalg.vector_norm(torch.stack([p.grad.norm() for p in models[0].parameters()])) < ours
