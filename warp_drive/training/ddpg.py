"""DDPG for Box actions: a replay buffer on the device, target networks, and ``DDPGTrainer``.

A policy with ``algorithm: DDPG`` (every policy of the run: one trainer trains
one family) learns off-policy. One iteration:

1. rollout, ``rollout_length`` steps through the shared rollout
   (``training/rollout.py``): the actor's tanh output ``a`` in ``[-1, 1]^D`` gets
   exploration noise from the on-device sampler (``Sampler.sample`` on a
   policy-owned array ``ddpg_actions_<tag>`` registered with bounds -1..1:
   Gaussian, or Ornstein-Uhlenbeck with ``noise_damping``; its OU state
   restarts with each episode) and is scaled to the Box's bounds,
   ``low + (a + 1) (high - low) / 2``, before the env steps. Until
   ``warmup_steps`` env steps, actions are uniform in the Box instead.
2. update: the rollout is checked for NaN/inf (as PPO's), turned into n-step
   transitions ``(s, a, R, discount, s')`` and written into the policy's
   :class:`ReplayBuffer`; then ``updates_per_iteration`` gradient steps on
   minibatches of ``batch_size`` drawn uniformly from it:

   * critic: ``(Q(s, a) - (R + discount * Q'(s', mu'(s'))))^2`` with the target
     networks ``mu'``, ``Q'``; ``discount`` is ``gamma^k`` after ``k`` steps and
     0 when the episode *terminated* (``_done_ == 1``) inside the window, so a
     *truncated* episode (``_done_ == 2``, the time limit) bootstraps from the
     observation it was cut at (kept before the reset) and a terminated one
     does not;
   * actor: ``-Q(s, mu(s))`` with the critic's parameters frozen, so no
     actor-loss gradient reaches the critic (WarpDrive 2.7 let it leak into the
     critic's gradients, reference §9.16);
   * targets: ``target <- (1 - tau) target + tau online`` after every step.

Where WarpDrive 2.7 differed (reference §4.4, §9.16), this keeps its names and
config keys but not its behaviour: it had no replay buffer (a sliding window
of the last rollout, so it trained on-policy), leaked the actor's gradients
into the critic, and wrapped the target networks in DDP. Here the buffer
holds ``replay_buffer_size`` transitions on the data manager's device, and
in a data-parallel run only the actor's and the critic's gradients are
averaged (the targets follow them locally, identically on every rank).

Policy keys (DDPG's config section): ``tau`` (0.005), ``lr`` (the actor's) and
``critic_lr`` (None: ``lr``), ``replay_buffer_size`` (1,000,000 transitions; one
per agent per env step), ``batch_size`` (256), ``updates_per_iteration`` (None:
``rollout_length``, one gradient step per vectorised env step; off-policy
learning wants more when there are few envs, e.g. ``pendulum_ddpg``'s 32 for 8
steps of 16 envs), ``warmup_steps`` (10,000 env steps of uniform random
actions; no gradient step before them), ``noise_stddev`` (0.1, in units of
*half* the Box's range, i.e. of the actor's tanh output: WarpDrive's
``sampler.params.stddev`` was in action units, so 0.2 on Pendulum's [-2, 2]
is 0.1 here), ``noise_damping`` (None: Gaussian; a number: OU), ``n_step`` (1);
``model.fc_dims`` (actor), ``model.critic_fc_dims`` (None: ``fc_dims``),
``model.activation``, ``model.obs_normalization``; ``max_grad_norm`` clips
each network's gradient. PPO/A2C keys (entropy, GAE, epochs, ...) are refused
when the config loads (``config_sections.DDPGPolicyConfig`` has none).

``n_step`` > 1 uses n-step returns without off-policy correction (as
WarpDrive): the last ``n_step - 1`` steps of a rollout wait for the next
rollout to complete their windows, so every env step becomes one transition
exactly once.

Checkpoints (``state_dict``) hold the actor, critic, both targets, both
optimizers, the replay buffer *with its contents* (the filled rows, so a
resumed run continues exactly as an uninterrupted one: a 1M-transition
Pendulum buffer is about 36 MB per checkpoint; keep ``replay_buffer_size``
in mind with ``saving.keep_checkpoints``), the n-step carry and the RNGs.
In a data-parallel run the checkpoint holds rank 0's buffer, which every
rank resumes from.
"""

from __future__ import annotations

import copy
import math
import warnings
from dataclasses import dataclass
from typing import Any, Callable, Mapping

import numpy as np
import torch
from gymnasium import spaces

from warp_drive.data_feed import DataFeed
from warp_drive.training.ddpg_networks import (DDPGModel, ReplayBuffer, actor_loss_of, critic_loss_of,
                                               nstep_transitions, soft_update)
from warp_drive.training.guards import NonFiniteError, describe_nonfinite_rollout, discard_nonfinite_returns
from warp_drive.training.optim import Adam
from warp_drive.training.policies import Policy, owned_arrays, policy_obs, write_env_actions
from warp_drive.training.rollout import OnDeviceTrainer
from warp_drive.training.schedules import Schedule

__all__ = ["DDPGModel", "DDPGPolicy", "DDPGTrainer", "ReplayBuffer", "actor_loss_of", "critic_loss_of",
           "nstep_transitions", "soft_update"]

NOISE_ARRAY = "ddpg_actions_{tag}"  # the policy's normalised actions in [-1, 1], written by the sampler


@dataclass(eq=False)
class DDPGPolicy(Policy):
    """A DDPG policy: ``model`` is a :class:`DDPGModel`, ``optimizer`` the actor's; plus the critic's
    optimizer and learning rate, the replay buffer, the n-step carry and the Box's bounds."""

    critic_optimizer: torch.optim.Optimizer | None = None
    critic_lr: Schedule | None = None
    replay: ReplayBuffer | None = None
    carry: dict[str, torch.Tensor] | None = None  # the last steps whose n-step windows are not complete
    low: torch.Tensor | None = None
    high: torch.Tensor | None = None

    def to_env_actions(self, normalised: torch.Tensor) -> torch.Tensor:
        return self.low + (normalised + 1.0) * (0.5 * (self.high - self.low))


class DDPGTrainer(OnDeviceTrainer):
    """Trains every policy of one :class:`~warp_drive.wrapper.EnvWrapper` with DDPG (see the module docstring)."""

    # On a GPU, a generator on the device (made with the first policy); on cpu the trainer's own.
    _device_generator: torch.Generator | None = None

    # ------------------------------------------------------------------ setup
    def _make_policy(self, tag: str, agent_ids: list[int]) -> Policy:
        algorithms = {t: p.algorithm for t, p in self.config.policy.items()}
        others = sorted(t for t, a in algorithms.items() if a != "DDPG")
        if others:
            raise ValueError(f"policies {others} use {sorted({algorithms[t] for t in others})} and the others DDPG: "
                             f"one trainer trains either DDPG policies or A2C/PPO ones; give every policy the "
                             f"same algorithm family")
        env = self.env.env
        space = env.action_space(agent_ids[0])
        if not isinstance(space, spaces.Box) or len(space.shape) != 1:
            raise ValueError(f"policy {tag!r}: DDPG needs a Box(shape=(D,)) action space, {env.name} gives "
                             f"{space!r}; use algorithm PPO or A2C for discrete actions")
        low, high = np.asarray(space.low, np.float32), np.asarray(space.high, np.float32)
        if not (np.isfinite(low).all() and np.isfinite(high).all()):
            raise ValueError(f"policy {tag!r}: DDPG scales tanh outputs to the Box's bounds, which must be finite; "
                             f"got low {low}, high {high}")
        if {tuple(np.ravel(env.action_space(a).low)) for a in agent_ids} != {tuple(np.ravel(low))}:
            raise ValueError(f"policy {tag!r}: its agents must share one action space")
        if self.device.type == "cuda" and self._device_generator is None:
            self._device_generator = torch.Generator(device=self.device).manual_seed(self.config.trainer.seed)
        cfg = self.config.policy[tag]
        obs_dim = int(np.prod(env.observation_space(agent_ids[0]).shape))
        D = int(space.shape[0])
        model = DDPGModel(obs_dim, D, cfg.model).to(self.device)
        total = self.config.trainer.total_steps
        lr = Schedule.parse(cfg.lr, total)
        critic_lr = Schedule.parse(cfg.critic_lr if cfg.critic_lr is not None else cfg.lr, total)
        actor_opt = Adam(model.actor.parameters(), lr=lr.value(0))
        critic_opt = Adam(model.critic.parameters(), lr=critic_lr.value(0))
        policy = DDPGPolicy(tag, cfg, agent_ids, torch.tensor(agent_ids, device=self.device), obs_dim, space, model,
                            actor_opt, lr, Schedule.parse(0.0, total), NOISE_ARRAY.format(tag=tag),
                            critic_optimizer=critic_opt, critic_lr=critic_lr,
                            replay=ReplayBuffer(cfg.replay_buffer_size, obs_dim, D, self.device),
                            low=torch.as_tensor(low, device=self.device), high=torch.as_tensor(high, device=self.device),
                            owned=owned_arrays(self.env, tag, agent_ids))
        self._register_noise(policy)
        return policy

    def _register_noise(self, p: DDPGPolicy) -> None:
        """The policy's normalised action array and its exploration noise on the sampler (OU state reset per episode)."""
        dm = self.env.data_manager
        shape = (self.num_envs, len(p.agent_ids), int(p.action_space.shape[0]))
        if dm.is_data_on_device(p.action_name):  # a second trainer on the same env wrapper
            if dm.get_shape(p.action_name) != shape:
                raise ValueError(f"policy {p.tag!r}: the env wrapper already holds {p.action_name!r} of shape "
                                 f"{dm.get_shape(p.action_name)}, not {shape}")
        else:
            feed = DataFeed()
            feed.add_data(p.action_name, np.zeros(shape, np.float32))
            dm.push_data_to_device(feed)
        cfg = p.config
        damping = 1.0 if cfg.noise_damping is None else float(cfg.noise_damping)  # damping 1: iid Gaussian
        if p.action_name in self.sampler.registered_actions:
            raise ValueError(f"policy {p.tag!r}: {p.action_name!r} is already registered with this sampler")
        self.sampler.register_continuous_actions(dm, p.action_name, -1.0, 1.0, damping=damping,
                                                 stddev=float(cfg.noise_stddev))

    def _allocate_buffers(self) -> None:
        super()._allocate_buffers()  # obs, final_obs, actions (normalised here), rewards
        for p in self.policies.values():
            B, D = self.num_envs * len(p.agent_ids), int(p.action_space.shape[0])
            n = p.config.n_step
            p.carry = {"length": 0,
                       "obs": torch.zeros((n - 1, B, p.obs_dim), device=self.device),
                       "actions": torch.zeros((n - 1, B, D), device=self.device),
                       "rewards": torch.zeros((n - 1, B), device=self.device),
                       "done": torch.zeros((n - 1, B), dtype=torch.int32, device=self.device),
                       "final_obs": torch.zeros((n - 1, B, p.obs_dim), device=self.device)}

    @property
    def device_generator(self) -> torch.Generator:
        """Random numbers drawn on the device (warm-up actions, replay indices): the CPU generator on cpu."""
        return self._device_generator if self._device_generator is not None else self.generator

    # ------------------------------------------------------------------ acting
    def _act(self, p: Policy, obs: torch.Tensor, greedy: bool = False, random: bool = False):
        """Normalised actions for ``obs`` (actor + noise, or uniform when ``random``), written into the env's
        action array in the Box's bounds; returns ``(normalised actions (B, D), None, None)``."""
        E, n, D = self.num_envs, len(p.agent_ids), int(p.action_space.shape[0])
        with self.timed("inference"):
            if random:
                actions = torch.rand((E * n, D), generator=self.device_generator, device=self.device) * 2.0 - 1.0
            else:
                mean = p.model.act(obs)
        with self.timed("sampling"):
            if not random:
                dm = self.env.data_manager
                self.sampler.sample(dm, mean.reshape(E, n, D).float().contiguous(), p.action_name, argmax=greedy)
                actions = dm.data_on_device_via_torch(p.action_name).reshape(E * n, D)
            write_env_actions(self.env, p, p.to_env_actions(actions))
        return actions, None, None

    @torch.no_grad()
    def collect_rollout(self) -> None:
        for t in range(self.rollout_length):
            for p in self.policies.values():
                obs = policy_obs(self.env, p)
                p.model.update_obs_normalization(obs)
                random = self.env_steps + t * self.num_envs < p.config.warmup_steps
                actions, _, _ = self._act(p, obs, random=random)
                p.buffers["obs"][t] = obs
                p.buffers["actions"][t] = actions
            self._step_envs_and_record(t)
        self.env_steps += self.batch_env_steps

    # ------------------------------------------------------------------ update
    def _store_rollout(self, p: DDPGPolicy) -> None:
        """This rollout's steps (after the carried ones) as n-step transitions into the replay buffer."""
        n, c = p.config.n_step, p.carry["length"]
        buf = p.buffers
        done = self.done_buffer.repeat_interleave(len(p.agent_ids), dim=1)  # (T, E * n_agents)
        seq = {"obs": buf["obs"], "actions": buf["actions"], "rewards": buf["rewards"], "done": done,
               "final_obs": buf["final_obs"]}
        if c:
            seq = {k: torch.cat([p.carry[k][n - 1 - c:], v]) for k, v in seq.items()}
        p.replay.add(**nstep_transitions(seq["obs"], seq["actions"], seq["rewards"], seq["done"], seq["final_obs"],
                                         n, p.config.gamma))
        keep = min(n - 1, seq["rewards"].shape[0])
        if keep:
            for k, v in seq.items():
                p.carry[k][n - 1 - keep:] = v[-keep:]
        p.carry["length"] = keep

    def _updates(self, p: DDPGPolicy) -> int:
        cfg = p.config
        return cfg.updates_per_iteration if cfg.updates_per_iteration is not None else self.rollout_length

    def learn(self, optimizers: Mapping[str, Any] | None = None,
              backward: Callable[[torch.Tensor], None] | None = None) -> dict[str, float]:
        """Store the rollout in the replay buffers, then DDPG's gradient steps for every trained policy."""
        if optimizers is not None or backward is not None:
            raise NotImplementedError("DDPG trains through its own optimizers (actor and critic per policy); "
                                      "train it with warp-drive train or Trainer.train(), not through Lightning")
        metrics: dict[str, float] = {}
        problem = describe_nonfinite_rollout(self.policies.values())
        if problem is not None:
            self._on_nonfinite(problem, restore=())
            discard_nonfinite_returns(self.policies.values())
            for p in self.policies.values():
                p.carry["length"] = 0  # the bad steps must not complete a later window
            metrics["nonfinite/skipped_updates"] = float(self.skipped_updates)
            return metrics
        dist = self.distributed
        for p in self.policies.values():
            if dist is not None:
                dist.average_buffers(p.model)  # observation statistics only: targets are parameters
            self._store_rollout(p)
            metrics[f"replay/size/{p.tag}"] = float(len(p.replay))
            cfg = p.config
            if not cfg.to_train or self.env_steps < cfg.warmup_steps or len(p.replay) < cfg.batch_size:
                continue
            try:
                metrics.update(self._train_policy(p))
            except NonFiniteError as exc:
                metrics["nonfinite/skipped_updates"] = float(self.skipped_updates)
                if self.on_nonfinite == "raise":
                    raise exc
        return metrics

    def _train_policy(self, p: DDPGPolicy) -> dict[str, float]:
        cfg, model, dist = p.config, p.model, self.distributed
        saved = ({k: v.clone() for k, v in model.state_dict().items()}, copy.deepcopy(p.optimizer.state_dict()),
                 copy.deepcopy(p.critic_optimizer.state_dict()))
        for group in p.optimizer.param_groups:
            group["lr"] = p.lr.value(self.env_steps)
        for group in p.critic_optimizer.param_groups:
            group["lr"] = p.critic_lr.value(self.env_steps)
        max_norm = cfg.max_grad_norm if cfg.max_grad_norm is not None else math.inf
        actor_params, critic_params = list(model.actor.parameters()), list(model.critic.parameters())
        sums = torch.zeros(4, device=self.device)  # critic loss, actor loss, Q, finite flag product
        sums[3] = 1.0
        steps = self._updates(p)
        for _ in range(steps):
            batch = p.replay.sample(cfg.batch_size, self.device_generator)
            critic_loss, q = critic_loss_of(model, batch)
            p.critic_optimizer.zero_grad(set_to_none=True)
            critic_loss.backward()
            if dist is not None:
                dist.average_gradients(model.critic)
            critic_norm = torch.nn.utils.clip_grad_norm_(critic_params, max_norm)
            p.critic_optimizer.step()
            p.optimizer.zero_grad(set_to_none=True)
            actor_loss = actor_loss_of(model, batch["obs"])
            actor_loss.backward()
            if dist is not None:
                dist.average_gradients(model.actor)
            actor_norm = torch.nn.utils.clip_grad_norm_(actor_params, max_norm)
            p.optimizer.step()
            soft_update(model.actor_target, model.actor, cfg.tau)
            soft_update(model.critic_target, model.critic, cfg.tau)
            finite = torch.isfinite(torch.stack([critic_loss.detach(), actor_loss.detach(), critic_norm, actor_norm]))
            sums[:3] += torch.stack([critic_loss.detach(), actor_loss.detach(), q])
            sums[3] *= finite.all().to(sums.dtype)
        values = sums.tolist()  # the update's one host sync
        if values[3] != 1.0:
            model.load_state_dict(saved[0])
            p.optimizer.load_state_dict(saved[1])
            p.critic_optimizer.load_state_dict(saved[2])
            message = (f"iteration {self.iteration + 1} (after {self.env_steps} env steps): policy {p.tag!r}: a "
                       f"DDPG loss or gradient norm is non-finite. The parameters were not updated and nothing was "
                       f"saved by this iteration")
            if self.on_nonfinite == "raise":
                raise NonFiniteError(message + "; to drop such iterations instead, use trainer.on_nonfinite=skip")
            self.skipped_updates += 1
            warnings.warn(message + "; update skipped (trainer.on_nonfinite=skip)", RuntimeWarning, stacklevel=3)
            raise NonFiniteError(message)
        tag = p.tag
        return {f"losses/critic_loss/{tag}": values[0] / steps, f"losses/actor_loss/{tag}": values[1] / steps,
                f"losses/q_mean/{tag}": values[2] / steps, f"losses/updates/{tag}": float(steps),
                f"charts/learning_rate/{tag}": p.optimizer.param_groups[0]["lr"],
                f"charts/critic_learning_rate/{tag}": p.critic_optimizer.param_groups[0]["lr"]}

    # ------------------------------------------------------------------ state
    def state_dict(self) -> dict:
        state = super().state_dict()
        state["ddpg"] = {
            tag: {"critic_optimizer": p.critic_optimizer.state_dict(), "replay": p.replay.state_dict(),
                  "carry": {k: (v if k == "length" else v.detach().cpu().clone()) for k, v in p.carry.items()}}
            for tag, p in self.policies.items()}
        if self._device_generator is not None:
            state["device_generator"] = self._device_generator.get_state()
        return state

    def load_state_dict(self, state: dict) -> None:
        super().load_state_dict(state)
        for tag, p in self.policies.items():
            mine = state["ddpg"][tag]
            p.critic_optimizer.load_state_dict(mine["critic_optimizer"])
            p.replay.load_state_dict(mine["replay"])
            for k, v in mine["carry"].items():
                if k == "length":
                    p.carry[k] = int(v)
                else:
                    p.carry[k].copy_(v)
        if self._device_generator is not None and "device_generator" in state:
            self._device_generator.set_state(state["device_generator"])
