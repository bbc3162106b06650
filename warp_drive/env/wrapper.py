"""``EnvWrapper``: many replicas of one environment, stepped by one kernel launch.

It pushes the environment's arrays to the device once, pushes its pools of
random start states, builds and binds its step kernel (and its reset kernel),
and from then on every call is a kernel launch on arrays that live on the device:

* ``step_all_envs()`` — one launch steps every replica;
* ``reset_only_done_envs()`` — kernels read ``_done_`` on the device and reset
  only those replicas (no ``done.any()`` round trip to the host);
* ``reset_all_envs()`` — the same kernels, forced.

``obs``, ``rewards`` and ``done`` are the device tensors the kernels write.

Where starts come from (``warp_drive/services/reset.py``), in the order a reset applies them:

* reset twins (arrays pushed with ``save_copy_and_apply_at_reset=True``): the
  env's slice is copied back from its ``*_at_reset`` copy, the same start each time;
* pools (``env.get_reset_pools(reset_pool_size, rng)``, drawn once on the host
  from ``seed``): the env copies one row picked on the device, so episodes start
  from ``reset_pool_size`` different states (the run config's ``env.reset_pool_size``);
* the env's reset kernel (``env.reset_kernel``, ``warp_drive/services/reset_kernel.py``):
  launched for the envs being reset, it draws each start on the device from
  ``(seed, env, reset count)`` and writes the first observation, mask and state
  there -- a new start every time, and no host memory.

Safety checks: at construction, ``observations`` and ``sampled_actions`` must
hold each agent's declared space (besides the (num_envs, num_agents) shape);
every ``step_all_envs`` first checks that the step's bound arrays were not
resized or re-pointed since the bind (a stale pointer would corrupt memory)
and, with ``validate_actions`` (default on the cpu executor, off on a GPU where
it would be a host sync per step), that discrete actions are inside their
spaces (:meth:`EnvWrapper.check_actions`, callable explicitly).

WarpDrive 2.7's constructor keywords and attribute names (``env_obj``,
``env_name``, ``env_backend``, ``cuda_data_manager``, ...) are those of its
subclass at WarpDrive's path, :mod:`warp_drive.env_wrapper` (written in
:mod:`warp_drive.compat.env_wrapper`); this class takes only its own.

The env's ``cuda_defines`` are compile-time defines, merged under ``EnvWrapper(defines=)``.

How the step is built and where the first episode starts is a :class:`StepBinding`, the one extension
point for envs not written to the contract: the default is the contract's (build ``cuda_source``, bind
``step_kernel`` by name, start from a device reset); WarpDrive's wrapper passes its own
(:class:`warp_drive.compat.envs.WarpDriveStepBinding`: the env's ``step()`` launches its kernel, and the
first episode starts from the state its Python ``reset()`` made).
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np
import torch

from warp_drive.runtime.backends import get_backend
from warp_drive.runtime.data_feed import DataFeed
from warp_drive.runtime.data_manager import AT_RESET_SUFFIX, DONE, TIMESTEP, DataManager, convert_value
from warp_drive.runtime.data_values import DEFAULT_RESET_POOL_SIZE, POOL_SUFFIX
from warp_drive.services.env_clock import DeviceClock
from warp_drive.env.environment import (
    ACTION_MASK,
    TERMINATED,
    THREAD_LAYOUTS,
    THREADS_PER_AGENT,
    THREADS_PER_ENV,
    TRUNCATED,
    Environment,
    check_space_width,
)
from warp_drive.runtime.function_manager import FLAT_BLOCK  # noqa: F401  (re-exported: env_wrapper's kept path, env_check)
from warp_drive.runtime.function_manager import FunctionFeed, FunctionManager, arguments_by_name
from warp_drive.env.group_arrays import resolve_group_arrays
from warp_drive.env.registry import get_env_class
from warp_drive.services.reset import EnvironmentReset
from warp_drive.services.sampler import random_seed

REQUIRED_ARRAYS = ("observations", "sampled_actions", "rewards")


class StepBinding:
    """How :class:`EnvWrapper` builds an env's step and starts its first episode (``EnvWrapper(step_binding=)``).

    Why an object: an env not written to the contract (WarpDrive's, whose ``step()`` launches its own kernel
    and whose Python ``reset()`` made the pushed state) takes part through a subclass given to the wrapper,
    so the contract (:class:`~warp_drive.env.environment.Environment`) declares native hooks only and the wrapper
    has no branch for such envs. This class is the contract's own binding.
    """

    # Whether the arrays as pushed are the first episode's start (an env's own host reset made them): then
    # neither the construction nor the first reset_all_envs() resets on the device. The contract's first
    # episode starts from a device reset (twins, pools, reset kernel).
    host_first_reset: bool = False

    def bind(self, wrapper: "EnvWrapper") -> tuple[Callable[[], None], list]:
        """Build the env's kernels into ``wrapper.function_manager``; return the step launch ``step_all_envs``
        calls and the names its arguments bind, in order (they name an array a stale-pointer check finds).

        The contract's: ``cuda_source`` built with ``wrapper.defines``, and each C parameter of
        ``step_kernel`` bound to the array or scalar of its own name (:func:`arguments_by_name`; an old
        ``step_args`` list is checked against those names), in the geometry of the env's thread layout,
        the kernel's own limits and the executor (``FunctionManager.bind_env_kernel``)."""
        env, functions, data = wrapper.env, wrapper.function_manager, wrapper.data_manager
        functions.compile_and_load(env.cuda_source_path(), defines=wrapper.defines or None)
        signature = functions.get_function(env.step_kernel).signature
        names = arguments_by_name(signature, data, env.step_args, owner=env.name)
        return functions.bind_env_kernel(env.step_kernel, FunctionFeed(data)(names), env.thread_layout), names


def make_env(env: Any, env_config: dict | None = None) -> Environment:
    """An environment instance from an instance, a class, or a registered name."""
    if isinstance(env, str):
        env = get_env_class(env)
    if isinstance(env, type) and issubclass(env, Environment):
        return env(**(env_config or {}))
    if isinstance(env, Environment):
        if env_config:
            raise ValueError("env_config applies when the environment is given as a class or a name, not an instance")
        return env
    what = env.__name__ if isinstance(env, type) else type(env).__name__
    raise TypeError(f"{what} is not a warp_drive Environment (an instance, its class or its registered name). "
                    "A WarpDrive-style env (a gym-style class whose step() launches Cuda<Name>Step) goes through "
                    "WarpDrive's own path: from warp_drive.env_wrapper import EnvWrapper; EnvWrapper(env_obj=...)")


class EnvWrapper:
    """``num_envs`` replicas of one environment on one device (see the module docstring).

    ``env``: an Environment instance, class or registered name; ``num_envs``;
    ``backend`` ("auto", "cpu", "cpu-gpu", "pycuda" or a Backend);
    ``blocks_per_env``; ``seed``; ``env_config`` (constructor arguments when
    ``env`` is a class or a name); ``reset_pool_size`` (the rows of each pool of
    start states, for an env with ``get_reset_pools``; 0: none); ``validate_actions``;
    ``defines`` (compile-time defines for the env's kernel, over the env's
    ``cuda_defines``); ``step_binding`` (how the step is built and the first
    episode starts, :class:`StepBinding`; default: the contract's).
    """

    def __init__(
        self,
        env: Any,
        num_envs: int = 1,
        backend: Any = "auto",
        blocks_per_env: int | None = None,
        seed: int | None = None,
        env_config: dict | None = None,
        reset_pool_size: int = DEFAULT_RESET_POOL_SIZE,
        validate_actions: bool | None = None,
        *,
        defines: dict | None = None,
        step_binding: StepBinding | None = None,
    ):
        if isinstance(num_envs, str):
            raise TypeError(f"EnvWrapper's second positional argument is num_envs, got {num_envs!r}")
        self.env = self._make_env(env, env_config)
        self.num_envs = int(num_envs)
        self.seed = random_seed() if seed is None else int(seed)
        self.backend = get_backend(backend)
        env_ = self.env
        self.defines = {**(env_.cuda_defines or {}), **(defines or {})}
        self.num_agents, self.episode_length = int(env_.num_agents), int(env_.episode_length)
        requested_blocks = self._requested_blocks_per_env(blocks_per_env)

        self.data_manager = DataManager(self.num_envs, self.num_agents, self.episode_length, backend=self.backend)
        feed = env_.data_dictionary(self.num_envs)
        self.data_manager.push_data_to_device(feed)
        # The env's own arrays (not its scalars): what Environment's checkpoint rule sorts into state and constants.
        self.env_array_names = tuple(n for n in feed if n in self.data_manager.array_names)
        # Each agent group's arrays: the shared ones, or its own (warp_drive/env/group_arrays.py).
        self.group_arrays = resolve_group_arrays(env_, self.data_manager, self.num_envs)
        self._check_shared_arrays()
        self._check_per_agent_sizes()
        self._mask_offsets = self._check_action_mask()
        self._check_state_arrays()
        self._check_active_array()
        self._push_reset_pools(reset_pool_size)
        self._state_ranges = self._check_checkpoint_declarations()

        self.function_manager = self._make_function_manager(requested_blocks)
        self.step_binding = StepBinding() if step_binding is None else step_binding
        self._step, self._step_argument_names = self.step_binding.bind(self)
        self._step_arguments = getattr(getattr(self._step, "_launch", None), "_packed", None)
        self._step_labels = [a[0] if isinstance(a, tuple) else a for a in self._step_argument_names]
        self._action_bounds = self._discrete_action_bounds()
        # Range-checking actions is a reduction and a host sync per step: on by
        # default where arrays live in host memory (the cpu executor: a few us),
        # off on a GPU (call check_actions() or pass validate_actions=True).
        if validate_actions is None:
            validate_actions = self.backend.capabilities.memory == "host"
        self.validate_actions = bool(validate_actions)
        if env_.thread_layout == THREADS_PER_ENV:
            self.blocks_per_env = 1
        else:
            grid = getattr(self._step, "grid", None)
            self.blocks_per_env = grid[1] if grid is not None else self.function_manager.blocks_per_env
        self.env_resetter = EnvironmentReset(self.function_manager, seed=self.seed)
        if env_.reset_kernel:  # the env's own starts, drawn on the device after the twins and pools
            self.env_resetter.use_reset_kernel(self.data_manager, env_.reset_kernel, env_.thread_layout,
                                               owner=self.name)
        # The framework's clock around the step, for an env that leaves it to the framework (env_clock.py).
        self._clock = DeviceClock(self.function_manager, self.data_manager) if env_.framework_clock else None
        # The env's optional Cuda<Name>Reset, launched by custom_reset_all_envs().
        self.env_resetter.register_custom_reset_function(self.data_manager, f"Cuda{self.name}Reset")
        # The first episode starts from a device reset (pool draws), unless the binding says the pushed
        # state is the first start (StepBinding.host_first_reset).
        if not self.step_binding.host_first_reset:
            self._force_reset()
        self._first_reset_pending = True

    @staticmethod
    def _make_env(env: Any, env_config: dict | None) -> Environment:
        """The wrapped env; a subclass may accept more kinds of env (WarpDrive's does)."""
        return make_env(env, env_config)

    def _make_function_manager(self, blocks_per_env: int | None) -> FunctionManager:
        """The function manager the env's kernels load into; a subclass may use a subclass (WarpDrive's does)."""
        return FunctionManager(self.num_envs, self.num_agents, blocks_per_env, self.backend)

    # ------------------------------------------------------------ setup
    def _requested_blocks_per_env(self, requested: int | None) -> int | None:
        layout = self.env.thread_layout
        if layout not in THREAD_LAYOUTS:
            raise ValueError(f"{self.env.name}.thread_layout must be one of {', '.join(map(repr, THREAD_LAYOUTS))}; "
                             f"got {layout!r}")
        if layout != THREADS_PER_AGENT and requested not in (None, 1):
            raise ValueError(f"{self.env.name} runs one block per env (thread_layout {layout!r}); "
                             "blocks_per_env does not apply")
        return None if requested is None else int(requested)

    def agents_on_shared(self, kind: str) -> list[int]:
        """The agents whose ``kind`` lives in the shared array (their group does not own one)."""
        return sorted(a for g in self.group_arrays.values() if not g.owned[kind] for a in g.agents)

    def _check_shared_arrays(self) -> None:
        """The shared arrays are ``(E, N, ...)``; resolve_group_arrays made sure every agent has one of each kind."""
        dm = self.data_manager
        for name in REQUIRED_ARRAYS:
            if not dm.is_data_on_device(name):
                continue
            shape = dm.get_shape(name)
            if shape[:2] != (self.num_envs, self.num_agents):
                raise ValueError(
                    f"{self.env.name}: {name!r} has shape {shape}; expected ({self.num_envs}, {self.num_agents}, ...)"
                )

    def _check_per_agent_sizes(self) -> None:
        """``observations`` and ``sampled_actions`` must hold exactly as many values per agent as each agent's
        declared space, both ways (:func:`~warp_drive.env.environment.check_space_width`)."""
        dm = self.data_manager
        groups = {a: g.group for g in self.group_arrays.values() for a in g.agents}
        for name in ("observations", "sampled_actions"):
            if dm.is_data_on_device(name):
                for agent in self.agents_on_shared(name):
                    check_space_width(self.env, name, dm.get_shape(name), agent, groups.get(agent))

    def _check_state_arrays(self) -> None:
        dm = self.data_manager
        for name in self.env.state_arrays:
            if not dm.is_data_on_device(name):
                raise ValueError(f"{self.env.name}.state_arrays names {name!r}, which get_data_dictionary() does "
                                 f"not define")
            shape = dm.get_shape(name)
            if len(shape) == 0 or shape[0] != self.num_envs:
                raise ValueError(f"{self.env.name}.state_arrays: {name!r} has shape {shape}; a state array has the "
                                 f"env dimension first ({self.num_envs}, ...)")

    def _check_active_array(self) -> None:
        name, dm = self.env.active_array, self.data_manager
        if not name:
            return
        expected = (self.num_envs, self.num_agents)
        if not dm.is_data_on_device(name) or (dm.get_shape(name), dm.get_dtype(name)) != (expected, "int32"):
            given = f"{dm.get_dtype(name)} {dm.get_shape(name)}" if dm.is_data_on_device(name) else "not defined"
            raise ValueError(f"{self.env.name}.active_array {name!r} is {given}; expected int32 {expected} (1 while "
                             f"an agent is in the game), with a reset twin")

    def _check_action_mask(self) -> torch.Tensor | None:
        """When the env declares ``action_mask``: check it is int32 ``(E, N, A)`` with ``A`` every agent's
        discrete actions, and return each head's first column in it (None without a mask)."""
        from gymnasium import spaces

        dm = self.data_manager
        if not dm.is_data_on_device(ACTION_MASK):
            return None
        owners = [g.group for g in self.group_arrays.values() if g.owned["sampled_actions"]]
        if owners:
            raise ValueError(f"{self.env.name}: {ACTION_MASK!r} masks the shared 'sampled_actions', but group(s) "
                             f"{owners} own their action arrays: give such a group its own 'action_mask_<group>'")
        sizes = []
        for agent in range(self.num_agents):
            space = self.env.action_space(agent)
            if isinstance(space, spaces.Discrete) and int(space.start) == 0:
                sizes.append((int(space.n),))
            elif isinstance(space, spaces.MultiDiscrete) and not np.any(space.start):
                sizes.append(tuple(int(n) for n in np.ravel(space.nvec)))
            else:
                raise ValueError(f"{self.env.name}: {ACTION_MASK!r} masks discrete actions counted from 0, but agent "
                                 f"{agent}'s action space is {space}. Fix: drop the mask, or give every agent a "
                                 f"Discrete(n) or MultiDiscrete(nvec) space")
        if len(set(sizes)) != 1:
            raise ValueError(f"{self.env.name}: {ACTION_MASK!r} needs one action layout for all agents; they have "
                             f"{sorted(set(sizes))}")
        heads = sizes[0]
        expected = (self.num_envs, self.num_agents, sum(heads))
        shape, dtype = dm.get_shape(ACTION_MASK), dm.get_dtype(ACTION_MASK)
        if shape != expected or dtype != "int32":
            raise ValueError(f"{self.env.name}: {ACTION_MASK!r} is {dtype} {shape}; expected int32 {expected} (1 where "
                             f"an action is legal; the {len(heads)} head(s) of {list(heads)} actions side by side)")
        offsets = np.concatenate([[0], np.cumsum(heads)[:-1]]).astype(np.int64)
        return torch.from_numpy(offsets).to(self.data_manager.device)

    def _discrete_action_bounds(self):
        """``(low, high)`` int32 tensors broadcastable to the actions array, or None
        (continuous actions, or spaces that do not fit the array)."""
        from gymnasium import spaces

        if not self.data_manager.is_data_on_device("sampled_actions"):
            return None
        actions = self.actions
        if actions.dtype != torch.int32:
            return None
        heads = int(np.prod(actions.shape[2:], dtype=np.int64)) if actions.dim() > 2 else 1
        low = np.full((self.num_agents, heads), np.iinfo(np.int32).min, np.int64)  # rows of agents with their own
        high = np.full((self.num_agents, heads), np.iinfo(np.int32).max, np.int64)  # arrays are never read
        for agent in self.agents_on_shared("sampled_actions"):
            space = self.env.action_space(agent)
            if isinstance(space, spaces.Discrete):
                lo, hi = np.array([int(space.start)]), np.array([int(space.start + space.n - 1)])
            elif isinstance(space, spaces.MultiDiscrete):
                lo, hi = np.ravel(space.start), np.ravel(space.start + space.nvec - 1)
            elif isinstance(space, spaces.MultiBinary):
                lo, hi = np.zeros(int(np.prod(space.shape))), np.ones(int(np.prod(space.shape)))
            else:
                return None
            if lo.size != heads:
                return None
            low[agent], high[agent] = lo, hi
        shape = (1, self.num_agents, *actions.shape[2:])
        as_tensor = lambda a: torch.from_numpy(a.astype(np.int32)).reshape(shape).to(actions.device)  # noqa: E731
        return as_tensor(low), as_tensor(high)

    def check_actions(self) -> None:
        """Raise ValueError if ``sampled_actions`` holds a discrete action outside its
        agent's action space (a kernel would index its tables out of bounds), or one
        that the env's ``action_mask`` forbids.

        One or two reductions and a host sync; ``step_all_envs`` calls it on every step
        when ``validate_actions`` is set (the default on the cpu executor).
        """
        if self._action_bounds is None:
            return
        low, high = self._action_bounds
        actions = self.actions
        bad = (actions < low) | (actions > high)
        if not bool(bad.any()):
            if self._mask_offsets is not None:
                self._check_masked_actions(actions)
            return
        where = tuple(int(i) for i in torch.nonzero(bad)[0])
        env, agent = where[0], where[1]
        head = f", head {where[2]}" if len(where) > 2 else ""
        lo, hi = int(low[(0, *where[1:])]), int(high[(0, *where[1:])])
        raise ValueError(
            f"{self.env.name}: sampled_actions[{', '.join(map(str, where))}] = {int(actions[where])} (env {env}, agent "
            f"{agent}{head}) is outside agent {agent}'s action space {self.env.action_space(agent)}: valid actions "
            f"are {lo}..{hi}. Fix: write actions in that range (the step kernel would index its tables out of bounds)"
        )

    def _check_masked_actions(self, actions: torch.Tensor) -> None:
        """Raise ValueError if an action (in range) is masked by ``action_mask``."""
        mask = self.action_mask
        columns = actions.long().reshape(*actions.shape[:2], -1) + self._mask_offsets  # (E, N, heads)
        legal = mask.gather(-1, columns)
        if bool((legal != 0).all()):
            return
        env, agent, head = (int(i) for i in torch.nonzero(legal == 0)[0])
        row = mask[env, agent].tolist()
        raise ValueError(
            f"{self.env.name}: agent {agent} of env {env} chose action "
            f"{int(columns[env, agent, head] - self._mask_offsets[head])}{f' (head {head})' if columns.shape[-1] > 1 else ''}"
            f", which its {ACTION_MASK!r} row {row} masks. Fix: "
            f"choose among the actions the mask allows (the trainer's sampler does)"
        )

    def _check_checkpoint_declarations(self) -> dict[str, tuple[int, int]]:
        """``written_arrays`` must name arrays of the env and ``array_ranges()`` int32 ones with low <= high; the
        bounds of every range-checked state array (twins included), for :meth:`state_ranges`."""
        env, dm = self.env, self.data_manager
        unknown = [n for n in env.written_arrays if n not in self.env_array_names]
        if unknown:
            raise ValueError(f"{env.name}.written_arrays names {', '.join(map(repr, unknown))}, which "
                             f"get_data_dictionary does not push; list only the env's own arrays")
        ranges = {DONE: (0, TRUNCATED), TIMESTEP: (0, self.episode_length)}
        for name, bounds in dict(env.array_ranges()).items():
            ok = name in self.env_array_names and dm.get_dtype(name) == "int32"
            if not ok or len(bounds) != 2 or int(bounds[0]) > int(bounds[1]):
                raise ValueError(f"{env.name}.array_ranges(): {name!r}: {bounds!r} must be (low, high) with "
                                 f"low <= high for one of the env's int32 arrays")
            ranges[name] = (int(bounds[0]), int(bounds[1]))
        for name in [n for n in ranges if n in dm.reset_data_list]:
            ranges[name + AT_RESET_SUFFIX] = ranges[name]
        return ranges

    def state_ranges(self) -> dict[str, tuple[int, int]]:
        """Inclusive bounds of the int32 state arrays a checkpoint may hold: ``_done_``, ``_timestep_`` and
        the env's ``array_ranges()``, with the ``_at_reset`` twins of those."""
        return dict(self._state_ranges)

    def constant_arrays(self) -> list[str]:
        """The arrays no step or reset writes (Environment's checkpoint rule): the env's arrays that have no
        reset twin and are not its agents' observations, actions, rewards or masks, its ``active_array``, one
        of its ``written_arrays`` or an array its reset kernel may write; and the reset pools. A checkpoint must hold exactly their values."""
        dm = self.data_manager
        state = {*dm.reset_data_list, *REQUIRED_ARRAYS, ACTION_MASK, self.env.active_array, *self.env.written_arrays,
                 *self.reset_kernel_writes}
        for group in self.group_arrays.values():
            state.update(group.names.values())
            if group.mask:
                state.add(group.mask)
        pools = dm.reset_target_to_pool.values()
        return [n for n in self.env_array_names if n not in state] + [n for n in pools if n not in state]

    @property
    def reset_kernel_writes(self) -> tuple[str, ...]:
        """The arrays the env's reset kernel may write (its non-const pointer parameters); () without one."""
        kernel = self.env_resetter.reset_kernel
        return () if kernel is None else kernel.writes

    def _push_reset_pools(self, pool_size: int) -> None:
        if isinstance(pool_size, bool) or not isinstance(pool_size, (int, np.integer)) or pool_size < 0:
            raise ValueError(f"{self.name}: reset_pool_size must be an int >= 0 (rows of each pool of start "
                             f"states; 0: none), got {pool_size!r}")
        pools = self.env.get_reset_pools(int(pool_size), np.random.default_rng(self.seed))
        # The pools reseed() redraws: those get_reset_pools drew. A pool the env pushed in its own data
        # dictionary is its own, drawn once, and stays as it is.
        self._drawn_pool_targets = tuple(pools)
        if not pools:
            return
        feed = DataFeed()
        for target, pool in pools.items():
            feed.add_pool_for_reset(target + POOL_SUFFIX, pool, target)
        self.data_manager.push_data_to_device(feed)

    def reseed(self, seed: int, reset: bool = True) -> None:
        """Restart the start-state randomness from ``seed`` and (``reset``) reset every replica.

        The pools of ``get_reset_pools`` are redrawn in place (same shapes: the
        reset kernels' pointer tables stay valid; a pool the env pushed in its
        own data dictionary stays as it is) and the reset counter restarts (the
        env's reset kernel draws from ``(seed, env, counter)``), so with
        ``reset`` the state equals that of a new ``EnvWrapper(..., seed=seed)``. Without
        it the replicas keep their state and draw from the new randomness at
        their next reset (a Gymnasium ``reset(seed=, options={"reset_mask":})``
        resets the masked replicas alone right after).
        """
        self.seed = int(seed)
        dm = self.data_manager
        targets = {target: dm.reset_target_to_pool[target] for target in self._drawn_pool_targets}
        if targets:
            size = dm.get_shape(next(iter(targets.values())))[0]
            pools = self.env.get_reset_pools(size, np.random.default_rng(self.seed))
            if set(pools) != set(targets):
                raise RuntimeError(f"{self.name}.get_reset_pools() returned pools for {sorted(pools)}; the wrapper "
                                   f"was built with pools for {sorted(targets)}")
            for target, pool in pools.items():
                device_pool = dm.data_on_device_via_torch(targets[target])
                host = np.ascontiguousarray(convert_value(targets[target], pool))
                if tuple(host.shape) != tuple(device_pool.shape):
                    raise RuntimeError(f"{self.name}: pool for {target!r} redrawn with shape {host.shape}; the device "
                                       f"pool has {tuple(device_pool.shape)}")
                device_pool.copy_(torch.from_numpy(host))
        self.env_resetter.init_reset_pool(seed=self.seed)
        if reset:
            self._force_reset()

    # ------------------------------------------------------------ stepping
    def step_all_envs(self) -> None:
        """Advance every replica by one step (one launch).

        The kernel reads the actions in ``sampled_actions`` (``wrapper.actions``)
        on the device. Before the launch the step's bound arrays are checked
        to still be the memory they were bound to (a resized or re-pointed
        array raises instead of handing the kernel a stale pointer), and with
        ``validate_actions`` the actions are range-checked (:meth:`check_actions`). For an env with
        ``framework_clock`` the clock kernels run around the step (``_timestep_`` advanced before it,
        truncation at ``episode_length`` after it; ``warp_drive/services/env_clock.py``).
        """
        if self._step_arguments is not None:
            self._step_arguments.verify(self._step_labels)
        if self.validate_actions:
            self.check_actions()
        if self._clock is not None:
            self._clock.step(self._step)
        else:
            self._step()

    def reset_only_done_envs(self, undo_done_after_reset: bool = True) -> None:
        """Reset the replicas whose ``_done_`` flag is set, on the device."""
        self.env_resetter.reset_when_done(self.data_manager, mode="if_done",
                                          undo_done_after_reset=undo_done_after_reset)

    def _force_reset(self) -> None:
        self.env_resetter.reset_when_done(self.data_manager, mode="force_reset")

    def reset_all_envs(self) -> None:
        """Reset every replica (each draws a new start state where the env has pools).

        Where the step binding's ``host_first_reset`` says the pushed state is
        the first episode's start (an env's own Python ``reset()`` made it), the
        first call leaves the device alone.
        """
        first_call, self._first_reset_pending = self._first_reset_pending, False
        if not (first_call and self.step_binding.host_first_reset):
            self._force_reset()

    def custom_reset_all_envs(self, args: list | None = None, block=None, grid=None) -> None:
        """Launch the env's own reset kernel ``Cuda<Name>Reset`` on ``args`` (array or meta names).

        The wrapper registers it when the env's module defines it; the kernel
        chooses which envs it resets.
        """
        self.env_resetter.custom_reset(args=args, block=block, grid=grid)

    def init_reset_pool(self, seed: int | None = None) -> None:
        """Restart the pool draws of resets from ``seed`` (a random seed when None)."""
        self.env_resetter.init_reset_pool(self.data_manager, seed)

    # ------------------------------------------------------------ device views
    @property
    def obs(self) -> torch.Tensor:
        return self.data_manager.data_on_device_via_torch("observations")

    @property
    def rewards(self) -> torch.Tensor:
        return self.data_manager.data_on_device_via_torch("rewards")

    @property
    def actions(self) -> torch.Tensor:
        return self.data_manager.data_on_device_via_torch("sampled_actions")

    @property
    def active(self) -> torch.Tensor | None:
        """``(num_envs, num_agents)`` int32, 1 while an agent is in the game (the env's ``active_array``); None
        when every agent always is."""
        name = self.env.active_array
        return self.data_manager.data_on_device_via_torch(name) if name else None

    @property
    def state(self) -> torch.Tensor | None:
        """``(num_envs, S)`` float32: the env's ``state_arrays`` flattened side by side, computed on the device
        (no host copy); None when the env declares no state."""
        names = self.env.state_arrays
        if not names:
            return None
        dm = self.data_manager
        return torch.cat([dm.data_on_device_via_torch(n).reshape(self.num_envs, -1).float() for n in names], dim=1)

    @property
    def action_mask(self) -> torch.Tensor | None:
        """``(num_envs, num_agents, A)`` int32, 1 where an action is legal; None when the env has no mask."""
        return None if self._mask_offsets is None else self.data_manager.data_on_device_via_torch(ACTION_MASK)

    @property
    def done(self) -> torch.Tensor:
        """``(num_envs,)`` int32: 0 running, 1 terminated, 2 truncated (time limit)."""
        return self.data_manager.data_on_device_via_torch(DONE)

    @property
    def terminated(self) -> torch.Tensor:
        return self.done == TERMINATED

    @property
    def truncated(self) -> torch.Tensor:
        return self.done == TRUNCATED

    # ------------------------------------------------------------ spaces
    @property
    def observation_spaces(self) -> dict[int, Any]:
        return {agent: self.env.observation_space(agent) for agent in range(self.num_agents)}

    @property
    def action_spaces(self) -> dict[int, Any]:
        return {agent: self.env.action_space(agent) for agent in range(self.num_agents)}

    @property
    def name(self) -> str:
        return self.env.name
