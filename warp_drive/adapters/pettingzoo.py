"""PettingZoo ``ParallelEnv`` over one replica of a warp_drive environment.

All agents act at once, as in the kernel.

Agent names follow the environment's agent groups: ``<group>_<k>`` for the
k-th member of a group (``tagger_0``, ``tagger_1``, ``runner_0`` …), the
default ``"shared"`` group (and agents in no group) being called ``agent``.
Names are numbered within their role, not by kernel row, so each name keeps
its role and spaces even where the roles are drawn at random (TagContinuous's
taggers): ``possible_agents`` and every name's spaces are the same whatever
the seed, and ``agent_index`` maps a name to its kernel row.

Seeding: ``seed`` seeds the ``EnvWrapper`` (start states, see
:mod:`warp_drive.adapters`) and, when the adapter builds the environment from
a class or a registered name whose constructor takes ``seed`` and
``env_config`` does not set it, the environment's construction as well
(TagContinuous draws its taggers there). ``reset(seed=s)`` then gives exactly
the state of a fresh ``PettingZooParallelEnv(env, seed=s, env_config=...)``:
when the construction seed changes the environment is rebuilt (a new
``self.wrapper``; kernels come from the build cache). An environment given as
an instance or an ``EnvWrapper`` keeps what its construction drew.

Episodes: an agent leaves ``agents`` at the step its episode ends. The whole
replica ends with ``_done_`` (1: every live agent terminated, 2: truncated,
and ``agents`` empties until ``reset()``). An environment with a per-agent
``still_in_the_game`` array (WarpDrive's name; TagContinuous with
``runner_exits_game_after_tagged``) also ends single agents: one whose flag
drops to 0 is reported ``terminated`` at that step and is absent afterwards.

Agent groups with arrays of their own (``observations_<group>``,
``sampled_actions_<group>``, ``rewards_<group>``: heterogeneous agents, e.g.
PandemicEconomy's regions and planner) are read and written there, each agent
at its row of its group's arrays; an agent whose actions are masked
(``action_mask`` or ``action_mask_<group>``) finds its legal actions in
``infos[agent]["action_mask"]`` (int8, 1 = legal), PettingZoo's convention.

``state()`` is the replica's global state, one float32 vector (one host copy);
``state_names`` lists the arrays it is made of, and ``state_space`` is a Box of
its length. An environment that declares ``state_arrays`` (the compact global
state a centralised critic reads, ``critic_input: state``) gives exactly that:
the replica's row of ``EnvWrapper.state``, its state arrays flattened side by
side (SimpleSpread: every agent's position and velocity, then the landmarks).
Otherwise it is the arrays the framework restores at a reset (the
environment's state by the contract: twins and pool targets, in the order the
environment declared them, observations excluded) and the time step,
flattened.
"""

from __future__ import annotations

import inspect
from typing import Any

import numpy as np
import torch

try:
    from pettingzoo import ParallelEnv
except ModuleNotFoundError as error:  # pragma: no cover - exercised in a subprocess
    if error.name != "pettingzoo":
        raise
    raise ModuleNotFoundError(
        "warp_drive.adapters.PettingZooParallelEnv needs PettingZoo, which is not installed: "
        "pip install 'warp_drive[pettingzoo]'",
        name="pettingzoo",
    ) from error

from warp_drive.adapters import (
    build_wrapper,
    check_discrete_actions,
    check_fits,
    supported_space,
    to_host,
)
from warp_drive.env.environment import TERMINATED, TRUNCATED
from warp_drive.env.registry import get_env_class
from warp_drive.services.sampler import random_seed

# Per-agent in-game flags, (num_envs, num_agents): an agent whose flag is 0 has left the episode.
ACTIVE_FLAGS = "still_in_the_game"
TIMESTEP = "_timestep_"


def agent_names(env) -> dict[str, int]:
    """``{name: kernel row}`` from ``env.agent_groups()``, group by group (see the module docstring)."""
    n = int(env.num_agents)
    owner: dict[int, str] = {}
    for group, members in env.agent_groups().items():
        for i in members:
            i = int(i)
            if not 0 <= i < n:
                raise ValueError(f"{env.name}: agent group {group!r} names agent {i}, outside 0..{n - 1}")
            if i in owner:
                raise ValueError(f"{env.name}: agent {i} is in two agent groups ({owner[i]!r} and {group!r})")
            owner[i] = group
    groups: dict[str, list[int]] = {}
    for group in env.agent_groups():
        groups.setdefault("agent" if group == "shared" else group, [])
    for i in range(n):
        group = owner.get(i, "shared")
        groups.setdefault("agent" if group == "shared" else group, []).append(i)
    return {f"{prefix}_{k}": i for prefix, rows in groups.items() for k, i in enumerate(rows)}


KINDS = ("observations", "sampled_actions", "rewards")


def agent_rows(wrapper) -> dict[str, list[tuple[str, int] | None]]:
    """Per kind (``observations``, ``sampled_actions``, ``rewards``, ``action_mask``), for each agent id: the
    array holding the agent's row and that row -- the shared array at the agent's id, or its group's own
    array at its place in the group; ``action_mask`` entries are None for agents without a mask."""
    dm = wrapper.data_manager
    n = wrapper.num_agents
    rows: dict[str, list] = {kind: [(kind, i) for i in range(n)] for kind in KINDS}
    rows["action_mask"] = [("action_mask", i) if dm.is_data_on_device("action_mask") else None for i in range(n)]
    for group in wrapper.group_arrays.values():
        for place, agent in enumerate(group.agents):
            for kind in KINDS:
                if group.owned.get(kind):
                    rows[kind][agent] = (group.names[kind], place)
            if group.mask is not None:
                rows["action_mask"][agent] = (group.mask, place)
    return rows


def _seeded_construction(env: Any, env_config: dict | None) -> bool:
    """Whether the adapter builds ``env`` (a class or registered name) with a constructor
    ``seed`` that ``env_config`` leaves open, so the adapter's seed decides it."""
    if (env_config or {}).get("seed") is not None:
        return False
    if isinstance(env, str):
        env = get_env_class(env)
    if not isinstance(env, type):
        return False
    try:
        return "seed" in inspect.signature(env).parameters
    except (TypeError, ValueError):
        return False


class PettingZooParallelEnv(ParallelEnv):
    """``ParallelEnv`` view of one replica; see the module docstring.

    ``env``: an environment instance, class or registered name (or an
    ``EnvWrapper`` with one replica); ``seed``: the wrapper's (and, where the
    adapter builds the env, the env's) seed, random when None;
    ``reset(seed=s)`` reseeds both.
    """

    metadata = {"render_modes": [], "name": "warp_drive_parallel_v0", "is_parallelizable": True}

    def __init__(self, env: Any, backend: Any = "cpu", seed: int | None = None, env_config: dict | None = None,
                 render_mode: str | None = None, reset_pool_size: int = 1000):
        if render_mode is not None:
            raise ValueError(f"render_mode {render_mode!r}: warp_drive environments do not render")

        self.render_mode = None
        self._source, self._env_config = env, dict(env_config or {})
        self._backend, self._reset_pool_size = backend, reset_pool_size
        self._seeded_construction = _seeded_construction(env, env_config)
        self._build(random_seed() if seed is None else int(seed))
        wenv = self.wrapper.env
        self.metadata = dict(self.metadata, name=f"warp_drive_{wenv.name or type(wenv).__name__}")
        self.possible_agents = list(self.agent_index)
        # Built once: PettingZoo requires the very same space object on every call
        # (so seeding a space sticks); a rebuild must give equal spaces (_build).
        self._observation_spaces = {name: wenv.observation_space(i) for name, i in self.agent_index.items()}
        self._action_spaces = {name: wenv.action_space(i) for name, i in self.agent_index.items()}

        for name, i in self.agent_index.items():
            supported_space(self._observation_spaces[name], "observation", self.wrapper.name)
            supported_space(self._action_spaces[name], "action", self.wrapper.name)
            check_fits(self._observation_spaces[name], self._width("observations", i), "observation",
                       self.wrapper.name, name)
            check_fits(self._action_spaces[name], self._width("sampled_actions", i), "action", self.wrapper.name, name)
        from gymnasium import spaces

        self.state_space = spaces.Box(-np.inf, np.inf, shape=(self._state_size(),), dtype=np.float32)
        self.agents: list[str] = []

    def _build(self, seed: int) -> None:
        """(Re)build the wrapper for ``seed``; a rebuild must keep the agents and their spaces."""
        config = dict(self._env_config, seed=seed) if self._seeded_construction else self._env_config
        wrapper = build_wrapper(self._source, 1, self._backend, seed, config or None, self._reset_pool_size,
                                adapter="PettingZooParallelEnv")
        index = agent_names(wrapper.env)
        if hasattr(self, "possible_agents"):  # a rebuild
            same = list(index) == self.possible_agents and all(
                wrapper.env.observation_space(i) == self._observation_spaces[name]
                and wrapper.env.action_space(i) == self._action_spaces[name] for name, i in index.items())
            if not same:
                raise RuntimeError(
                    f"{wrapper.name} built with seed={seed} has other agent names or spaces than with the first "
                    "seed; PettingZoo needs fixed names and spaces: name agents by role with agent_groups() so that "
                    "each name keeps its spaces")
        self.wrapper, self.agent_index, self._construction_seed = wrapper, index, seed
        self._rows = agent_rows(wrapper)
        dm = self.wrapper.data_manager
        self._actions_host = {}  # replica 0 of every action array the kernel reads, on the host
        for array, _row in self._rows["sampled_actions"]:
            if array not in self._actions_host:
                device = dm.data_on_device_via_torch(array)
                self._actions_host[array] = np.zeros(tuple(device.shape)[1:],
                                                     np.int32 if device.dtype == torch.int32 else np.float32)
        self._declared_state = bool(wrapper.env.state_arrays)
        if self._declared_state:  # the env's own compact state (EnvWrapper.state)
            self.state_names = list(wrapper.env.state_arrays)
        else:  # what a reset restores, and the time step
            restored = [n for n in dm.array_names if n in dm.reset_data_list or n in dm.reset_target_to_pool]
            self.state_names = [n for n in restored if n != "observations"]
            if TIMESTEP in dm.array_names:
                self.state_names.append(TIMESTEP)
        flags = dm.data_on_device_via_torch(ACTIVE_FLAGS) if ACTIVE_FLAGS in dm.array_names else None
        self._active_flags = flags if flags is not None and tuple(flags.shape) == (1, self.wrapper.num_agents) else None

    # ------------------------------------------------------------ spaces
    def observation_space(self, agent: str):
        return self._observation_spaces[agent]

    def action_space(self, agent: str):
        return self._action_spaces[agent]

    def _width(self, kind: str, agent: int) -> int:
        """Numbers per agent in the array holding ``agent``'s ``kind``."""
        array, _row = self._rows[kind][agent]
        return int(np.prod(tuple(self.wrapper.data_manager.get_shape(array))[2:], dtype=np.int64))

    # ------------------------------------------------------------ episodes
    def reset(self, seed: int | None = None, options: dict | None = None):
        if seed is not None and self._seeded_construction and int(seed) != self._construction_seed:
            self._build(int(seed))  # the new wrapper starts from seed's start state
        elif seed is not None:
            self.wrapper.reseed(seed)
        else:
            self.wrapper.reset_all_envs()
        self.agents = list(self.possible_agents)
        arrays = self._pull_rows(("observations", "action_mask"))
        return self._observations(arrays), self._infos(arrays)

    def step(self, actions: dict[str, Any]):
        if not self.agents:
            raise RuntimeError("the episode is over (no live agents): call reset() before step()")
        missing = [name for name in self.agents if name not in actions]
        unknown = [name for name in actions if name not in self.agent_index]
        if missing or unknown:
            raise KeyError(f"step() needs one action per live agent; missing {missing}, unknown {unknown}")
        for host in self._actions_host.values():
            host[...] = 0  # agents that left act the no-op
        for name in self.agents:
            agent = self.agent_index[name]
            array, row = self._rows["sampled_actions"][agent]
            host = self._actions_host[array]
            size = host[row].size
            value = np.asarray(actions[name]).reshape(-1)
            if value.size != size:
                raise ValueError(f"action of {name} has {value.size} values; its space {self._action_spaces[name]} "
                                 f"needs {size}")
            check_discrete_actions(self._action_spaces[name], value, name)
            host[row] = value.reshape(host[row].shape)
        dm = self.wrapper.data_manager
        for array, host in self._actions_host.items():
            dm.data_on_device_via_torch(array)[0].copy_(torch.from_numpy(host))
        self.wrapper.step_all_envs()

        arrays = self._pull_rows(("observations", "rewards", "action_mask"), with_flags=True)
        done = int(arrays["_done_"][0])
        active = arrays.get(ACTIVE_FLAGS)
        rewards, left = {}, {}
        for name in self.agents:
            agent = self.agent_index[name]
            array, row = self._rows["rewards"][agent]
            rewards[name] = float(arrays[array][row])
            left[name] = active is not None and not active[agent]
        terminations = {name: done == TERMINATED or left[name] for name in self.agents}
        truncations = {name: done == TRUNCATED and not left[name] for name in self.agents}
        infos = self._infos(arrays)
        observations = self._observations(arrays)
        self.agents = [] if done else [name for name in self.agents if not left[name]]
        return observations, rewards, terminations, truncations, infos

    def _pull_rows(self, kinds: tuple[str, ...], with_flags: bool = False) -> dict[str, np.ndarray]:
        """Replica 0 of every array holding ``kinds`` (and the done flag and in-game flags), in one transfer."""
        dm = self.wrapper.data_manager
        names = list(dict.fromkeys(entry[0] for kind in kinds for entry in self._rows[kind] if entry is not None))
        tensors = [dm.data_on_device_via_torch(name)[0] for name in names]
        if with_flags:
            names.append("_done_")
            tensors.append(self.wrapper.done[:1])
            if self._active_flags is not None:
                names.append(ACTIVE_FLAGS)
                tensors.append(self._active_flags[0])
        return dict(zip(names, _pull(*tensors)))

    def _observations(self, arrays: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        out = {}
        for name in self.agents:
            array, row = self._rows["observations"][self.agent_index[name]]
            space = self._observation_spaces[name]
            out[name] = arrays[array][row].reshape(space.shape).astype(space.dtype, copy=True)
        return out

    def _infos(self, arrays: dict[str, np.ndarray]) -> dict[str, dict]:
        infos = {}
        for name in self.agents:
            entry = self._rows["action_mask"][self.agent_index[name]]
            infos[name] = {} if entry is None else {"action_mask": (arrays[entry[0]][entry[1]] != 0).astype(np.int8)}
        return infos

    # ------------------------------------------------------------ global state
    def _state_arrays(self) -> list[torch.Tensor]:
        dm = self.wrapper.data_manager
        return [dm.data_on_device_via_torch(name)[0] for name in self.state_names]

    def _state_size(self) -> int:
        if self._declared_state:
            return int(self.wrapper.state.shape[1])
        return sum(int(t.numel()) for t in self._state_arrays())

    def state(self) -> np.ndarray:
        """The replica's global state (see the module docstring), one host copy: its row of
        ``EnvWrapper.state`` where the env declares ``state_arrays``, else its restored arrays and time step."""
        if self._declared_state:
            return to_host(self.wrapper.state[0])
        return np.concatenate([a.reshape(-1) for a in _pull(*self._state_arrays())]).astype(np.float32)

    def render(self):
        return None

    def close(self):
        pass


def _pull(*tensors: torch.Tensor) -> list[np.ndarray]:
    """Host copies of several device tensors in one transfer (one sync, not one per tensor).

    They travel as float64, which holds float32 and int32 values exactly.
    """
    flat = to_host(torch.cat([t.reshape(-1).to(torch.float64) for t in tensors]))
    out, start = [], 0
    for t in tensors:
        out.append(flat[start:start + t.numel()].reshape(tuple(t.shape)))
        start += t.numel()
    return out
