"""A2C and PPO on device rollouts: :class:`PPOTrainer`, one iteration top to bottom.

1. rollout (:meth:`PPOTrainer.collect_rollout`), ``rollout_length`` steps: each
   policy runs its model on its agents' observations; the on-device sampler
   writes discrete actions into the env's action array in place (Box actions
   are drawn by torch and clipped to the Box); one launch steps all envs; the
   rewards, done flags, log-probabilities and values go to ``(T, E * N_policy)``
   device buffers, and done envs are reset by kernels (``training/rollout.py``);
2. update (:meth:`PPOTrainer.update`): the rollout is checked for NaN/inf
   (``training/guards.py``); per policy, GAE(λ) with the truncation/termination
   distinction (the value of a truncated episode's final observation is the
   bootstrap), then the A2C or PPO update of ``training/ppo.py``. A NaN or inf
   in a loss or gradient puts the parameters back as they were before the
   update, then raises or skips (``trainer.on_nonfinite``).
"""

from __future__ import annotations

from typing import Any, Callable, Mapping

import numpy as np
import torch

from warp_drive.environment import TERMINATED, TRUNCATED
from warp_drive.training.guards import NonFiniteError, describe_nonfinite_rollout, discard_nonfinite_returns, snapshot
from warp_drive.training.models import create_model
from warp_drive.training.models.central_critic import CentralCritic
from warp_drive.training.ppo import Batch, PPOSettings, UpdateHooks, ValueNormalizer, compute_gae, ppo_update
from warp_drive.training.policies import (ENV_ACTIONS, Policy, owned_arrays, policy_active, policy_obs,
                                          space_signature, write_env_actions)
from warp_drive.training.rollout import OnDeviceTrainer
from warp_drive.training.schedules import Schedule


class PPOTrainer(OnDeviceTrainer):
    """Trains every policy of one :class:`~warp_drive.wrapper.EnvWrapper` with A2C or PPO.

    ``iterate()`` runs one rollout and update (module docstring); ``run.train``
    drives it for a whole run.
    """

    # ------------------------------------------------------------------ setup
    def _make_policy(self, tag: str, agent_ids: list[int]) -> Policy:
        env = self.env.env
        obs_spaces = {space_signature(env.observation_space(a)) for a in agent_ids}
        act_spaces = {space_signature(env.action_space(a)) for a in agent_ids}
        if len(obs_spaces) != 1 or len(act_spaces) != 1:
            raise ValueError(f"policy {tag!r}: its agents must share one observation and one action space")
        obs_dim = int(np.prod(env.observation_space(agent_ids[0]).shape))
        action_space = env.action_space(agent_ids[0])
        cfg = self.config.policy[tag]
        n = len(agent_ids)
        model = create_model(cfg.model, obs_dim + (n if cfg.agent_id_input else 0), action_space)
        if cfg.critic_input != "local":
            model = CentralCritic(model, self._critic_width(tag, cfg, n, obs_dim), cfg.model)
        model = model.to(self.device)
        total = self.config.trainer.total_steps
        lr = Schedule.parse(cfg.lr, total)
        optimizer = torch.optim.Adam(model.parameters(), lr=lr.value(0), eps=1e-5)
        policy = Policy(tag, cfg, agent_ids, torch.tensor(agent_ids, device=self.device),
                        obs_dim + (n if cfg.agent_id_input else 0), action_space, model, optimizer, lr,
                        Schedule.parse(cfg.entropy_coef, total), ENV_ACTIONS, owned=owned_arrays(self.env, tag, agent_ids),
                        id_in_obs=cfg.agent_id_input)
        if cfg.agent_id_input or cfg.critic_input != "local":
            policy.agent_onehot = torch.eye(n, device=self.device).repeat(self.num_envs, 1)
        if policy.discrete:
            self._register_discrete_actions(policy)
        if cfg.value_normalization:
            policy.value_norm = ValueNormalizer().to(self.device)
        return policy

    @staticmethod
    def _in_return_units(p: Policy, value: torch.Tensor) -> torch.Tensor:
        """The critic's output as a return (it predicts normalised returns with ``value_normalization``)."""
        return value if p.value_norm is None else p.value_norm.denormalize(value)

    # ------------------------------------------------------------------ the critic's input
    # local (IPPO): the agent's observation, through the model's own value head. state / concat_obs
    # (MAPPO): models.CentralCritic reads the env's state arrays (EnvWrapper.state, compact whatever the
    # number of agents) or all the policy's agents' observations of the env side by side, either followed
    # by the agent's one-hot index within the policy; all on the device.
    def _critic_width(self, tag: str, cfg: Any, n: int, obs_dim: int) -> int:
        if cfg.critic_input == "state":
            state = self.env.state
            if state is None:
                raise ValueError(f"policy {tag!r}: critic_input: state needs the env's state, but {self.env.name} "
                                 f"declares no state_arrays. Fix: declare them, or use critic_input: concat_obs")
            return state.shape[1] + n
        width = n * obs_dim
        if width > cfg.max_concat_obs_width:
            raise ValueError(f"policy {tag!r}: critic_input: concat_obs gives the critic {n} agents x {obs_dim} "
                             f"observations = {width} inputs, above max_concat_obs_width ({cfg.max_concat_obs_width})."
                             f" Fix: critic_input: state (the env's compact state_arrays), or raise the limit")
        return width + n

    def _critic_input(self, p: Policy) -> torch.Tensor | None:
        if p.config.critic_input == "local":
            return None
        E, n = self.num_envs, len(p.agent_ids)
        if p.config.critic_input == "state":
            shared = self.env.state
        else:  # the observations as the env gives them (without the agent index of agent_id_input)
            shared = policy_obs(self.env, p)[:, : p.obs_dim - (n if p.id_in_obs else 0)].reshape(E, -1)
        return torch.cat([shared.repeat_interleave(n, dim=0), p.agent_onehot], dim=1)

    def _value(self, p: Policy, obs: torch.Tensor, critic_input: torch.Tensor | None) -> torch.Tensor:
        """``V`` in return units, from the model's value head or the centralised critic."""
        raw = p.model.value(obs) if critic_input is None else p.model.central_value(critic_input)
        return self._in_return_units(p, raw)

    def _allocate_buffers(self) -> None:
        super()._allocate_buffers()
        T = self.rollout_length
        for p in self.policies.values():
            B = self.num_envs * len(p.agent_ids)
            p.buffers["logprobs"] = torch.zeros((T, B), device=self.device)
            p.buffers["values"] = torch.zeros((T, B), device=self.device)
            if p.config.critic_input != "local":
                width = p.model.critic_dim
                p.buffers["critic_obs"] = torch.zeros((T, B, width), device=self.device)
                p.buffers["final_critic_obs"] = torch.zeros((T, B, width), device=self.device)
            if self.env.active is not None:  # who was in the game when acting, and after the step
                p.buffers["active"] = torch.zeros((T, B), dtype=torch.bool, device=self.device)
                p.buffers["active_after"] = torch.zeros((T, B), dtype=torch.bool, device=self.device)
            mask = self._policy_mask(p)
            if mask is not None:  # the masks the actions were chosen under, for the update's log-probabilities
                p.buffers["masks"] = torch.zeros((T, *mask.shape), dtype=torch.bool, device=self.device)

    def _policy_mask(self, p: Policy) -> torch.Tensor | None:
        """The env's ``action_mask`` rows of this policy's agents ``(E * n, A)`` (or its group's own mask), or
        None (no mask)."""
        if "action_mask" in p.owned:
            own = self.env.data_manager.data_on_device_via_torch(p.owned["action_mask"])
            return own.reshape(self.num_envs * len(p.agent_ids), own.shape[-1])
        mask = self.env.action_mask
        if mask is None:
            return None
        selected = mask if p.covers_all_agents else mask.index_select(1, p.index)
        return selected.reshape(self.num_envs * len(p.agent_ids), mask.shape[-1])

    # ------------------------------------------------------------------ rollout
    def _act(self, p: Policy, obs: torch.Tensor, greedy: bool = False) -> tuple[torch.Tensor, Any, torch.Tensor]:
        """Choose actions for ``obs``, write them into the env's action array; return (actions, dist, value)."""
        with self.timed("inference"):
            dist, value = p.model(obs)
            critic_input = self._critic_input(p)
            value = self._in_return_units(p, value) if critic_input is None else self._value(p, obs, critic_input)
            mask = self._policy_mask(p)
            if mask is not None:
                dist = dist.masked(mask)
        with self.timed("sampling"):
            actions = self._write_actions(p, dist, greedy)
        return actions, dist, value

    def _write_actions(self, p: Policy, dist: Any, greedy: bool) -> torch.Tensor:
        """Draw (or, ``greedy``, take the most likely) actions from ``dist`` into the env's action array."""
        dm = self.env.data_manager
        E, n = self.num_envs, len(p.agent_ids)
        if p.discrete:
            probs = [h.reshape(E, n, -1) for h in dist.probs_per_head()]
            self.sampler.sample(dm, probs if len(probs) > 1 else probs[0], p.action_name, argmax=greedy)
            written = dm.data_on_device_via_torch(p.action_name)
            if p.scatters_actions:
                self.env.actions.index_copy_(1, p.index, written)
            return written.reshape(E * n, -1).long()
        actions = dist.mode() if greedy else dist.sample()
        low = torch.as_tensor(p.action_space.low, device=self.device).reshape(1, -1)
        high = torch.as_tensor(p.action_space.high, device=self.device).reshape(1, -1)
        write_env_actions(self.env, p, torch.maximum(torch.minimum(actions, high), low))
        return actions

    @torch.no_grad()
    def collect_rollout(self) -> None:
        for t in range(self.rollout_length):
            for p in self.policies.values():
                obs = policy_obs(self.env, p)
                buf = p.buffers
                if "active" in buf:
                    buf["active"][t] = policy_active(self.env, p)
                update_stats = getattr(p.model, "update_obs_normalization", None)  # optional for user models
                if update_stats is not None:  # (the agents out of the game are left out: a host sync)
                    update_stats(obs if "active" not in buf else obs[buf["active"][t]])
                actions, dist, value = self._act(p, obs)
                buf["obs"][t] = obs
                buf["actions"][t] = actions.reshape(buf["actions"].shape[1:]).to(buf["actions"].dtype)
                buf["logprobs"][t] = dist.log_prob(actions)
                buf["values"][t] = value
                if "masks" in buf:
                    buf["masks"][t] = self._policy_mask(p)
                if "critic_obs" in buf:
                    buf["critic_obs"][t] = self._critic_input(p)
                    p.model.update_critic_normalization(buf["critic_obs"][t])
            self._step_envs_and_record(t)
        self.env_steps += self.batch_env_steps

    # ------------------------------------------------------------------ update
    def _advantages(self, p: Policy) -> tuple[torch.Tensor, torch.Tensor]:
        buf = p.buffers
        n = len(p.agent_ids)
        done = self.done_buffer.repeat_interleave(n, dim=1)  # (T, E * n): agents of an env in a row
        terminated, ended = done == TERMINATED, done > 0
        if "active" in buf:  # an agent that left the game in a step ended its own episode there, terminally
            left = buf["active"] & ~buf["active_after"]
            terminated, ended = terminated | left, ended | left
        with torch.no_grad():
            last_value = self._value(p, policy_obs(self.env, p), self._critic_input(p))
            next_values = torch.cat([buf["values"][1:], last_value.unsqueeze(0)])
            truncated = done == TRUNCATED
            if bool(truncated.any()):  # one host sync per iteration
                final_critic = buf["final_critic_obs"][truncated] if "final_critic_obs" in buf else None
                next_values[truncated] = self._value(p, buf["final_obs"][truncated], final_critic)
        cfg = p.config
        return compute_gae(buf["rewards"], buf["values"], next_values, terminated, ended, cfg.gamma, cfg.gae_lambda)

    def learn(self, optimizers: Mapping[str, Any] | None = None,
              backward: Callable[[torch.Tensor], None] | None = None) -> dict[str, float]:
        """The A2C / PPO update of every trained policy on the last rollout (``optimizers``: policy tag ->
        optimizer, default each policy's own; ``backward``: default ``loss.backward()``)."""
        metrics: dict[str, float] = {}
        dist = self.distributed
        problem = describe_nonfinite_rollout(self.policies.values())
        if problem is not None:
            self._on_nonfinite(problem, restore=())
            discard_nonfinite_returns(self.policies.values())
            metrics["nonfinite/skipped_updates"] = float(self.skipped_updates)
            return metrics
        hooks = UpdateHooks(generator=self.generator, backward=backward,
                            reduce_gradients=None if dist is None else dist.average_gradients,
                            reduce_mean=None if dist is None else dist.mean)
        for p in self.policies.values():
            if dist is not None:
                dist.average_buffers(p.model)  # one rank's obs statistics must not steer the others' forward
            if not p.config.to_train:
                continue
            optimizer = p.optimizer if optimizers is None else optimizers[p.tag]
            saved = snapshot(p)  # to return to if a minibatch's loss or gradient is non-finite
            for group in optimizer.param_groups:
                group["lr"] = p.lr.value(self.env_steps)
            advantages, returns = self._advantages(p)
            buf = p.buffers
            values = buf["values"]
            valid = buf["active"].reshape(-1) if "active" in buf else None
            if p.value_norm is not None:  # the critic learns this rollout's returns on the updated scale
                p.value_norm.update(returns if valid is None else returns.reshape(-1)[valid])
                if dist is not None:
                    dist.average_buffers(p.value_norm)
                values, returns = p.value_norm.normalize(values), p.value_norm.normalize(returns)
            batch = Batch(obs=buf["obs"].reshape(-1, p.obs_dim),
                          actions=buf["actions"].reshape(-1, buf["actions"].shape[-1]),
                          logprobs=buf["logprobs"].reshape(-1), values=values.reshape(-1),
                          advantages=advantages.reshape(-1), returns=returns.reshape(-1),
                          masks=buf["masks"].reshape(-1, buf["masks"].shape[-1]) if "masks" in buf else None,
                          critic_obs=buf["critic_obs"].reshape(-1, p.model.critic_dim) if "critic_obs" in buf else None,
                          valid=valid)
            settings = PPOSettings.of(p.config, p.entropy_coef.value(self.env_steps))
            try:
                result = ppo_update(p.model, optimizer, batch, settings, hooks)
            except NonFiniteError as exc:
                self._on_nonfinite(f"policy {p.tag!r}: {exc}", restore=[(p, saved)])
                metrics["nonfinite/skipped_updates"] = float(self.skipped_updates)
                continue
            for key, value in result.items():
                metrics[f"losses/{key}/{p.tag}"] = value
            metrics[f"charts/learning_rate/{p.tag}"] = optimizer.param_groups[0]["lr"]
        return metrics

    # ------------------------------------------------------------------ state
    def state_dict(self) -> dict:
        state = super().state_dict()
        norms = {t: p.value_norm.state_dict() for t, p in self.policies.items() if p.value_norm is not None}
        if norms:
            state["value_norms"] = norms
        return state

    def load_state_dict(self, state: dict) -> None:
        super().load_state_dict(state)
        for tag, p in self.policies.items():
            if p.value_norm is not None:
                p.value_norm.load_state_dict(state["value_norms"][tag])
