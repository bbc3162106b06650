"""What a PPO policy's critic reads (``critic_input``): its own observation, or a centralised input (MAPPO).

``local`` (IPPO): the agent's observation, through the model's own value head. ``state`` / ``concat_obs``
(MAPPO): ``models.CentralCritic`` reads the env's state arrays (``EnvWrapper.state``, compact whatever the
number of agents) or all the policy's agents' observations of the env side by side, either followed by the
agent's one-hot index within the policy; all on the device.
"""

from __future__ import annotations

from typing import Any

import torch

from warp_drive.training.policies import Policy, policy_obs
from warp_drive.env.wrapper import EnvWrapper


def central_critic_width(env: EnvWrapper, tag: str, cfg: Any, n: int, obs_dim: int) -> int:
    """The width of a centralised critic's input for policy ``tag`` of ``n`` agents; refused when the env
    has no state (``state``) or the observations side by side pass ``max_concat_obs_width``."""
    if cfg.critic_input == "state":
        if env.state is None:
            raise ValueError(f"policy {tag!r}: critic_input: state needs the env's state, but {env.name} "
                             f"declares no state_arrays. Fix: declare them, or use critic_input: concat_obs")
        return env.state.shape[1] + n
    width = n * obs_dim
    if width > cfg.max_concat_obs_width:
        raise ValueError(f"policy {tag!r}: critic_input: concat_obs gives the critic {n} agents x {obs_dim} "
                         f"observations = {width} inputs, above max_concat_obs_width ({cfg.max_concat_obs_width})."
                         f" Fix: critic_input: state (the env's compact state_arrays), or raise the limit")
    return width + n


def critic_input(env: EnvWrapper, p: Policy) -> torch.Tensor | None:
    """A centralised critic's input ``(E * n, width)`` for the policy's agents now; None for a local critic."""
    if p.config.critic_input == "local":
        return None
    E, n = env.num_envs, len(p.agent_ids)
    if p.config.critic_input == "state":
        shared = env.state
    else:  # the observations as the env gives them (without the agent index of agent_id_input)
        shared = policy_obs(env, p)[:, : p.obs_dim - (n if p.id_in_obs else 0)].reshape(E, -1)
    return torch.cat([shared.repeat_interleave(n, dim=0), p.agent_onehot], dim=1)


def critic_value(p: Policy, state: Any, obs: torch.Tensor, central: torch.Tensor | None) -> torch.Tensor:
    """``V`` in return units of the rows ``(E * n, ...)`` of policy ``p`` (its ``PPOState`` ``state``): the
    model's value head (from the recurrent state, not advancing it), or the centralised critic's of ``central``."""
    recurrence = state.recurrence
    if central is not None:
        raw = p.model.central_value(p.agents_view(central))
    elif recurrence is None:
        raw = p.model.value(p.agents_view(obs))
    else:
        raw = p.model.value(p.agents_view(obs), p.agents_view(recurrence.hidden))
    return in_return_units(state, raw.reshape(-1))


def in_return_units(state: Any, value: torch.Tensor) -> torch.Tensor:
    """The critic's output as a return (it predicts normalised returns with ``value_normalization``)."""
    return value if state.value_norm is None else state.value_norm.denormalize(value)
