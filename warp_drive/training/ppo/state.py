"""PPO's per-policy state: how a PPO policy is built, the buffers its rollout records, its checkpoint part.

``ppo/algorithm.py`` is the iteration; this is what it is set up with.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

import torch

from warp_drive.training.models import create_model
from warp_drive.training.models.central_critic import CentralCritic
from warp_drive.training.optim import Adam
from warp_drive.training.policies import Policy, owned_arrays, register_sampled_actions, shared_spaces
from warp_drive.training.ppo.critic import central_critic_width
from warp_drive.training.ppo.recurrent import Recurrence
from warp_drive.training.ppo.value_norm import ValueNormalizer
from warp_drive.training.schedules import Schedule


@dataclass
class PPOState:
    """What PPO keeps per policy besides the policy: schedules, value normaliser, recurrent state."""

    lr: Schedule
    entropy_coef: Schedule
    value_norm: ValueNormalizer | None = None  # the critic learns normalised returns (value_normalization)
    recurrence: Recurrence | None = None  # a recurrent model's state (model.type: gru)


def make_ppo_policy(trainer: Any, tag: str, agent_ids: list[int]) -> tuple[Policy, PPOState]:
    """Policy ``tag`` of ``agent_ids``: its model (with a centralised critic for ``critic_input`` other than
    ``local``), Adam, its action array on the sampler (discrete), and its PPO state."""
    env, device = trainer.env, trainer.device
    obs_dim, action_space = shared_spaces(env, tag, agent_ids)
    cfg, n, total = trainer.config.policy[tag], len(agent_ids), trainer.config.trainer.total_steps
    agents = n if cfg.share == "agent" else None
    width = obs_dim + (n if cfg.agent_id_input else 0)
    model = create_model(cfg.model, width, action_space, agents)
    if cfg.critic_input != "local":
        model = CentralCritic(model, central_critic_width(env, tag, cfg, n, obs_dim), cfg.model, agents)
    model = model.to(device)
    lr = Schedule.parse(cfg.lr, total)
    p = Policy(tag, cfg, agent_ids, torch.tensor(agent_ids, device=device), width, action_space, model,
               Adam(model.parameters(), lr=lr.value(0), eps=1e-5), owned=owned_arrays(env, tag, agent_ids),
               id_in_obs=cfg.agent_id_input, per_agent=agents is not None)
    recurrence = Recurrence.of(tag, model, cfg, trainer.rollout_length, trainer.num_envs * n, device)
    if cfg.agent_id_input or cfg.critic_input != "local":
        p.agent_onehot = torch.eye(n, device=device).repeat(trainer.num_envs, 1)
    if p.discrete:
        register_sampled_actions(env, trainer.sampler, p)
    state = PPOState(lr, Schedule.parse(cfg.entropy_coef, total),
                     ValueNormalizer().to(device) if cfg.value_normalization else None, recurrence)
    return p, state


def ppo_buffers(p: Policy, state: PPOState, rollout_length: int,
                num_envs: int) -> dict[str, tuple[tuple[int, ...], torch.dtype]]:
    """PPO's rollout buffers beside the shared ones: log-probabilities and values; a centralised critic's
    inputs, also at the final observations; a recurrent model's chunk states, episode ends and bootstraps."""
    T, B = rollout_length, num_envs * len(p.agent_ids)
    out = {"logprobs": ((T, B), torch.float32), "values": ((T, B), torch.float32)}
    if p.config.critic_input != "local":
        out["critic_obs"] = out["final_critic_obs"] = ((T, B, p.model.critic_dim), torch.float32)
    if state.recurrence is not None:
        out.update(state.recurrence.buffers(T, p.config.critic_input == "local"))
    return out


def ppo_state_dict(states: Mapping[str, PPOState]) -> dict:
    """The value normalisers' statistics and the recurrent states (an exact resume continues from them)."""
    out = {}
    norms = {tag: s.value_norm.state_dict() for tag, s in states.items() if s.value_norm is not None}
    if norms:
        out["value_norms"] = norms
    hidden = {tag: s.recurrence.hidden.cpu().clone() for tag, s in states.items() if s.recurrence is not None}
    if hidden:
        out["hidden_states"] = hidden
    return out


def load_ppo_state(states: Mapping[str, PPOState], state: Mapping[str, Any]) -> None:
    for tag, s in states.items():
        if s.value_norm is not None:
            s.value_norm.load_state_dict(state["value_norms"][tag])
        if s.recurrence is not None:
            s.recurrence.hidden.copy_(state["hidden_states"][tag])
