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

A policy with ``share: agent`` runs its model on ``(E, n, features)`` (one set
of weights per agent, batched); a recurrent model (``model.type: gru``) keeps
its state ``(E * n, K, H)`` on the device, zeroed where an episode ended, and
PPO replays ``sequence_length``-step chunks from the states stored at their
starts (``training/sequences.py``).
"""

from __future__ import annotations

from typing import Any, Callable, Mapping

import numpy as np
import torch

from warp_drive.environment import TERMINATED, TRUNCATED
from warp_drive.training.guards import NonFiniteError, describe_nonfinite_rollout, discard_nonfinite_returns, snapshot
from warp_drive.training.models import create_model
from warp_drive.training.models.central_critic import CentralCritic
from warp_drive.training.optim import Adam
from warp_drive.training.ppo import Batch, PPOSettings, UpdateHooks, ValueNormalizer, compute_gae, ppo_update
from warp_drive.training.policies import (ENV_ACTIONS, Policy, owned_arrays, policy_active, policy_obs,
                                          space_signature, write_env_actions)
from warp_drive.training.rollout import OnDeviceTrainer
from warp_drive.training.schedules import Schedule
from warp_drive.training.sequences import chunk_states, episode_starts, update_units


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
        agents = n if cfg.share == "agent" else None
        model = create_model(cfg.model, obs_dim + (n if cfg.agent_id_input else 0), action_space, agents)
        if cfg.critic_input != "local":
            model = CentralCritic(model, self._critic_width(tag, cfg, n, obs_dim), cfg.model, agents)
        model = model.to(self.device)
        total = self.config.trainer.total_steps
        lr = Schedule.parse(cfg.lr, total)
        optimizer = Adam(model.parameters(), lr=lr.value(0), eps=1e-5)
        policy = Policy(tag, cfg, agent_ids, torch.tensor(agent_ids, device=self.device),
                        obs_dim + (n if cfg.agent_id_input else 0), action_space, model, optimizer, lr,
                        Schedule.parse(cfg.entropy_coef, total), ENV_ACTIONS, owned=owned_arrays(self.env, tag, agent_ids),
                        id_in_obs=cfg.agent_id_input, per_agent=agents is not None)
        self._make_recurrent(policy)
        if cfg.agent_id_input or cfg.critic_input != "local":
            policy.agent_onehot = torch.eye(n, device=self.device).repeat(self.num_envs, 1)
        if policy.discrete:
            self._register_discrete_actions(policy)
        if cfg.value_normalization:
            policy.value_norm = ValueNormalizer().to(self.device)
        return policy

    def _make_recurrent(self, p: Policy) -> None:
        """A recurrent model's state on the device and its PPO sequence length, checked against the rollout."""
        shape, length, T = getattr(p.model, "hidden_shape", None), p.config.sequence_length, self.rollout_length
        if shape is None:
            if length is not None:
                raise ValueError(f"policy {p.tag!r}: sequence_length applies to recurrent models, and "
                                 f"{p.config.model.type!r} is not one. Fix: model.type: gru, or remove sequence_length")
            return
        p.sequence_length = length or T
        if T % p.sequence_length:
            raise ValueError(f"policy {p.tag!r}: sequence_length {p.sequence_length} does not divide "
                             f"trainer.rollout_length {T}; PPO replays whole chunks. Fix: a divisor of {T}")
        p.hidden = torch.zeros((self.num_envs * len(p.agent_ids), *shape), device=self.device)

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
        """``V`` in return units of the rows ``(E * n, ...)``, from the model's value head (from the policy's
        recurrent state, not advancing it) or the centralised critic."""
        if critic_input is not None:
            raw = p.model.central_value(self._agents_view(p, critic_input))
        elif p.hidden is None:
            raw = p.model.value(self._agents_view(p, obs))
        else:
            raw = p.model.value(self._agents_view(p, obs), self._agents_view(p, p.hidden))
        return self._in_return_units(p, raw.reshape(-1))

    @staticmethod
    def _agents_view(p: Policy, rows: torch.Tensor) -> torch.Tensor:
        """Rows of whole envs ``(m * n, ...)`` as a per-agent model reads them, ``(m, n, ...)``; unchanged for a
        shared one. (Truncation is per env, so the truncated rows of a rollout are whole envs too.)"""
        return rows.reshape(-1, len(p.agent_ids), *rows.shape[1:]) if p.per_agent else rows

    def _forward(self, p: Policy, obs: torch.Tensor) -> tuple[Any, torch.Tensor]:
        """The model's (distribution, value) over the rows ``obs (E * n, D)``; a recurrent model's state advances."""
        x = self._agents_view(p, obs)
        if p.hidden is None:
            dist, value = p.model(x)
        else:
            dist, value, hidden = p.model(x, self._agents_view(p, p.hidden))
            p.hidden.copy_(hidden.reshape(p.hidden.shape))
        return (dist.reshape(obs.shape[0]), value.reshape(-1)) if p.per_agent else (dist, value)

    def _restart_agents(self, ended: torch.Tensor | None = None) -> None:
        """Zero the recurrent states of the envs whose episode ended (``ended (E,)``; None: every env)."""
        for p in self.policies.values():
            if p.hidden is not None:
                if ended is None:
                    p.hidden.zero_()
                else:
                    p.hidden.masked_fill_(ended.repeat_interleave(len(p.agent_ids))[:, None, None], 0.0)

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
            if p.hidden is not None:  # the states each chunk starts from; where episodes ended; their bootstraps
                p.buffers["hidden"] = torch.zeros((T // p.sequence_length, *p.hidden.shape), device=self.device)
                p.buffers["ended"] = torch.zeros((T, B), dtype=torch.bool, device=self.device)
                if p.config.critic_input == "local":
                    p.buffers["final_values"] = torch.zeros((T, B), device=self.device)

    # ------------------------------------------------------------------ rollout
    def _act(self, p: Policy, obs: torch.Tensor, greedy: bool = False) -> tuple[torch.Tensor, Any, torch.Tensor]:
        """Choose actions for ``obs``, write them into the env's action array; return (actions, dist, value)."""
        with self.timed("inference"):
            dist, value = self._forward(p, obs)
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
                if p.hidden is not None and t % p.sequence_length == 0:
                    buf["hidden"][t // p.sequence_length] = p.hidden
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
            for p in self.policies.values():
                if p.hidden is not None:
                    self._end_recurrent_step(p, t)
        self.env_steps += self.batch_env_steps

    def _end_recurrent_step(self, p: Policy, t: int) -> None:
        """After step ``t``: note whose episode ended (env done, or the agent left), take a local recurrent
        critic's bootstrap value of the final observations from the state before it is zeroed, zero it."""
        buf = p.buffers
        ended = self.done_buffer[t].repeat_interleave(len(p.agent_ids)) > 0
        if "active" in buf:
            ended |= buf["active"][t] & ~buf["active_after"][t]
        buf["ended"][t] = ended
        if "final_values" in buf:
            buf["final_values"][t] = self._value(p, buf["final_obs"][t], None)
        p.hidden.masked_fill_(ended[:, None, None], 0.0)

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
            if "final_values" in buf:  # a recurrent local critic valued them during the rollout
                next_values = torch.where(truncated, buf["final_values"], next_values)
            elif bool(truncated.any()):  # one host sync per iteration
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
            batch = self.policy_batch(p, values, advantages, returns)
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

    def policy_batch(self, p: Policy, values: torch.Tensor, advantages: torch.Tensor,
                     returns: torch.Tensor) -> Batch:
        """The last rollout of policy ``p`` as PPO's units (``training/sequences.py``), with these
        ``(T, E * n)`` values, advantages and returns (on the critic's scale)."""
        buf = p.buffers
        E, n = self.num_envs, len(p.agent_ids)

        def units(x: torch.Tensor | None) -> torch.Tensor | None:
            return None if x is None else update_units(x, E, n, p.per_agent, p.sequence_length)

        recurrent = p.hidden is not None
        return Batch(obs=units(buf["obs"]), actions=units(buf["actions"]), logprobs=units(buf["logprobs"]),
                     values=units(values), advantages=units(advantages), returns=units(returns),
                     masks=units(buf.get("masks")), critic_obs=units(buf.get("critic_obs")),
                     valid=units(buf.get("active")),
                     hidden=chunk_states(buf["hidden"], E, n, p.per_agent) if recurrent else None,
                     starts=units(episode_starts(buf["ended"])) if recurrent else None)

    # ------------------------------------------------------------------ state
    def state_dict(self) -> dict:
        state = super().state_dict()
        norms = {t: p.value_norm.state_dict() for t, p in self.policies.items() if p.value_norm is not None}
        if norms:
            state["value_norms"] = norms
        hidden = {t: p.hidden.cpu().clone() for t, p in self.policies.items() if p.hidden is not None}
        if hidden:  # recurrent states: an exact resume continues from them
            state["hidden_states"] = hidden
        return state

    def load_state_dict(self, state: dict) -> None:
        super().load_state_dict(state)
        for tag, p in self.policies.items():
            if p.value_norm is not None:
                p.value_norm.load_state_dict(state["value_norms"][tag])
            if p.hidden is not None:
                p.hidden.copy_(state["hidden_states"][tag])
