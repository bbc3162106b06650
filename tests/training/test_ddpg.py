"""DDPG (training/ddpg/) on the cpu executor: its parts do what they claim (its learning run: tests/learning/)."""

from __future__ import annotations

import copy
import math

import pytest
import torch
from torch import nn

from warp_drive.env.environment import TERMINATED, TRUNCATED
from warp_drive.training.config import ConfigError, load_config
from warp_drive.training.ddpg import (
    DDPGModel,
    ReplayBuffer,
    actor_loss_of,
    critic_loss_of,
    nstep_transitions,
    soft_update,
)
from warp_drive.training.run import build, evaluate, train


def config(name="pendulum_ddpg", *overrides, basedir=None):
    extra = ["trainer.backend=cpu"] + ([f"saving.basedir={basedir}"] if basedir else [])
    return load_config(name, [*extra, *overrides])


def small(*overrides, **kwargs):
    """A few iterations that reach the gradient steps quickly (8 envs x 4 steps, warm-up of 2 iterations)."""
    return config("pendulum_ddpg", "trainer.num_envs=8", "trainer.rollout_length=4", "trainer.total_steps=320",
                  "policy.shared.warmup_steps=64", "policy.shared.batch_size=32",
                  "policy.shared.updates_per_iteration=4", "policy.shared.replay_buffer_size=1000", *overrides,
                  **kwargs)


# ---------------------------------------------------------------------------------------------- learning
def test_continuous_mountain_car_ddpg_config_trains_a_few_iterations():
    trainer = build(config("continuous_mountain_car_ddpg", "trainer.total_steps=20480",
                           "policy.shared.warmup_steps=5120"))
    metrics = [trainer.iterate() for _ in range(trainer.num_iterations)]
    assert "losses/critic_loss/shared" not in metrics[3]  # still warming up: 4 * 1024 env steps < 5120
    last = metrics[-1]
    assert math.isfinite(last["losses/critic_loss/shared"]) and last["losses/updates/shared"] == 16
    # 5-step returns: the last 4 steps wait for the next rollout's windows.
    assert last["replay/size/shared"] == 20480 - 4 * 64


# ---------------------------------------------------------------------------------------------- parts
def test_soft_update_moves_targets_by_tau():
    torch.manual_seed(0)
    online, target = nn.Linear(3, 2), nn.Linear(3, 2)
    expected = [(1 - 0.1) * t.detach().clone() + 0.1 * o.detach() for t, o in zip(target.parameters(),
                                                                                  online.parameters())]
    soft_update(target, online, 0.1)
    for got, want in zip(target.parameters(), expected):
        torch.testing.assert_close(got.detach(), want)
    soft_update(target, online, 1.0)
    for got, want in zip(target.parameters(), online.parameters()):
        assert torch.equal(got, want)


def _rows(n, start):
    values = torch.arange(start, start + n, dtype=torch.float32)
    return {"obs": values[:, None].repeat(1, 2), "actions": values[:, None], "rewards": values,
            "discounts": values, "next_obs": values[:, None].repeat(1, 2)}


def test_replay_buffer_wraps_and_keeps_the_newest():
    buffer = ReplayBuffer(5, obs_dim=2, action_dim=1, device="cpu")
    buffer.add(**_rows(3, 0))
    assert (buffer.pos, len(buffer)) == (3, 3)
    buffer.add(**_rows(4, 3))  # rows 3, 4 then wraps: 5, 6 overwrite 0, 1
    assert (buffer.pos, len(buffer)) == (2, 5)
    assert buffer.data["rewards"].tolist() == [5, 6, 2, 3, 4]
    buffer.add(**_rows(12, 100))  # more than the capacity: the last 5 only, in ring order
    assert (buffer.pos, len(buffer)) == (4, 5)
    assert sorted(buffer.data["rewards"].tolist()) == [107, 108, 109, 110, 111]
    assert buffer.data["rewards"][3].item() == 111  # the newest just before pos
    state = buffer.state_dict()
    other = ReplayBuffer(5, 2, 1, "cpu")
    other.load_state_dict(state)
    assert (other.pos, other.size) == (4, 5) and torch.equal(other.data["obs"], buffer.data["obs"])


def test_replay_buffer_samples_only_written_rows():
    buffer = ReplayBuffer(100, obs_dim=2, action_dim=1, device="cpu")
    buffer.add(**_rows(3, 1))
    batch = buffer.sample(500, torch.Generator().manual_seed(0))
    assert set(batch["rewards"].tolist()) == {1.0, 2.0, 3.0}
    assert torch.equal(batch["obs"][:, 0], batch["rewards"]) and torch.equal(batch["actions"][:, 0], batch["rewards"])


def test_actor_loss_gradient_reaches_the_actor_only():
    cfg = config().policy["shared"].model
    model = DDPGModel(3, 1, cfg)
    actor_loss_of(model, torch.randn(16, 3)).backward()
    assert all(p.grad is None for p in model.critic.parameters())
    assert any(p.grad is not None and p.grad.abs().sum() > 0 for p in model.actor.parameters())
    assert all(p.grad is None for p in [*model.actor_target.parameters(), *model.critic_target.parameters()])
    assert all(p.requires_grad for p in model.critic.parameters())  # unfrozen again for the critic's own loss


def test_trainer_critic_step_is_the_critic_loss_alone():
    """One DDPG gradient step moves the critic exactly as a critic-loss-only Adam step on the same minibatch."""
    trainer = build(small("policy.shared.updates_per_iteration=1"))
    while trainer.env_steps < 64:
        trainer.iterate()  # warm-up: fills the buffer, no gradient steps
    p = trainer.policies["shared"]
    trainer.collect_rollout()
    trainer.algorithm.store_rollout(p)
    reference = copy.deepcopy(p.model)
    reference_opt = torch.optim.Adam(reference.critic.parameters(), lr=trainer.algorithm.states[p.tag].critic_lr.value(trainer.env_steps))
    reference_opt.load_state_dict(copy.deepcopy(trainer.algorithm.states[p.tag].critic_optimizer.state_dict()))
    rng = trainer.algorithm.device_generator.get_state()
    trainer.algorithm.train_policy(p)
    trainer.algorithm.device_generator.set_state(rng)
    batch = trainer.algorithm.states[p.tag].replay.sample(p.config.batch_size, trainer.algorithm.device_generator)
    loss, _ = critic_loss_of(reference, batch)
    reference_opt.zero_grad()
    loss.backward()
    reference_opt.step()
    for got, want in zip(p.model.critic.parameters(), reference.critic.parameters()):
        torch.testing.assert_close(got, want)
    assert any(not torch.equal(a, b) for a, b in zip(p.model.actor.parameters(), reference.actor.parameters()))


def test_truncation_bootstraps_termination_does_not():
    gamma = 0.5
    L, B = 4, 3
    obs = torch.arange(L * B, dtype=torch.float32).reshape(L, B, 1)
    final_obs = 100 + obs
    actions = torch.zeros(L, B, 1)
    rewards = torch.ones(L, B)
    done = torch.zeros(L, B, dtype=torch.int32)
    done[1, 0] = TRUNCATED  # row 0: time limit after step 1
    done[1, 1] = TERMINATED  # row 1: terminated after step 1
    one = nstep_transitions(obs, actions, rewards, done, final_obs, 1, gamma)
    disc = one["discounts"].reshape(L, B)
    assert disc[1, 0] == gamma and disc[1, 1] == 0 and disc[1, 2] == gamma
    assert torch.equal(one["next_obs"].reshape(L, B, 1), final_obs)  # the observation before any reset
    three = nstep_transitions(obs, actions, rewards, done, final_obs, 3, gamma)
    R, D = three["rewards"].reshape(2, B), three["discounts"].reshape(2, B)
    nxt = three["next_obs"].reshape(2, B)
    # window from step 0: rows 0 and 1 end at step 1 (2 rewards); row 2 runs 3 steps
    assert R[0].tolist() == [1 + gamma, 1 + gamma, 1 + gamma + gamma**2]
    assert D[0].tolist() == [gamma**2, 0.0, gamma**3]
    assert nxt[0].tolist() == [final_obs[1, 0, 0], final_obs[1, 1, 0], final_obs[2, 2, 0]]
    # window from step 1 ends at once for rows 0, 1: one reward
    assert R[1].tolist()[:2] == [1.0, 1.0] and D[1].tolist()[:2] == [gamma, 0.0]
    # the critic's target is reward + discount * Q'(next): a terminated transition's is its reward alone
    model = DDPGModel(1, 1, config().policy["shared"].model)
    batch = {k: v[B:2 * B] for k, v in one.items()}  # step 1
    with torch.no_grad():
        nq = model.q(batch["next_obs"], model.act(batch["next_obs"], target=True), target=True)
        model.critic_target[-1].bias.add_(5.0)  # make Q' clearly non-zero
        nq5 = model.q(batch["next_obs"], model.act(batch["next_obs"], target=True), target=True)
    loss_bias = []
    for q_next in (nq, nq5):
        target = batch["rewards"] + batch["discounts"] * q_next
        loss_bias.append(target)
    assert loss_bias[0][1] == loss_bias[1][1] == 1.0  # terminated: Q' does not enter
    assert loss_bias[1][0] - loss_bias[0][0] == pytest.approx(gamma * 5.0, abs=1e-5)  # truncated: it does


def test_pendulum_time_limit_transitions_bootstrap_from_the_last_observation():
    """Episodes of 5 steps, rollouts of 8: the step at the limit stores its own final observation, discount gamma."""
    trainer = build(small("env.config.episode_length=5", "trainer.rollout_length=8", "trainer.total_steps=64",
                          "policy.shared.warmup_steps=1000000"))
    trainer.iterate()
    p = trainer.policies["shared"]
    n = len(trainer.algorithm.states[p.tag].replay)
    assert n == 64
    discounts = trainer.algorithm.states[p.tag].replay.data["discounts"][:n].reshape(8, 8)
    assert torch.allclose(discounts, torch.full_like(discounts, p.config.gamma))  # Pendulum never terminates
    assert (trainer.rollout.done[4] == TRUNCATED).all() and (trainer.rollout.done[:4] == 0).all()
    next_obs = trainer.algorithm.states[p.tag].replay.data["next_obs"][:n].reshape(8, 8, 3)
    obs = trainer.algorithm.states[p.tag].replay.data["obs"][:n].reshape(8, 8, 3)
    assert torch.equal(next_obs[3], obs[4])  # within an episode: the next step's observation
    assert not torch.equal(next_obs[4], obs[5])  # at the limit: the cut episode's, not the reset's


# ---------------------------------------------------------------------------------------------- state
def test_checkpoint_round_trip_continues_identically():
    a = build(small())
    for _ in range(4):
        a.iterate()
    state = copy.deepcopy(a.state_dict())
    assert set(state["models"]["shared"]) >= {"actor.0.weight", "critic.0.weight", "actor_target.0.weight",
                                              "critic_target.0.weight"}
    assert state["ddpg"]["shared"]["replay"]["size"] == 4 * 32
    rest_a = [a.iterate() for _ in range(3)]
    b = build(small())
    b.load_state_dict(state)
    rest_b = [b.iterate() for _ in range(3)]
    key = "losses/critic_loss/shared"
    assert [m[key] for m in rest_a] == [m[key] for m in rest_b]
    for x, y in zip(a.policies["shared"].model.state_dict().values(), b.policies["shared"].model.state_dict().values()):
        assert torch.equal(x, y)
    assert a.algorithm.states["shared"].replay.pos == b.algorithm.states["shared"].replay.pos


@pytest.mark.slow
def test_train_resume_and_evaluate_through_run(tmp_path):
    cfg = small(basedir=str(tmp_path))
    run_dir = train(cfg, progress=False)
    longer = small("trainer.total_steps=480", basedir=str(tmp_path))
    resumed = train(longer, resume=str(run_dir), progress=False)
    assert resumed == run_dir
    result = evaluate(str(run_dir), episodes=3)
    assert result["episodes"] == 3 and -2000 < result["mean_return"]["shared"] < 0


def test_warpdrive_actor_critic_files_save_and_load(tmp_path):
    """WarpDrive's TrainerDDPG (compat/) writes and reads its actor/critic model files."""
    from warp_drive.training.trainers.trainer_ddpg import TrainerDDPG

    trainer = build(small(basedir=str(tmp_path)), trainer_class=TrainerDDPG)
    trainer.iterate()
    written = trainer._write_models()
    assert sorted(p.name for p in written) == ["shared_actor_32.state_dict", "shared_critic_32.state_dict"]
    other = build(small(basedir=str(tmp_path)), trainer_class=TrainerDDPG)
    other.load_model_checkpoint({"shared": {"actor": written[0], "critic": written[1]}})
    model, loaded = trainer.policies["shared"].model, other.policies["shared"].model
    for part in ("actor", "critic"):
        for x, y in zip(getattr(model, part).parameters(), getattr(loaded, f"{part}_target").parameters()):
            assert torch.equal(x, y)
    assert other.env_steps == 32


# ---------------------------------------------------------------------------------------------- config
def test_ddpg_config_errors_name_the_key():
    with pytest.raises(ConfigError, match="replay_buffer_size: 100 transitions cannot fill a batch_size of 256"):
        config("pendulum_ddpg", "policy.shared.replay_buffer_size=100")
    with pytest.raises(ConfigError, match=r"policy.shared.tau: expected a number in \[0.0, 1.0\]"):
        config("pendulum_ddpg", "policy.shared.tau=2")
    with pytest.raises(ConfigError, match="noise_damping: 0 makes"):
        config("pendulum_ddpg", "policy.shared.noise_damping=0")


def test_ddpg_refuses_discrete_actions():
    with pytest.raises(ValueError, match=r"DDPG needs a Box\(shape=\(D,\)\) action space"):
        build(config("pendulum_ddpg", "env.name=CartPole", "env.config.episode_length=500"))


def test_n_step_and_ou_noise_train():
    trainer = build(small("policy.shared.n_step=3", "policy.shared.noise_damping=0.15"))
    metrics = [trainer.iterate() for _ in range(trainer.num_iterations)]
    assert metrics[-1]["replay/size/shared"] == 320 - 2 * 8
    assert math.isfinite(metrics[-1]["losses/critic_loss/shared"])
