"""A policy: a model, its optimizer and schedules, the agents it drives and its rollout buffers.

Several policies share one env (e.g. ``tagger`` and ``runner``, or one
``shared`` for every agent); :func:`default_policy_map` names their agents
from the env's agent groups.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
from gymnasium import spaces

from warp_drive.training.schedules import Schedule
from warp_drive.wrapper import EnvWrapper

ENV_ACTIONS = "sampled_actions"  # the env's action array; a policy of only some agents samples into its own


@dataclass
class Policy:
    """A policy's model, optimizer, agents and rollout buffers."""

    tag: str
    config: Any
    agent_ids: list[int]
    index: torch.Tensor
    obs_dim: int
    action_space: spaces.Space
    model: torch.nn.Module
    optimizer: torch.optim.Optimizer
    lr: Schedule
    entropy_coef: Schedule
    action_name: str  # the DataManager array the sampler writes (discrete)
    buffers: dict[str, torch.Tensor] = field(default_factory=dict)
    running_return: torch.Tensor | None = None
    finished_return_sum: torch.Tensor | None = None
    finished_count: torch.Tensor | None = None
    finished_team_sum: torch.Tensor | None = None  # episodes' returns summed over the policy's agents
    value_norm: Any = None  # a ppo.ValueNormalizer when the critic learns normalised returns
    # The kinds (observations, sampled_actions, rewards) this policy's agent group owns, to the array holding
    # them (warp_drive/group_arrays.py); the other kinds are rows ``index`` of the shared arrays.
    owned: dict[str, str] = field(default_factory=dict)
    agent_onehot: torch.Tensor | None = None  # (E * n, n): each row's agent index, for a centralised critic

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


def space_signature(space: spaces.Space) -> tuple:
    if isinstance(space, spaces.Box):
        return ("Box", space.shape, tuple(np.ravel(space.low)), tuple(np.ravel(space.high)))
    if isinstance(space, spaces.MultiDiscrete):
        return ("MultiDiscrete", tuple(space.nvec))
    return ("Discrete", int(space.n))


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
