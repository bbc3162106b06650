"""Whether a config fits its env: the env's name and constructor arguments, and which agents each policy drives.

Cheap: the env's Python object is built (its constructor sets up NumPy arrays); nothing is compiled or
pushed to a device.
"""

from __future__ import annotations

from typing import Iterable, Mapping

from warp_drive.env.env_parameters import ParameterError
from warp_drive.env.registry import get_env_class
from warp_drive.training.config.errors import ConfigError
from warp_drive.training.config.schema import RunConfig


def policy_agents(policy_tags: Iterable[str], agent_groups: Mapping[str, Iterable[int]]) -> dict[str, list[int]]:
    """Which agent ids each policy drives.

    One policy drives every agent; several policies must be exactly the env's ``agent_groups()`` (agents of
    one group share spaces, so they can share a network).
    """
    tags = list(policy_tags)
    groups = {k: sorted(int(a) for a in v) for k, v in agent_groups.items()}
    if len(tags) == 1:
        return {tags[0]: sorted(a for ids in groups.values() for a in ids)}
    if set(tags) != set(groups):
        missing, extra = sorted(set(groups) - set(tags)), sorted(set(tags) - set(groups))
        detail = "; ".join(s for s in (f"missing {missing}" if missing else "",
                                       f"not a group {extra}" if extra else "") if s)
        raise ConfigError(f"policy: the policy tags {tags} must be one tag for all agents or exactly the env's agent "
                          f"groups {sorted(groups)} ({detail})")
    return {tag: groups[tag] for tag in tags}


def check_env(config: RunConfig) -> dict[str, list[int]]:
    """Build the env's Python object (no kernels) to check ``env.name``, ``env.config`` and the policy tags;
    returns :func:`policy_agents` for the config."""
    try:
        env_class = get_env_class(config.env.name)
    except KeyError as exc:  # registry.EnvLookupError: unknown, or a package.module:Class that does not import
        raise ConfigError(f"env.name: {exc}") from None
    try:
        env = env_class(**config.env.config)
    except ParameterError as exc:  # the env's parameter table: already one line naming the key, value and fix
        raise ConfigError(f"env.config: {exc}") from None
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"env.config: {env_class.__name__}({', '.join(config.env.config)}) failed: {exc}") from None
    return policy_agents(config.policy, env.agent_groups())
