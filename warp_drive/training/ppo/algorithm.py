"""A2C and PPO over the shared rollout: acting, what PPO records, and the update, top to bottom.

Per rollout step (``training/rollout.py`` calls them): :meth:`PPO.act` runs the model (advancing a recurrent
state) and draws actions into the env's action array; :meth:`PPO.record` keeps log-probabilities and values;
:meth:`PPO.after_step` what the update needs of a step's end. :meth:`PPO.update`: per policy, GAE(λ) (a
truncated episode's final observation valued as its bootstrap), then ``ppo_update`` (``ppo/losses.py``).
Each policy's state is set up by ``ppo/state.py``.
"""

from __future__ import annotations

from typing import Any, Callable, Mapping

import torch

from warp_drive.env.environment import TRUNCATED
from warp_drive.training.algorithm import Acted, Algorithm
from warp_drive.training.guards import NonFiniteError, snapshot
from warp_drive.training.policies import Policy, draw_actions, policy_mask, policy_obs
from warp_drive.training.ppo.critic import critic_input, critic_value, in_return_units
from warp_drive.training.ppo.losses import compute_gae, ppo_update
from warp_drive.training.ppo.recurrent import rollout_batch
from warp_drive.training.ppo.settings import PPOSettings, UpdateHooks
from warp_drive.training.ppo.state import PPOState, load_ppo_state, make_ppo_policy, ppo_buffers, ppo_state_dict


class PPO(Algorithm):
    """A2C / PPO (each policy's ``algorithm``): the trainer's algorithm for ``PPO`` and ``A2C`` policies."""

    def __init__(self, trainer: Any):
        super().__init__(trainer)
        self.states: dict[str, PPOState] = {}

    def make_policy(self, tag: str, agent_ids: list[int]) -> Policy:
        p, self.states[tag] = make_ppo_policy(self.trainer, tag, agent_ids)
        return p

    def buffers(self, p: Policy) -> dict:
        return ppo_buffers(p, self.states[p.tag], self.trainer.rollout_length, self.env.num_envs)

    def state_dict(self) -> dict:
        return ppo_state_dict(self.states)

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        load_ppo_state(self.states, state)

    def forward(self, p: Policy, obs: torch.Tensor) -> tuple[Any, torch.Tensor]:
        """The model's (distribution, value) over the rows ``obs (E * n, D)``; a recurrent state advances."""
        recurrence = self.states[p.tag].recurrence
        if recurrence is None:
            dist, value = p.model(p.agents_view(obs))
        else:
            dist, value, hidden = p.model(p.agents_view(obs), p.agents_view(recurrence.hidden))
            recurrence.hidden.copy_(hidden.reshape(recurrence.hidden.shape))
        return (dist.reshape(obs.shape[0]), value.reshape(-1)) if p.per_agent else (dist, value)

    # ------------------------------------------------------------------ the rollout
    def act(self, p: Policy, obs: torch.Tensor, t: int | None = None, greedy: bool = False) -> Acted:
        buf, state = self.trainer.rollout.buffers.get(p.tag, {}), self.states[p.tag]
        if t is not None:
            update_stats = getattr(p.model, "update_obs_normalization", None)  # optional for user models
            if update_stats is not None:  # (the agents out of the game are left out: a host sync)
                update_stats(obs if "active" not in buf else obs[buf["active"][t]])
            if state.recurrence is not None and t % state.recurrence.sequence_length == 0:
                buf["hidden"][t // state.recurrence.sequence_length] = state.recurrence.hidden
        with self.trainer.timed("inference"):
            dist, value = self.forward(p, obs)
            central = critic_input(self.env, p)
            value = in_return_units(state, value) if central is None else critic_value(p, state, obs, central)
            mask = policy_mask(self.env, p)
            if mask is not None:
                dist = dist.masked(mask)
        with self.trainer.timed("sampling"):
            actions = draw_actions(self.env, self.trainer.sampler, p, dist, greedy)
        return Acted(actions, dist, value)

    def record(self, p: Policy, t: int, obs: torch.Tensor, acted: Acted) -> None:
        buf = self.trainer.rollout.buffers[p.tag]
        buf["logprobs"][t] = acted.dist.log_prob(acted.actions)
        buf["values"][t] = acted.extra
        if "critic_obs" in buf:
            buf["critic_obs"][t] = critic_input(self.env, p)
            p.model.update_critic_normalization(buf["critic_obs"][t])

    def after_step(self, p: Policy, t: int) -> None:
        """A centralised critic's input at the final observations; for a recurrent model, whose episode ended
        (env done, or the agent left), a local critic's bootstrap from the state before it is zeroed, and zero it."""
        buf, recurrence = self.trainer.rollout.buffers[p.tag], self.states[p.tag].recurrence
        if "final_critic_obs" in buf:
            buf["final_critic_obs"][t] = critic_input(self.env, p)
        if recurrence is None:
            return
        ended = self.trainer.rollout.done[t].repeat_interleave(len(p.agent_ids)) > 0
        if "active" in buf:
            ended |= buf["active"][t] & ~buf["active_after"][t]
        buf["ended"][t] = ended
        if "final_values" in buf:
            buf["final_values"][t] = critic_value(p, self.states[p.tag], buf["final_obs"][t], None)
        recurrence.hidden.masked_fill_(ended[:, None, None], 0.0)

    def restart(self, ended: torch.Tensor | None = None) -> None:
        for tag, state in self.states.items():
            if state.recurrence is not None:
                state.recurrence.restart(ended, len(self.trainer.policies[tag].agent_ids))

    # ------------------------------------------------------------------ the update
    def advantages(self, p: Policy) -> tuple[torch.Tensor, torch.Tensor]:
        """GAE(λ) advantages and returns ``(T, E * n)`` of the last rollout, in return units."""
        rollout, buf, state = self.trainer.rollout, self.trainer.rollout.buffers[p.tag], self.states[p.tag]
        terminated, ended = rollout.ended(p)
        with torch.no_grad():
            last_value = critic_value(p, state, policy_obs(self.env, p), critic_input(self.env, p))
            next_values = torch.cat([buf["values"][1:], last_value.unsqueeze(0)])
            truncated = rollout.done.repeat_interleave(len(p.agent_ids), dim=1) == TRUNCATED
            if "final_values" in buf:  # a recurrent local critic valued them during the rollout
                next_values = torch.where(truncated, buf["final_values"], next_values)
            elif bool(truncated.any()):  # one host sync per iteration
                final_critic = buf["final_critic_obs"][truncated] if "final_critic_obs" in buf else None
                next_values[truncated] = critic_value(p, state, buf["final_obs"][truncated], final_critic)
        return compute_gae(buf["rewards"], buf["values"], next_values, terminated, ended, p.config.gamma,
                           p.config.gae_lambda)

    def update(self, optimizers: Mapping[str, Any] | None = None,
               backward: Callable[[torch.Tensor], None] | None = None) -> dict[str, float]:
        """The A2C / PPO update of every trained policy on the last rollout (``optimizers``: policy tag ->
        optimizer, default each policy's own; ``backward``: default ``loss.backward()``)."""
        t, metrics = self.trainer, {}
        dist = t.distributed
        if not t.rollout_is_finite():
            return {"nonfinite/skipped_updates": float(t.skipped_updates)}
        hooks = UpdateHooks(generator=t.generator, backward=backward,
                            reduce_gradients=None if dist is None else dist.average_gradients,
                            reduce_mean=None if dist is None else dist.mean)
        for p in t.policies.values():
            state = self.states[p.tag]
            if dist is not None:
                dist.average_buffers(p.model)  # one rank's obs statistics must not steer the others' forward
            if not p.config.to_train:
                continue
            optimizer = p.optimizer if optimizers is None else optimizers[p.tag]
            saved = snapshot(p)  # to return to if a minibatch's loss or gradient is non-finite
            for group in optimizer.param_groups:
                group["lr"] = state.lr.value(t.env_steps)
            advantages, returns = self.advantages(p)
            buf = t.rollout.buffers[p.tag]
            values = buf["values"]
            if state.value_norm is not None:  # the critic learns this rollout's returns on the updated scale
                state.value_norm.update(returns if "active" not in buf else returns.reshape(-1)[buf["active"].reshape(-1)])
                if dist is not None:
                    dist.average_buffers(state.value_norm)
                values, returns = state.value_norm.normalize(values), state.value_norm.normalize(returns)
            settings = PPOSettings.of(p.config, state.entropy_coef.value(t.env_steps))
            try:
                batch = rollout_batch(buf, p, self.env.num_envs, state.recurrence, values, advantages, returns)
                result = ppo_update(p.model, optimizer, batch, settings, hooks)
            except NonFiniteError as exc:
                t.nonfinite(f"policy {p.tag!r}: {exc}", restore=[(p, saved)])
                metrics["nonfinite/skipped_updates"] = float(t.skipped_updates)
                continue
            metrics.update({f"losses/{key}/{p.tag}": value for key, value in result.items()})
            metrics[f"charts/learning_rate/{p.tag}"] = optimizer.param_groups[0]["lr"]
        return metrics
