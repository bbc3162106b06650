"""DDPG over the shared rollout: noisy actions from the on-device sampler, n-step replay, the update.

The algorithm's outline and where it departs from WarpDrive 2.7 are in ``ddpg/__init__.py``.
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

from warp_drive.training.algorithm import Acted, Algorithm
from warp_drive.training.ddpg.networks import DDPGModel, actor_loss_of, critic_loss_of, soft_update
from warp_drive.training.ddpg.replay import ReplayBuffer, nstep_transitions
from warp_drive.training.guards import NonFiniteError
from warp_drive.training.optim import Adam
from warp_drive.training.policies import Policy, own_action_array, owned_arrays, write_env_actions
from warp_drive.training.schedules import Schedule

NOISE_ARRAY = "ddpg_actions_{tag}"  # the policy's normalised actions in [-1, 1], written by the sampler


@dataclass(eq=False)
class DDPGState:
    """What DDPG keeps per policy besides the policy (whose ``optimizer`` is the actor's): the critic's
    optimizer, both learning rates, the replay buffer, the n-step carry and the Box's bounds."""

    lr: Schedule
    critic_lr: Schedule
    critic_optimizer: torch.optim.Optimizer
    replay: ReplayBuffer
    low: torch.Tensor
    high: torch.Tensor
    carry: dict[str, Any]  # the last steps whose n-step windows are not complete

    def to_env_actions(self, normalised: torch.Tensor) -> torch.Tensor:
        return self.low + (normalised + 1.0) * (0.5 * (self.high - self.low))


class DDPG(Algorithm):
    """DDPG (see ``ddpg/__init__.py``): the trainer's algorithm for ``DDPG`` policies."""

    def __init__(self, trainer: Any):
        super().__init__(trainer)
        self.states: dict[str, DDPGState] = {}
        # On a GPU, random numbers (warm-up actions, replay indices) come from a generator on the device.
        self._device_generator = (torch.Generator(device=self.device).manual_seed(trainer.config.trainer.seed)
                                  if self.device.type == "cuda" else None)

    @property
    def device_generator(self) -> torch.Generator:
        """Random numbers drawn on the device (warm-up actions, replay indices): the trainer's CPU generator on cpu."""
        return self._device_generator if self._device_generator is not None else self.trainer.generator

    # ------------------------------------------------------------------ setup
    def make_policy(self, tag: str, agent_ids: list[int]) -> Policy:
        t, core = self.trainer, self.env.env
        space = core.action_space(agent_ids[0])
        if not isinstance(space, spaces.Box) or len(space.shape) != 1:
            raise ValueError(f"policy {tag!r}: DDPG needs a Box(shape=(D,)) action space, {core.name} gives "
                             f"{space!r}; use algorithm PPO or A2C for discrete actions")
        low, high = np.asarray(space.low, np.float32), np.asarray(space.high, np.float32)
        if not (np.isfinite(low).all() and np.isfinite(high).all()):
            raise ValueError(f"policy {tag!r}: DDPG scales tanh outputs to the Box's bounds, which must be finite; "
                             f"got low {low}, high {high}")
        if {tuple(np.ravel(core.action_space(a).low)) for a in agent_ids} != {tuple(np.ravel(low))}:
            raise ValueError(f"policy {tag!r}: its agents must share one action space")
        cfg, total = t.config.policy[tag], t.config.trainer.total_steps
        obs_dim, D = int(np.prod(core.observation_space(agent_ids[0]).shape)), int(space.shape[0])
        model = DDPGModel(obs_dim, D, cfg.model).to(self.device)
        lr = Schedule.parse(cfg.lr, total)
        critic_lr = Schedule.parse(cfg.critic_lr if cfg.critic_lr is not None else cfg.lr, total)
        p = Policy(tag, cfg, agent_ids, torch.tensor(agent_ids, device=self.device), obs_dim, space, model,
                   Adam(model.actor.parameters(), lr=lr.value(0)), NOISE_ARRAY.format(tag=tag),
                   owned=owned_arrays(self.env, tag, agent_ids))
        B, n = t.num_envs * len(agent_ids), cfg.n_step
        carry = {"length": 0, "obs": torch.zeros((n - 1, B, obs_dim), device=self.device),
                 "actions": torch.zeros((n - 1, B, D), device=self.device),
                 "rewards": torch.zeros((n - 1, B), device=self.device),
                 "done": torch.zeros((n - 1, B), dtype=torch.int32, device=self.device),
                 "final_obs": torch.zeros((n - 1, B, obs_dim), device=self.device)}
        self.states[tag] = DDPGState(lr, critic_lr, Adam(model.critic.parameters(), lr=critic_lr.value(0)),
                                     ReplayBuffer(cfg.replay_buffer_size, obs_dim, D, self.device),
                                     torch.as_tensor(low, device=self.device), torch.as_tensor(high, device=self.device),
                                     carry)
        self._register_noise(p)
        return p

    def _register_noise(self, p: Policy) -> None:
        """The policy's normalised action array and its exploration noise on the sampler (OU state reset per episode)."""
        own_action_array(self.env, p, p.action_name,
                         (self.env.num_envs, len(p.agent_ids), int(p.action_space.shape[0])), np.float32)
        cfg, sampler = p.config, self.trainer.sampler
        damping = 1.0 if cfg.noise_damping is None else float(cfg.noise_damping)  # damping 1: iid Gaussian
        if p.action_name in sampler.registered_actions:
            raise ValueError(f"policy {p.tag!r}: {p.action_name!r} is already registered with this sampler")
        sampler.register_continuous_actions(self.env.data_manager, p.action_name, -1.0, 1.0, damping=damping,
                                            stddev=float(cfg.noise_stddev))

    # ------------------------------------------------------------------ acting
    def act(self, p: Policy, obs: torch.Tensor, t: int | None = None, greedy: bool = False) -> Acted:
        """Normalised actions for ``obs`` (actor + noise; uniform during the warm-up steps), written into the
        env's action array in the Box's bounds."""
        E, n, D = self.env.num_envs, len(p.agent_ids), int(p.action_space.shape[0])
        random = t is not None and self.trainer.env_steps + t * E < p.config.warmup_steps
        if t is not None:
            p.model.update_obs_normalization(obs)
        with self.trainer.timed("inference"):
            if random:
                actions = torch.rand((E * n, D), generator=self.device_generator, device=self.device) * 2.0 - 1.0
            else:
                mean = p.model.act(obs)
        with self.trainer.timed("sampling"):
            if not random:
                dm = self.env.data_manager
                self.trainer.sampler.sample(dm, mean.reshape(E, n, D).float().contiguous(), p.action_name,
                                            argmax=greedy)
                actions = dm.data_on_device_via_torch(p.action_name).reshape(E * n, D)
            write_env_actions(self.env, p, self.states[p.tag].to_env_actions(actions))
        return Acted(actions)

    # ------------------------------------------------------------------ update
    def store_rollout(self, p: Policy) -> None:
        """This rollout's steps (after the carried ones) as n-step transitions into the replay buffer."""
        state, buf = self.states[p.tag], self.trainer.rollout.buffers[p.tag]
        n, c, carry = p.config.n_step, state.carry["length"], state.carry
        done = self.trainer.rollout.done.repeat_interleave(len(p.agent_ids), dim=1)  # (T, E * n_agents)
        seq = {"obs": buf["obs"], "actions": buf["actions"], "rewards": buf["rewards"], "done": done,
               "final_obs": buf["final_obs"]}
        if c:
            seq = {k: torch.cat([carry[k][n - 1 - c:], v]) for k, v in seq.items()}
        state.replay.add(**nstep_transitions(seq["obs"], seq["actions"], seq["rewards"], seq["done"],
                                             seq["final_obs"], n, p.config.gamma))
        keep = min(n - 1, seq["rewards"].shape[0])
        if keep:
            for k, v in seq.items():
                carry[k][n - 1 - keep:] = v[-keep:]
        carry["length"] = keep

    def update(self, optimizers: Mapping[str, Any] | None = None,
               backward: Callable[[torch.Tensor], None] | None = None) -> dict[str, float]:
        """Store the rollout in the replay buffers, then DDPG's gradient steps for every trained policy."""
        if optimizers is not None or backward is not None:
            raise NotImplementedError("DDPG trains through its own optimizers (actor and critic per policy); "
                                      "train it with warp-drive train or Trainer.train(), not through Lightning")
        t, metrics = self.trainer, {}
        if not t.rollout_is_finite():
            for state in self.states.values():
                state.carry["length"] = 0  # the bad steps must not complete a later window
            return {"nonfinite/skipped_updates": float(t.skipped_updates)}
        for p in t.policies.values():
            if t.distributed is not None:
                t.distributed.average_buffers(p.model)  # observation statistics only: targets are parameters
            self.store_rollout(p)
            replay, cfg = self.states[p.tag].replay, p.config
            metrics[f"replay/size/{p.tag}"] = float(len(replay))
            if not cfg.to_train or t.env_steps < cfg.warmup_steps or len(replay) < cfg.batch_size:
                continue
            try:
                metrics.update(self.train_policy(p))
            except NonFiniteError as exc:
                metrics["nonfinite/skipped_updates"] = float(t.skipped_updates)
                if t.on_nonfinite == "raise":
                    raise exc
        return metrics

    def train_policy(self, p: Policy) -> dict[str, float]:
        state, cfg, model, dist, t = self.states[p.tag], p.config, p.model, self.trainer.distributed, self.trainer
        saved = ({k: v.clone() for k, v in model.state_dict().items()}, copy.deepcopy(p.optimizer.state_dict()),
                 copy.deepcopy(state.critic_optimizer.state_dict()))
        for group in p.optimizer.param_groups:
            group["lr"] = state.lr.value(t.env_steps)
        for group in state.critic_optimizer.param_groups:
            group["lr"] = state.critic_lr.value(t.env_steps)
        max_norm = cfg.max_grad_norm if cfg.max_grad_norm is not None else math.inf
        actor_params, critic_params = list(model.actor.parameters()), list(model.critic.parameters())
        sums = torch.zeros(4, device=self.device)  # critic loss, actor loss, Q, finite flag product
        sums[3] = 1.0
        steps = cfg.updates_per_iteration if cfg.updates_per_iteration is not None else t.rollout_length
        for _ in range(steps):
            batch = state.replay.sample(cfg.batch_size, self.device_generator)
            critic_loss, q = critic_loss_of(model, batch)
            state.critic_optimizer.zero_grad(set_to_none=True)
            critic_loss.backward()
            if dist is not None:
                dist.average_gradients(model.critic)
            critic_norm = torch.nn.utils.clip_grad_norm_(critic_params, max_norm)
            state.critic_optimizer.step()
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
            state.critic_optimizer.load_state_dict(saved[2])
            message = (f"iteration {t.iteration + 1} (after {t.env_steps} env steps): policy {p.tag!r}: a "
                       f"DDPG loss or gradient norm is non-finite. The parameters were not updated and nothing was "
                       f"saved by this iteration")
            if t.on_nonfinite == "raise":
                raise NonFiniteError(message + "; to drop such iterations instead, use trainer.on_nonfinite=skip")
            t.skipped_updates += 1
            warnings.warn(message + "; update skipped (trainer.on_nonfinite=skip)", RuntimeWarning, stacklevel=3)
            raise NonFiniteError(message)
        tag = p.tag
        return {f"losses/critic_loss/{tag}": values[0] / steps, f"losses/actor_loss/{tag}": values[1] / steps,
                f"losses/q_mean/{tag}": values[2] / steps, f"losses/updates/{tag}": float(steps),
                f"charts/learning_rate/{tag}": p.optimizer.param_groups[0]["lr"],
                f"charts/critic_learning_rate/{tag}": state.critic_optimizer.param_groups[0]["lr"]}

    # ------------------------------------------------------------------ state
    def state_dict(self) -> dict:
        state = {"ddpg": {
            tag: {"critic_optimizer": s.critic_optimizer.state_dict(), "replay": s.replay.state_dict(),
                  "carry": {k: (v if k == "length" else v.detach().cpu().clone()) for k, v in s.carry.items()}}
            for tag, s in self.states.items()}}
        if self._device_generator is not None:
            state["device_generator"] = self._device_generator.get_state()
        return state

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        for tag, s in self.states.items():
            mine = state["ddpg"][tag]
            s.critic_optimizer.load_state_dict(mine["critic_optimizer"])
            s.replay.load_state_dict(mine["replay"])
            for k, v in mine["carry"].items():
                if k == "length":
                    s.carry[k] = int(v)
                else:
                    s.carry[k].copy_(v)
        if self._device_generator is not None and "device_generator" in state:
            self._device_generator.set_state(state["device_generator"])
