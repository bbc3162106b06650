"""A policy: the agents it drives, the env arrays they read and write, its model and its optimizer.

Several policies share one env (e.g. ``tagger`` and ``runner``, or one
``shared`` for every agent); :func:`default_policy_map` names their agents
from the env's agent groups. What an algorithm keeps per policy (its learning-rate
schedules and whatever else it learns with) is the algorithm's own state, not the policy's.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
from gymnasium import spaces

from warp_drive.runtime.data_feed import DataFeed
from warp_drive.env.wrapper import EnvWrapper

ENV_ACTIONS = "sampled_actions"  # the env's action array; a policy of only some agents samples into its own


@dataclass(eq=False)
class Policy:
    """A policy's agents, the arrays they read and write, its model and its optimizer."""

    tag: str
    config: Any  # the policy's config section
    agent_ids: list[int]
    index: torch.Tensor  # agent_ids on the device
    obs_dim: int  # the width of an observation row as the model reads it
    action_space: spaces.Space
    model: torch.nn.Module
    optimizer: torch.optim.Optimizer
    action_name: str = ENV_ACTIONS  # the DataManager array the sampler writes
    # The kinds (observations, sampled_actions, rewards) this policy's agent group owns, to the array holding
    # them (warp_drive/env/group_arrays.py); the other kinds are rows ``index`` of the shared arrays.
    owned: dict[str, str] = field(default_factory=dict)
    agent_onehot: torch.Tensor | None = None  # (E * n, n): each row's agent index (critic input, agent_id_input)
    id_in_obs: bool = False  # the observations the model sees end with agent_onehot (agent_id_input)
    per_agent: bool = False  # share: agent -- the model reads (..., n, features), one set of weights per agent

    @property
    def discrete(self) -> bool:
        return not isinstance(self.action_space, spaces.Box)

    @property
    def covers_all_agents(self) -> bool:
        return self.agent_ids == list(range(len(self.agent_ids))) and self.action_name == ENV_ACTIONS

    @property
    def scatters_actions(self) -> bool:
        """Whether its actions are copied into rows ``index`` of the env's shared ``sampled_actions``."""
        return "sampled_actions" not in self.owned and not self.covers_all_agents

    def agents_view(self, rows: torch.Tensor) -> torch.Tensor:
        """Rows of whole envs ``(m * n, ...)`` as a per-agent model reads them, ``(m, n, ...)``; unchanged for a
        shared one. (Truncation is per env, so the truncated rows of a rollout are whole envs too.)"""
        return rows.reshape(-1, len(self.agent_ids), *rows.shape[1:]) if self.per_agent else rows


def space_signature(space: spaces.Space) -> tuple:
    if isinstance(space, spaces.Box):
        return ("Box", space.shape, tuple(np.ravel(space.low)), tuple(np.ravel(space.high)))
    if isinstance(space, spaces.MultiDiscrete):
        return ("MultiDiscrete", tuple(space.nvec))
    return ("Discrete", int(space.n))


def shared_spaces(env: EnvWrapper, tag: str, agent_ids: list[int]) -> tuple[int, spaces.Space]:
    """(observation width, action space) that every agent of policy ``tag`` shares; refused otherwise."""
    core = env.env
    if len({space_signature(core.observation_space(a)) for a in agent_ids}) != 1 or \
            len({space_signature(core.action_space(a)) for a in agent_ids}) != 1:
        raise ValueError(f"policy {tag!r}: its agents must share one observation and one action space")
    return int(np.prod(core.observation_space(agent_ids[0]).shape)), core.action_space(agent_ids[0])


def default_policy_map(env_wrapper: EnvWrapper, policy_tags: list[str]) -> dict[str, list[int]]:
    """One tag: all agents. Several: they must be the env's agent groups."""
    if len(policy_tags) == 1:
        return {policy_tags[0]: list(range(env_wrapper.num_agents))}
    groups = env_wrapper.env.agent_groups()
    if set(groups) != set(policy_tags):
        raise ValueError(
            f"the config defines policies {sorted(policy_tags)}, but {env_wrapper.name} groups its agents as "
            f"{sorted(groups)}; name the policies after the groups, or use one policy for all agents"
        )
    return {tag: list(groups[tag]) for tag in policy_tags}


# ---------------------------------------------------------------------- where a policy's agents read and write
def owned_arrays(env: EnvWrapper, tag: str, agent_ids: list[int]) -> dict[str, str]:
    """The arrays the group of ``agent_ids`` owns (``EnvWrapper.group_arrays``); a policy over such a group
    must be exactly that group."""
    owned = {}
    for group in env.group_arrays.values():
        kinds = [kind for kind, own in group.owned.items() if own]
        if not (kinds or group.mask) or not set(group.agents) & set(agent_ids):
            continue
        if sorted(group.agents) != agent_ids:
            raise ValueError(f"policy {tag!r} drives agents {agent_ids}, but group {group.group!r} (agents "
                             f"{list(group.agents)}) owns {[group.names[k] for k in kinds]}; a policy over such a "
                             f"group must be that group: name the policies after the env's groups")
        owned.update({kind: group.names[kind] for kind in kinds})
        if group.mask is not None:
            owned["action_mask"] = group.mask
    return owned


def _array(env: EnvWrapper, name: str) -> torch.Tensor:
    return env.data_manager.data_on_device_via_torch(name)


def policy_obs(env: EnvWrapper, p: Policy) -> torch.Tensor:
    """``(E * n, obs_dim)``: the policy's agents' observations now, env-major."""
    rows = env.num_envs * len(p.agent_ids)
    width = p.obs_dim - (len(p.agent_ids) if p.id_in_obs else 0)
    if "observations" in p.owned:
        obs = _array(env, p.owned["observations"]).reshape(rows, width)
    else:
        obs = (env.obs if p.covers_all_agents else env.obs.index_select(1, p.index)).reshape(rows, width)
    return torch.cat([obs, p.agent_onehot], dim=1) if p.id_in_obs else obs


def policy_rewards(env: EnvWrapper, p: Policy) -> torch.Tensor:
    """``(E, n)``: the policy's agents' rewards of the last step."""
    if "rewards" in p.owned:
        return _array(env, p.owned["rewards"])
    return env.rewards if p.covers_all_agents else env.rewards.index_select(1, p.index)


def policy_active(env: EnvWrapper, p: Policy) -> torch.Tensor:
    """``(E * n,)`` bool: which of the policy's agents are in the game (the env's ``active_array``)."""
    active = env.active
    return (active if p.covers_all_agents else active.index_select(1, p.index)).reshape(-1) != 0


def policy_mask(env: EnvWrapper, p: Policy) -> torch.Tensor | None:
    """The env's ``action_mask`` rows of this policy's agents ``(E * n, A)`` (or its group's own mask), or
    None (no mask)."""
    rows = env.num_envs * len(p.agent_ids)
    if "action_mask" in p.owned:
        own = _array(env, p.owned["action_mask"])
        return own.reshape(rows, own.shape[-1])
    mask = env.action_mask
    if mask is None:
        return None
    selected = mask if p.covers_all_agents else mask.index_select(1, p.index)
    return selected.reshape(rows, mask.shape[-1])


def write_env_actions(env: EnvWrapper, p: Policy, values: torch.Tensor) -> None:
    """Put ``(E * n, ...)`` actions where the env's kernel reads this policy's agents' actions."""
    if "sampled_actions" in p.owned:
        target = _array(env, p.owned["sampled_actions"])
        target.copy_(values.reshape(target.shape).to(target.dtype))
        return
    target = env.actions
    target.index_copy_(1, p.index, values.reshape(env.num_envs, len(p.agent_ids), *target.shape[2:]).to(target.dtype))


def own_action_array(env: EnvWrapper, p: Policy, name: str, shape: tuple, dtype: Any) -> None:
    """Put a policy-owned action array ``name`` on the device (kept, after a check, when a second trainer on
    the same env wrapper made it already)."""
    dm = env.data_manager
    if dm.is_data_on_device(name):
        if dm.get_shape(name) != shape:
            raise ValueError(f"policy {p.tag!r}: the env wrapper already holds {name!r} of shape "
                             f"{dm.get_shape(name)}, not {shape}")
        return
    feed = DataFeed()
    feed.add_data(name, np.zeros(shape, dtype))
    dm.push_data_to_device(feed)


def register_sampled_actions(env: EnvWrapper, sampler: Any, p: Policy) -> None:
    """A discrete policy's actions, drawn by the on-device sampler: into its group's own array, the env's
    ``sampled_actions`` (a policy of every agent), or an array of its own that is scattered into the env's."""
    space = p.action_space
    sizes = [int(space.n)] if isinstance(space, spaces.Discrete) else [int(n) for n in space.nvec]
    if "sampled_actions" in p.owned:
        p.action_name = p.owned["sampled_actions"]
    elif p.agent_ids != list(range(env.num_agents)):
        p.action_name = f"{ENV_ACTIONS}_{p.tag}"
        own_action_array(env, p, p.action_name,
                         (env.num_envs, len(p.agent_ids)) + ((len(sizes),) if len(sizes) > 1 else ()), np.int32)
    sampler.register_actions(env.data_manager, p.action_name, sizes if len(sizes) > 1 else sizes[0])


def draw_actions(env: EnvWrapper, sampler: Any, p: Policy, dist: Any, greedy: bool) -> torch.Tensor:
    """Draw (or, ``greedy``, take the most likely) actions ``(E * n, heads)`` from ``dist`` into the env's action
    array: discrete ones by the on-device ``sampler``, Box ones by torch, clipped to the Box for the env."""
    dm, E, n = env.data_manager, env.num_envs, len(p.agent_ids)
    if p.discrete:
        probs = [h.reshape(E, n, -1) for h in dist.probs_per_head()]
        sampler.sample(dm, probs if len(probs) > 1 else probs[0], p.action_name, argmax=greedy)
        written = dm.data_on_device_via_torch(p.action_name)
        if p.scatters_actions:
            env.actions.index_copy_(1, p.index, written)
        return written.reshape(E * n, -1).long()
    actions = dist.mode() if greedy else dist.sample()
    low = torch.as_tensor(p.action_space.low, device=dm.device).reshape(1, -1)
    high = torch.as_tensor(p.action_space.high, device=dm.device).reshape(1, -1)
    write_env_actions(env, p, torch.maximum(torch.minimum(actions, high), low))
    return actions
