"""Where each agent group reads its observations and writes its actions and rewards.

By default every agent uses a row of the shared arrays ``observations``,
``sampled_actions`` and ``rewards`` ``(num_envs, num_agents, ...)``, so all
agents need observations and actions of one width and type. A group (a key of
``Environment.agent_groups()``) may instead own any of them, named
``observations_<group>``, ``sampled_actions_<group>`` and ``rewards_<group>``,
with the group's own shapes ``(num_envs, agents in the group, ...)`` (and a
group with its own discrete actions may mask them, ``action_mask_<group>``
int32 ``(num_envs, agents in the group, A)``, as ``action_mask`` masks the
shared ones): a group
that sees 7 numbers and steers a ``Box(2)`` beside one that sees 4 and picks a
``Discrete(5)``. A shared array is then only needed for the agents of groups
that do not own theirs. WarpDrive 2.7 called these per-policy placeholders.

:func:`resolve_group_arrays` checks every declared array against the agents'
spaces when the wrapper is built, naming the group and the array.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from gymnasium import spaces

# The three per-agent arrays a group may own (as ``<kind>_<group>``).
KINDS = ("observations", "sampled_actions", "rewards")


@dataclass(frozen=True)
class GroupArrays:
    """A group's agents and, for each kind, the array holding it and whether the group owns it.

    An owned array's rows are the group's agents in order (``(E, n_group, ...)``);
    otherwise the agents are rows ``agents`` of the shared array.
    """

    group: str
    agents: tuple[int, ...]
    names: dict[str, str]
    owned: dict[str, bool]
    mask: str | None = None  # the group's own action_mask_<group>, when it has one


def own_name(kind: str, group: str) -> str:
    return f"{kind}_{group}"


def _expected(kind: str, space: Any, num_envs: int, n: int) -> tuple[tuple[int, ...], str] | None:
    """(shape, dtype) an owned array of ``kind`` must have for agents of ``space``; None: any float32 shape."""
    if kind == "rewards":
        return (num_envs, n), "float32"
    if kind == "observations":
        shape = getattr(space, "shape", None)
        return ((num_envs, n, *shape), "float32") if shape is not None else None
    if isinstance(space, spaces.Discrete):
        return (num_envs, n), "int32"
    if isinstance(space, spaces.MultiDiscrete):
        return (num_envs, n, len(np.ravel(space.nvec))), "int32"
    if isinstance(space, spaces.Box):
        return (num_envs, n, *space.shape), "float32"
    return None


def resolve_group_arrays(env: Any, data_manager: Any, num_envs: int) -> dict[str, GroupArrays]:
    """Every group's arrays (see the module docstring); raises ValueError naming the group and the array
    when an owned array does not match the group's spaces, or when agents have no array of a kind."""
    groups = {str(g): tuple(int(a) for a in agents) for g, agents in env.agent_groups().items()}
    num_agents = int(env.num_agents)
    out: dict[str, GroupArrays] = {}
    for group, agents in groups.items():
        names, owned = {}, {}
        for kind in KINDS:
            name = own_name(kind, group)
            owned[kind] = data_manager.is_data_on_device(name)
            names[kind] = name if owned[kind] else kind
            if owned[kind]:
                _check_owned(env, data_manager, num_envs, group, agents, kind, name)
        mask = own_name("action_mask", group)
        has_mask = data_manager.is_data_on_device(mask)
        if has_mask:
            _check_mask(env, data_manager, num_envs, group, agents, owned["sampled_actions"], mask)
        out[group] = GroupArrays(group, agents, names, owned, mask if has_mask else None)
    for kind in KINDS:
        missing = sorted(a for g in out.values() if not g.owned[kind] for a in g.agents)
        if missing and not data_manager.is_data_on_device(kind):
            lacking = [g.group for g in out.values() if not g.owned[kind]]
            raise ValueError(
                f"{env.name}.get_data_dictionary() must define {kind!r} ({num_envs}, {num_agents}, ...) for the "
                f"agents of group(s) {lacking}, or each of those groups its own {own_name(kind, lacking[0])!r}")
    return out


def _check_owned(env: Any, dm: Any, num_envs: int, group: str, agents: tuple[int, ...], kind: str,
                 name: str) -> None:
    space_of = env.observation_space if kind == "observations" else env.action_space
    signatures = {repr(space_of(a)) for a in agents}
    if kind != "rewards" and len(signatures) != 1:
        raise ValueError(f"{env.name}: group {group!r} owns {name!r}, so its agents must share one "
                         f"{'observation' if kind == 'observations' else 'action'} space; they have {sorted(signatures)}")
    space = space_of(agents[0]) if kind != "rewards" else None
    expected = _expected(kind, space, num_envs, len(agents))
    shape, dtype = dm.get_shape(name), dm.get_dtype(name)
    if expected is None:
        raise ValueError(f"{env.name}: group {group!r} owns {name!r}, but its agents' space {space} has no array "
                         f"layout here (Box, Discrete or MultiDiscrete)")
    if (tuple(shape), dtype) != expected:
        what = f"its {len(agents)} agents" + (f" and their space {space}" if space is not None else "")
        raise ValueError(f"{env.name}: group {group!r}'s {name!r} is {dtype} {tuple(shape)}; {what} need "
                         f"{expected[1]} {expected[0]}. Fix: allocate it so in get_data_dictionary(), or declare "
                         f"the group's spaces to match")


def _check_mask(env: Any, dm: Any, num_envs: int, group: str, agents: tuple[int, ...], owns_actions: bool,
                name: str) -> None:
    if not owns_actions:
        raise ValueError(f"{env.name}: {name!r} masks group {group!r}'s own actions, but the group has no "
                         f"{own_name('sampled_actions', group)!r}; mask the shared actions with 'action_mask'")
    space = env.action_space(agents[0])
    if isinstance(space, spaces.Discrete) and int(space.start) == 0:
        width = int(space.n)
    elif isinstance(space, spaces.MultiDiscrete) and not np.any(space.start):
        width = int(np.sum(space.nvec))
    else:
        raise ValueError(f"{env.name}: {name!r} masks discrete actions counted from 0; group {group!r} acts in "
                         f"{space}")
    expected = ((num_envs, len(agents), width), "int32")
    if (tuple(dm.get_shape(name)), dm.get_dtype(name)) != expected:
        raise ValueError(f"{env.name}: group {group!r}'s {name!r} is {dm.get_dtype(name)} {tuple(dm.get_shape(name))}"
                         f"; expected int32 {expected[0]} (1 where an action is legal)")

