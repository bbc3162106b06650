"""V-trace (IMPALA, Espeholt et al. 2018): PPO's sibling that learns from a rollout one update stale.

An asynchronous actor-learner split acts with parameters a few updates older
than the learner's. This algorithm makes that lag explicit and exact -- the
rollout is collected by a *behaviour* copy of each model that is one update
behind (after update ``k`` it holds the parameters from before update ``k``) --
and corrects for it with V-trace's clipped importance weights
``rho_t = min(rho_bar, pi(a_t|x_t) / mu(a_t|x_t))`` and
``c_t = min(c_bar, pi / mu)`` (here ``rho_bar = c_bar = 1``):

* value targets ``v_t = V(x_t) + delta_t + gamma c_t (v_{t+1} - V(x_{t+1}))`` with
  ``delta_t = rho_t (r_t + gamma V(x_{t+1}) - V(x_t))``, the trace cut at every episode
  end, a terminal step not bootstrapped and a truncated one bootstrapped from the value
  of its final observation (as PPO's GAE);
* the policy gradient ``rho_t (r_t + gamma v_{t+1} - V(x_t)) grad log pi(a_t|x_t)``, an entropy bonus,
  and the value loss ``(V(x_t) - v_t)^2``.

Everything else is PPO's: the model, the rollout's acting and recording (with the behaviour model), and
the minibatch step (``ppo_update`` with the plain policy-gradient loss, one epoch over ``num_minibatches``).
It reads PPO's policy keys (``gamma``, ``lr``, ``entropy_coef``, ``vf_coef``, ``max_grad_norm``,
``num_minibatches``); ``gae_lambda``, ``clip_param`` and ``num_epochs`` do not apply. Feed-forward models
with a local critic only (no ``critic_input``, recurrence or value normalisation: refused when built).
With a zero lag (``rho = c = 1``) the targets are GAE(λ=1)'s returns (``tests/training/test_vtrace.py``).
"""

from __future__ import annotations

import copy
import dataclasses
from typing import Any, Callable, Mapping

import torch

from warp_drive.env.environment import TRUNCATED
from warp_drive.training.guards import NonFiniteError, snapshot
from warp_drive.training.policies import Policy, policy_obs
from warp_drive.training.ppo.algorithm import PPO
from warp_drive.training.ppo.critic import critic_value
from warp_drive.training.ppo.losses import ppo_update
from warp_drive.training.ppo.recurrent import rollout_batch
from warp_drive.training.ppo.settings import PPOSettings, UpdateHooks

RHO_BAR = C_BAR = 1.0  # IMPALA's truncation levels


def vtrace_targets(rewards: torch.Tensor, values: torch.Tensor, next_values: torch.Tensor, log_rhos: torch.Tensor,
                   terminated: torch.Tensor, ended: torch.Tensor, gamma: float, rho_bar: float = RHO_BAR,
                   c_bar: float = C_BAR) -> tuple[torch.Tensor, torch.Tensor]:
    """V-trace value targets ``v`` and policy-gradient advantages for a ``(T, B)`` rollout.

    ``values[t] = V(x_t)``, ``next_values[t] = V(x_{t+1})`` (for a step that ended its episode, the value of
    its final observation), ``log_rhos = log pi - log mu`` of the actions taken; ``terminated``/``ended``
    as in ``ppo.losses.compute_gae``.
    """
    rhos = log_rhos.exp()
    clipped_rho, c = rhos.clamp(max=rho_bar), rhos.clamp(max=c_bar)
    bootstrap = gamma * next_values * (1.0 - terminated.float())
    deltas = clipped_rho * (rewards + bootstrap - values)
    continues = 1.0 - ended.float()
    correction = torch.zeros_like(rewards)  # v_t - V(x_t)
    running = torch.zeros_like(rewards[0])
    for t in range(rewards.shape[0] - 1, -1, -1):
        running = deltas[t] + gamma * c[t] * continues[t] * running
        correction[t] = running
    targets = values + correction
    # v_{t+1}: the next step's target within the episode; at an episode end the bootstrap alone
    next_targets = torch.cat([targets[1:], next_values[-1:]])
    next_targets = torch.where(ended, next_values, next_targets)
    advantages = clipped_rho * (rewards + gamma * next_targets * (1.0 - terminated.float()) - values)
    return targets, advantages


class VTrace(PPO):
    """V-trace over PPO's acting and minibatch step (module docstring)."""

    def __init__(self, trainer: Any):
        super().__init__(trainer)
        self.behaviour: dict[str, torch.nn.Module] = {}

    def make_policy(self, tag: str, agent_ids: list[int]) -> Policy:
        p = super().make_policy(tag, agent_ids)
        cfg, state = p.config, self.states[tag]
        if cfg.critic_input != "local" or state.recurrence is not None or state.value_norm is not None:
            raise ValueError(f"policy {tag!r}: algorithm VTRACE takes a feed-forward model with its own value "
                             f"head; remove critic_input, a recurrent model.type and value_normalization, or use PPO")
        self.behaviour[tag] = copy.deepcopy(p.model).requires_grad_(False)
        return p

    def forward(self, p: Policy, obs: torch.Tensor) -> tuple[Any, torch.Tensor]:
        """The behaviour model acts (one update behind the learner)."""
        return super().forward(dataclasses.replace(p, model=self.behaviour[p.tag]), obs)

    def update(self, optimizers: Mapping[str, Any] | None = None,
               backward: Callable[[torch.Tensor], None] | None = None) -> dict[str, float]:
        t, metrics = self.trainer, {}
        if not t.rollout_is_finite():
            return {"nonfinite/skipped_updates": float(t.skipped_updates)}
        dist = t.distributed
        hooks = UpdateHooks(generator=t.generator, backward=backward,
                            reduce_gradients=None if dist is None else dist.average_gradients,
                            reduce_mean=None if dist is None else dist.mean)
        for p in t.policies.values():
            before = copy.deepcopy(p.model.state_dict())  # the behaviour's parameters for the next rollout
            if p.config.to_train:
                metrics.update(self._learn(p, p.optimizer if optimizers is None else optimizers[p.tag], hooks))
            self.behaviour[p.tag].load_state_dict(before)
        return metrics

    def _learn(self, p: Policy, optimizer: Any, hooks: UpdateHooks) -> dict[str, float]:
        t, state, buf = self.trainer, self.states[p.tag], self.trainer.rollout.buffers[p.tag]
        for group in optimizer.param_groups:
            group["lr"] = state.lr.value(t.env_steps)
        terminated, ended = t.rollout.ended(p)
        T, B = buf["rewards"].shape
        with torch.no_grad():  # the learner's view of the stale rollout
            dist_now, values = p.model(p.agents_view(buf["obs"].reshape(T * B, -1)))
            if "masks" in buf:
                dist_now = dist_now.masked(buf["masks"].reshape(T * B, -1))
            log_rhos = dist_now.log_prob(buf["actions"].reshape(T * B, -1)).reshape(T, B) - buf["logprobs"]
            values = values.reshape(T, B)
            last = critic_value(p, state, policy_obs(self.env, p), None).reshape(1, B)
            next_values = torch.cat([values[1:], last])
            truncated = t.rollout.done.repeat_interleave(len(p.agent_ids), dim=1) == TRUNCATED
            final = critic_value(p, state, buf["final_obs"].reshape(T * B, -1), None).reshape(T, B)
            next_values = torch.where(truncated, final, next_values)
            targets, advantages = vtrace_targets(buf["rewards"], values, next_values, log_rhos, terminated, ended,
                                                 p.config.gamma)
        settings = dataclasses.replace(PPOSettings.of(p.config, state.entropy_coef.value(t.env_steps)),
                                       algorithm="A2C", num_epochs=1, normalize_advantage=False)
        saved = snapshot(p)
        try:
            batch = rollout_batch(buf, p, self.env.num_envs, None, values, advantages, targets)  # no recurrence (refused)
            result = ppo_update(p.model, optimizer, batch, settings, hooks)
        except NonFiniteError as exc:
            t.nonfinite(f"policy {p.tag!r}: {exc}", restore=[(p, saved)])
            return {"nonfinite/skipped_updates": float(t.skipped_updates)}
        out = {f"losses/{key}/{p.tag}": value for key, value in result.items()}
        out[f"losses/mean_rho/{p.tag}"] = float(log_rhos.exp().clamp(max=RHO_BAR).mean())
        out[f"charts/learning_rate/{p.tag}"] = optimizer.param_groups[0]["lr"]
        return out

    def state_dict(self) -> dict:
        return {**super().state_dict(), "vtrace_behaviour": {tag: m.state_dict() for tag, m in self.behaviour.items()}}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        super().load_state_dict(state)
        for tag, model in self.behaviour.items():
            model.load_state_dict(state["vtrace_behaviour"][tag])
