"""The environment contract: a Python class plus one CUDA C step kernel.

An environment declares

* its scalar parameters once, as a table (``parameters``: names, types, defaults, bounds, docs; see
  ``warp_drive/env/env_parameters.py``): the default constructor validates and sets them, the numeric ones
  reach the kernel as scalars of their names, and they are the run config's ``env.config`` keys;
* its arrays, with the env dimension first (``get_data_dictionary``), including
  the reserved ``observations``, ``sampled_actions`` and ``rewards``; arrays
  that must return to a start state carry ``save_copy_and_apply_at_reset=True``;
* optionally pools of random start states (``get_reset_pools``): on every reset
  each done env draws one pool row on the device, so episodes start differently
  and a fixed seed reproduces them (``reset_pool_size`` rows, a run-config key);
* optionally a reset kernel (``reset_kernel``, ``warp_drive/services/reset_kernel.py``):
  its own CUDA C that draws every start on the device with Philox from
  (``reset_seed``, env, ``reset_count``) and writes the arrays that follow from
  it (first observation, mask, state): a new start at every reset, with no
  host pools; ``reference_reset`` is its optional NumPy reference;
* its per-agent Gymnasium spaces and its agent groups (who can share a policy);
* the step kernel: ``cuda_source`` (a ``.cu`` next to the class), the kernel's
  name and the names of its arguments in order (arrays, scalars pushed as meta
  info, and the reserved ``_done_``, ``_timestep_``, ``n_agents``,
  ``episode_length``);
* a NumPy reference of the step working on the very same named arrays, which the
  consistency checker runs beside the kernel;
* optionally an action mask, ``action_mask`` (``ACTION_MASK``): int32
  ``(num_envs, num_agents, A)`` with ``A`` the agent's discrete actions (the
  sum over heads for ``MultiDiscrete``), 1 where an action is legal. The
  kernel writes the next step's mask (a reset twin gives the first), every
  head of every row keeps at least one legal action, and the sampler and the
  trainer never choose a masked action;
* how the kernel maps agents onto threads (``thread_layout``): ``AGENT_PHASES``
  (recommended: the step loops over agents with ``WD_FOR_EACH_AGENT``, so the
  executor chooses the threads and any number of agents fits one block),
  ``THREADS_PER_AGENT`` (the classic thread = agent; the default) or
  ``THREADS_PER_ENV`` (one thread per replica, for single-agent envs).

The step kernel never resets an environment: resets are the framework's (twins,
pools and the env's reset kernel, in that order, ``warp_drive/services/reset.py``).
``_done_`` is 1 when an episode terminated and 2 when it was truncated by the
time limit, so returns bootstrap correctly.

Checkpoints: state and constants. A checkpoint restores an env's *state*, the
arrays a step or a reset may change, and checks its *constants*, which must be
the values the env was built with. The rule, per array the env pushes:

* state: ``_done_`` and ``_timestep_``; every array declared with
  ``save_copy_and_apply_at_reset=True`` (and its ``_at_reset`` twin); the
  agents' ``observations``, ``sampled_actions``, ``rewards`` and action masks
  (shared or a group's own); ``active_array``; the arrays the reset kernel
  takes as non-const pointers (it may write them); and the arrays named in
  ``written_arrays`` -- anything else the step writes (scratch, counters kept
  across episodes) must be listed there;
* constant: every other array (parameters, action tables, index tables such as
  TagContinuous's ``tagger_ids``) and the reset pools. A checkpoint whose copy
  of a constant differs from the env's own was saved with a different env
  config and is refused, naming the array; constants are never copied from a
  checkpoint, so a received one cannot plant an index that points out of bounds.

Restored state must have the env's shapes and dtypes, float state must be
finite, and int32 state must lie in the inclusive bounds of ``array_ranges()``
(``_done_`` in 0..2 and ``_timestep_`` in 0..episode_length always): declare
there every int state array a kernel indexes with. Anything that does not fit
is refused naming the array, before any array is changed.

One env on the host: ``reset()`` and ``step(actions)``. Every environment also
runs as a single, gym-style multi-agent env in NumPy, with no executor and no
kernel: ``reset(seed=None)`` builds one replica's arrays from
``get_data_dictionary(1)`` (a row of ``get_reset_pools`` replaces its targets
where the env has pools, as the framework's reset does, drawn with
``np.random.default_rng(seed)``) and returns ``{agent id: observation}``;
``step(actions)`` takes ``{agent id: action}`` (or one array over the agents),
advances that replica with ``reference_step`` -- the very reference the
consistency checker compares with the kernel -- and returns
``(observations, rewards, done, info)`` as dicts keyed by agent id, with
``done = {"__all__": episode over}`` (the multi-agent convention of RLlib's
``MultiAgentEnv``) and ``info = {"terminated": ..., "truncated": ...}``. The
replica's arrays are ``single_env_arrays`` (env dimension 1, under the
kernel's names), readable and writable between steps. It is a reference for
reading, testing and debugging an env; training runs the kernel through
``EnvWrapper``.
"""

from __future__ import annotations

import abc
import inspect
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Mapping, Sequence

import numpy as np

if TYPE_CHECKING:
    from warp_drive.env.host_replica import KernelReplica
from warp_drive.services import env_clock
from warp_drive.runtime.data_feed import DataFeed
from warp_drive.runtime.data_values import DONE, RESET_COUNT, RESET_SEED, TIMESTEP, convert_value
from warp_drive.env.env_parameters import Parameter, ParameterError, resolve  # noqa: F401  (re-exported)
from warp_drive.env.env_parameters import describe as describe_parameters
from warp_drive.runtime.layouts import (  # noqa: F401  (re-exported: env classes name their layout from here)
    AGENT_PHASES,
    THREAD_LAYOUTS,
    THREADS_PER_AGENT,
    THREADS_PER_ENV,
)

def require_finite(env_name: str, **values: Any) -> None:
    """Refuse NaN and inf among an env's float parameters, naming each: a NaN acceleration trained on
    silently (every position NaN) and an infinite grid failed later, in the GIF writer. None is let through
    (an option left unset)."""
    bad = [f"{name}={value!r}" for name, value in values.items()
           if value is not None and not np.isfinite(np.asarray(value, dtype=np.float64)).all()]
    if bad:
        raise ValueError(f"{env_name}: {', '.join(bad)}: must be finite numbers")


def _constructor_signature(cls: type) -> inspect.Signature | None:
    """``cls``'s constructor as a caller sees it: the keywords of each ``__init__`` that passes ``**config``
    on, down to Environment's, which takes the parameter table (keyword-only, with the defaults). None (inspect
    reads the constructor itself) for an env without a table, or whose own ``__init__`` takes no ``**config``."""
    params: list[inspect.Parameter] = []
    for klass in cls.__mro__:
        init = vars(klass).get("__init__")
        if init is None:
            continue
        if klass is Environment:
            if not cls.parameters:  # no table: the constructors' own signature is the truth
                return None
            params += [inspect.Parameter(p.name, inspect.Parameter.KEYWORD_ONLY, default=p.default)
                       for p in cls.parameters]
            break
        own = list(inspect.signature(init).parameters.values())[1:]
        named = [p for p in own if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]
        params += named if not params else [p.replace(kind=p.KEYWORD_ONLY) for p in named]
        if not any(p.kind == p.VAR_KEYWORD for p in own):
            if klass is cls:
                return None
            break
    seen: set[str] = set()
    unique = [p for p in params if not (p.name in seen or seen.add(p.name))]  # a name once, where it comes first
    positional = [p for p in unique if p.kind == p.POSITIONAL_OR_KEYWORD]
    return inspect.Signature(positional + [p for p in unique if p.kind != p.POSITIONAL_OR_KEYWORD])


def check_space_width(env: "Environment", name: str, shape: tuple, agent: int, group: str | None = None) -> None:
    """Refuse a shared ``observations`` / ``sampled_actions`` array of ``shape`` ``(E, N, ...)`` whose values per
    agent are not exactly those of ``agent``'s declared space, both ways: a smaller array would be read or
    written past its end by the kernel, and a larger one would be cut to the space by the trainer (a reshape
    that failed at the first rollout naming no array, or a policy reading part of what the kernel wrote)."""
    kind = "observation" if name == "observations" else "action"
    space = env.observation_space(agent) if name == "observations" else env.action_space(agent)
    space_shape = getattr(space, "shape", None)
    if space_shape is None:
        return
    per_agent = int(np.prod(shape[2:], dtype=np.int64))
    needed = int(np.prod(space_shape, dtype=np.int64)) if space_shape else 1
    if per_agent == needed:
        return
    consequence = ("the step kernel would access it past its end" if per_agent < needed else
                   "the policy would see only part of each agent's row")
    in_group = f" (group {group!r})" if group is not None else ""
    raise ValueError(
        f"{env.name or type(env).__name__}: {name!r} has shape {tuple(shape)}, {per_agent} value(s) per agent, but "
        f"agent {agent}{in_group} has the {kind} space {space} of {needed}: "
        f"{'narrower' if needed < per_agent else 'wider'} than the array ({consequence}). Fix: allocate {name!r} as "
        f"({shape[0]}, {shape[1]}, *{tuple(space_shape)}) in get_data_dictionary(), or declare the {kind} space "
        f"with {per_agent} value(s)")


TERMINATED = 1
TRUNCATED = 2
# The optional per-agent mask of legal discrete actions (see the module docstring).
ACTION_MASK = "action_mask"



class Environment(abc.ABC):
    """Base class of warp_drive environments (see the module docstring).

    The three abstract methods are the contract (spaces and arrays); a class that misses one cannot be
    instantiated (a clear error at construction rather than mid-run). ``reference_step`` is optional.
    """

    name: ClassVar[str] = ""
    cuda_source: ClassVar[str | Path] = ""
    step_kernel: ClassVar[str] = ""
    step_args: ClassVar[Sequence[str]] = ()
    thread_layout: ClassVar[str] = THREADS_PER_AGENT
    # Arrays the consistency checker leaves out: scratch whose contents may
    # legitimately depend on the order threads ran in.
    consistency_skip: ClassVar[Sequence[str]] = ()

    num_agents: int
    episode_length: int

    # ---------------------------------------------------------------- parameters, declared once
    # The env's scalar parameters (warp_drive/env/env_parameters.py): the default constructor validates them and
    # sets them as attributes, data_dictionary() pushes the numeric ones as kernel scalars of their names, and
    # they are the run config's env.config keys and what `warp-drive envs --describe` shows.
    parameters: ClassVar[Sequence[Parameter]] = ()
    # Whether the framework owns the clock (warp_drive/services/env_clock.py): it advances _timestep_ before the step
    # kernel and sets _done_ = 2 at episode_length after it, so neither the kernel nor the reference does.
    # False (the default): the kernel keeps its own, as WarpDrive's did.
    framework_clock: ClassVar[bool] = False

    def __init__(self, **config: Any):
        """The default constructor: every declared parameter, from ``config`` or its default, validated and
        set as an attribute (an env with its own ``__init__`` may call it, or :meth:`set_parameters`)."""
        self.set_parameters(config)

    def set_parameters(self, config: Mapping[str, Any]) -> dict[str, Any]:
        """Validate ``config`` against the table (unknown keys refused) and set every parameter as an
        attribute; returns the values. One-line :class:`ParameterError` naming the env, parameter and fix."""
        values = resolve(self.name or type(self).__name__, self.parameters, config, known=self.config_keys())
        for name, value in values.items():
            setattr(self, name, value)
        return values

    def __init_subclass__(cls, **kwargs: Any):
        super().__init_subclass__(**kwargs)
        # What inspect.signature(cls) shows: the table's keywords, where they reach the default constructor
        # through **config (PettingZoo's adapter asks it whether an env takes ``seed``; help() shows it).
        cls.__signature__ = _constructor_signature(cls)

    @classmethod
    def config_keys(cls) -> list[str]:
        """The keys ``env.config`` may hold: the named keywords of the constructor, the declared parameters
        among them (those an env's own ``__init__`` takes beside the table first)."""
        keys = [p.name for p in inspect.signature(cls).parameters.values()
                if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]
        return list(dict.fromkeys([*keys, *(p.name for p in cls.parameters)]))

    @classmethod
    def describe(cls) -> str:
        """The parameter table as text (name, type, default, bounds, kernel, doc); for an env without one,
        its constructor's signature."""
        if cls.parameters:
            return describe_parameters(cls.parameters)
        return f"{cls.__name__}{inspect.signature(cls)}"

    # ---------------------------------------------------------------- optional hooks
    # Every attribute the wrapper or the checker reads from an env is declared
    # here with its default; an env sets only the ones it needs. An env that is
    # not written to this contract (WarpDrive's, which launches its own step)
    # takes part through the wrapper's StepBinding (warp_drive/env/wrapper.py), not
    # through hooks here.
    # Compile-time defines of the step's source (-DNAME=value, on both executors).
    cuda_defines: ClassVar[Mapping[str, str]] = {}
    # The consistency checker's tolerances for this env (None: its defaults; 0.0: bit-exact).
    consistency_atol: ClassVar[float | None] = None
    consistency_rtol: ClassVar[float | None] = None
    # The arrays (env dimension first) that make up the env's global state, flattened and concatenated per
    # env: what a centralised critic reads (critic_input: state). Compact (positions, velocities, ...), so
    # it stays small with many agents where concatenated observations would not. Empty: no state.
    state_arrays: ClassVar[Sequence[str]] = ()
    # An int32 (num_envs, num_agents) array the kernel keeps at 1 while an agent is in the game and sets to 0
    # when it leaves (e.g. a tagged runner): the step it leaves ends its own episode (a termination), and
    # its samples until the env resets count for nothing in the trainer's losses. "": every agent stays.
    active_array: ClassVar[str] = ""
    # Arrays the step (or a custom reset) writes that have no reset twin and are none of the agents'
    # observations, actions, rewards or masks (scratch, counters kept across episodes): a checkpoint restores
    # them as state. Every other array without a twin is a constant (see the module docstring).
    written_arrays: ClassVar[Sequence[str]] = ()
    # The env's own reset kernel, a kernel of cuda_source (warp_drive/services/reset_kernel.py has its contract): it
    # draws each start on the device with Philox from (reset_seed, env, reset_count) and writes the arrays
    # that follow from it (first observation, mask, state), after the twins and pools, for exactly the envs
    # whose done flag is set. "": none (the twins and pools make every start).
    reset_kernel: ClassVar[str] = ""

    # ---------------------------------------------------------------- source
    @classmethod
    def cuda_source_path(cls) -> Path:
        """``cuda_source`` resolved against the directory of the file of the class
        that declares it (a subclass elsewhere inherits its parent's kernel)."""
        path = Path(cls.cuda_source)
        if not str(cls.cuda_source):
            raise ValueError(f"environment {cls.__name__} does not set cuda_source")
        if not path.is_absolute():
            owner = next(c for c in cls.__mro__ if "cuda_source" in vars(c))
            path = Path(inspect.getfile(owner)).resolve().parent / path
        if not path.is_file():
            raise FileNotFoundError(f"environment {cls.__name__}: cuda_source {path} does not exist")
        return path

    # ---------------------------------------------------------------- spaces
    @abc.abstractmethod
    def observation_space(self, agent_id: int):
        """The Gymnasium observation space of ``agent_id``."""

    @abc.abstractmethod
    def action_space(self, agent_id: int):
        """The Gymnasium action space of ``agent_id``."""

    def agent_groups(self) -> dict[str, list[int]]:
        """Groups of agents with identical spaces (candidates for one policy)."""
        return {"shared": list(range(self.num_agents))}

    # ---------------------------------------------------------------- data
    @abc.abstractmethod
    def get_data_dictionary(self, num_envs: int) -> DataFeed:
        """The env's arrays (env dimension first) and scalars, with reset/log flags."""

    def get_reset_pools(self, pool_size: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
        """Random start states ``{array name: (pool_size, *per-env shape)}``; empty for fixed starts.

        Pools of the same size are drawn with the same row per env, so a
        state array and its observations stay consistent.
        """
        return {}

    def array_ranges(self) -> dict[str, tuple[int, int]]:
        """Inclusive bounds ``{name: (low, high)}`` of int32 state arrays, checked when a checkpoint is
        restored (their ``_at_reset`` twins too): every one a kernel indexes with (an agent id, a level that
        picks a table row), so a received checkpoint cannot make it read or write out of bounds. Empty: none."""
        return {}

    # ---------------------------------------------------------------- rendering (optional)
    # Arrays recorded at every step of one env for ``render``; empty: the env
    # cannot draw itself (``warp-drive train`` then writes no episode GIF).
    render_arrays: ClassVar[Sequence[str]] = ()

    def render(self, frames: dict[str, np.ndarray], out_path: str | Path) -> Path:
        """Draw one episode to the GIF ``out_path`` and return its path.

        ``frames[name]`` is ``(T + 1, *per-env shape)`` for each name in
        ``render_arrays``: row 0 after the reset, row ``t`` after step ``t``,
        of one env. Anything constant (agent types, sizes) the env knows
        itself. The helpers of ``warp_drive.env.rendering`` draw markers
        and polylines; this method stays NumPy/matplotlib, never executor code.
        """
        raise NotImplementedError(f"environment {type(self).__name__} has no renderer (set render_arrays and "
                                  f"override render)")

    # ---------------------------------------------------------------- reference (optional)
    def reference_step(self, arrays: dict[str, np.ndarray]) -> None:
        """Optional: advance every env by one step in NumPy, updating ``arrays`` in place.

        ``arrays`` holds host copies of all the env's device arrays (env dimension first) and its scalars,
        under the same names the kernel uses. It is the porting oracle: with one, the consistency checker
        steps it beside the kernel and names the first array that diverges (how a NumPy or PettingZoo env
        is ported, and how the shipped envs are held bit-exact). Training never calls it; without one the
        single-env host API runs the env's own kernel on the cpu executor.
        """
        raise NotImplementedError(f"{type(self).__name__} has no NumPy reference (reference_step): the "
                                  "consistency checker has nothing to compare its kernel with")

    @classmethod
    def has_reference(cls) -> bool:
        """Whether the class (or a parent below Environment) defines ``reference_step``."""
        return cls.reference_step is not Environment.reference_step

    def reference_reset(self, arrays: dict[str, np.ndarray]) -> None:
        """Optional, for an env with a ``reset_kernel``: its reset in NumPy, updating ``arrays`` in place.

        ``arrays`` are as the reset kernel finds them: after the twins and pools, with ``_done_ != 0`` for
        exactly the envs being reset, and the kernel's scalars ``reset_seed`` and ``reset_count``; draw with
        :mod:`warp_drive.runtime.philox` (``reset_uniform(seed, count, env, k)``... give the kernel's bits). With one,
        the consistency checker compares every array after a device reset with it, and the single-env host
        API starts an episode with it; without one the checker only checks that the envs not being reset
        are untouched, and the host API runs the reset kernel on the cpu executor.
        """
        raise NotImplementedError(f"{type(self).__name__} has no NumPy reference of its reset kernel "
                                  "(reference_reset)")

    @classmethod
    def has_reference_reset(cls) -> bool:
        """Whether the class (or a parent below Environment) defines ``reference_reset``."""
        return cls.reference_reset is not Environment.reference_reset

    def run_reference_reset(self, arrays: dict[str, Any], reset_seed: int, reset_count: int) -> None:
        """``reference_reset(arrays)`` with ``reset_seed`` and ``reset_count`` among them as the reset kernel
        gets them (uint64), removed again afterwards."""
        arrays.update({RESET_SEED: np.uint64(reset_seed), RESET_COUNT: np.uint64(reset_count)})
        try:
            self.reference_reset(arrays)
        finally:
            arrays.pop(RESET_SEED, None)
            arrays.pop(RESET_COUNT, None)

    def data_dictionary(self, num_envs: int) -> DataFeed:
        """Everything the env pushes to the device: ``get_data_dictionary(num_envs)`` and each declared kernel
        parameter as a scalar of its name (its current attribute; an env that pushes the name itself wins).
        The one place the wrapper and the host API read an env's arrays and scalars from."""
        feed = self.get_data_dictionary(num_envs)
        for p in self.parameters:
            value = getattr(self, p.name)
            if p.pushed and p.name not in feed and value is not None:
                feed.add_data(p.name, p.device_value(p.validate(value, self.name or type(self).__name__)))
        return feed

    def run_reference_step(self, arrays: dict[str, Any]) -> None:
        """``reference_step(arrays)``, with the framework's clock around it where the env leaves the clock
        to the framework (``framework_clock``): what the consistency checker and the host API call."""
        if self.framework_clock:
            env_clock.tick(arrays)
        self.reference_step(arrays)
        if self.framework_clock:
            env_clock.truncate(arrays, int(np.asarray(arrays.get("episode_length", self.episode_length))))

    # ---------------------------------------------------------------- one env on the host
    # The arrays of the one replica reset() built (env dimension 1, the kernel's names); None before reset().
    single_env_arrays: dict[str, Any] | None = None
    _replica: KernelReplica | None = None  # the kernel that steps it, for an env without a reference
    _host_reset: tuple[int, int] | None = None  # (reset_seed, reset_count) of the last reference_reset start

    def reset(self, seed: int | None = None) -> dict[int, np.ndarray]:
        """Start one replica on the host and return ``{agent id: observation}`` (see the module docstring).

        With a reference, its arrays come from ``data_dictionary(1)``; where the env has reset pools, one pool
        row drawn with ``np.random.default_rng(seed)`` replaces their targets, as a reset on the device does.
        Without one, the env's own kernel runs one replica on the cpu executor
        (:class:`~warp_drive.env.host_replica.KernelReplica`): the framework's reset, with ``seed``, starts it.

        An env with a ``reset_kernel`` starts as env 0 of ``EnvWrapper(env, seed=seed)`` does after its first
        reset: through ``reference_reset`` (``reset_seed = seed``, ``reset_count = 0``) where the env has one,
        else by the framework's reset of one replica on the cpu executor (then stepped by ``reference_step``
        where the env has one). ``reset()`` without a seed continues: the next start of the last seed (0 at
        first), where the start comes from a kernel or a ``reference_reset``.
        """
        if not self.has_reference() or (self.reset_kernel and not self.has_reference_reset()):
            if seed is not None or self._replica is None:
                from warp_drive.env.host_replica import KernelReplica  # torch only when a kernel runs on the host

                self._replica = KernelReplica(self, seed=0 if seed is None else int(seed))
            self._replica.reset()
            self.single_env_arrays = self._replica.arrays
            self._check_single_env_widths()
            return self.single_env_observations()
        arrays: dict[str, Any] = {}
        for name, entry in self.data_dictionary(1).items():
            attributes = entry.get("attributes") or {}
            if attributes.get("is_reset_pool"):
                continue  # a pool the env declared itself: drawn by the framework on the device only
            value = convert_value(name, entry["data"], attributes.get("dtype"))
            arrays[name] = value.copy() if isinstance(value, np.ndarray) else value
        for target, pool in self.get_reset_pools(1, np.random.default_rng(seed)).items():
            if target not in arrays:
                raise ValueError(f"{type(self).__name__}.get_reset_pools() gives a pool for {target!r}, which "
                                 "get_data_dictionary() does not declare")
            arrays[target][...] = np.asarray(pool)[:1]
        arrays[DONE] = np.zeros(1, np.int32)
        arrays[TIMESTEP] = np.zeros(1, np.int32)
        arrays.update(n_envs=np.int32(1), n_agents=np.int32(self.num_agents),
                      episode_length=np.int32(self.episode_length))
        if self.reset_kernel:  # the reset kernel's start, in NumPy
            last = self._host_reset or (0, -1)  # no seed: the last seed's next start (seed 0's first)
            self._host_reset = (int(seed), 0) if seed is not None else (last[0], last[1] + 1)
            arrays[DONE][:] = 1
            self.run_reference_reset(arrays, *self._host_reset)
            arrays[DONE][:] = 0
            arrays[TIMESTEP][:] = 0
        self.single_env_arrays = arrays
        self._check_single_env_widths()
        return self.single_env_observations()

    def step(self, actions: Any) -> tuple[dict, dict, dict, dict]:
        """Advance the replica of :meth:`reset` by one step: of ``reference_step`` where the env has one,
        else of its kernel on the cpu executor.

        ``actions``: ``{agent id: action}`` for every agent, or one array whose
        first dimension is the agents. Returns ``(observations, rewards, done,
        info)`` (see the module docstring).
        """
        arrays = self.single_env_arrays
        name = type(self).__name__
        if arrays is None:
            raise RuntimeError(f"{name}.step() before reset(): call reset() first to start the episode")
        if int(arrays[DONE][0]):
            raise RuntimeError(f"{name}.step(): the episode is over (done); call reset() to start a new one")
        for where, rows in self._single_env_rows("sampled_actions"):
            arrays[where][0, ...] = self._single_env_actions(actions, rows, arrays[where][0])
        if self.has_reference():
            self.run_reference_step(arrays)
        else:
            self._replica.step()
        done = int(arrays[DONE][0])
        rewards = {agent: float(arrays[where][0, row]) for where, rows in self._single_env_rows("rewards")
                   for agent, row in rows.items()}
        info = {"terminated": done == 1, "truncated": done == 2}
        return self.single_env_observations(), dict(sorted(rewards.items())), {"__all__": done != 0}, info

    def _check_single_env_widths(self) -> None:
        """The replica's shared observation and action arrays against every agent's space (both ways)."""
        for kind in ("observations", "sampled_actions"):
            for where, rows in self._single_env_rows(kind):
                if where == kind:
                    for agent in rows:
                        check_space_width(self, kind, self.single_env_arrays[kind].shape, agent)

    def _single_env_rows(self, kind: str) -> list[tuple[str, dict[int, int]]]:
        """``(array, {agent id: its row})`` for ``kind``: a group's own ``<kind>_<group>`` (rows in
        group order), and the shared ``kind`` for the other agents (row = agent id)."""
        arrays = self.single_env_arrays
        out, shared = [], {}
        for group, agents in self.agent_groups().items():
            if f"{kind}_{group}" in arrays:
                out.append((f"{kind}_{group}", {agent: row for row, agent in enumerate(agents)}))
            else:
                shared.update({agent: agent for agent in agents})
        if shared:
            if kind not in arrays:
                raise NotImplementedError(f"{type(self).__name__}: no {kind!r} array for agents {sorted(shared)}")
            out.append((kind, shared))
        return out

    def _single_env_actions(self, actions: Any, rows: dict[int, int], current: np.ndarray) -> np.ndarray:
        """``current`` (one env's action array) with the given agents' rows set from ``actions``, each
        checked against the agent's action space."""
        name = type(self).__name__
        if isinstance(actions, Mapping):
            missing = sorted(set(range(self.num_agents)) - set(actions))
            extra = sorted(set(actions) - set(range(self.num_agents)), key=str)
            if missing or extra:
                raise ValueError(f"{name}.step(actions): one action per agent id 0..{self.num_agents - 1} is "
                                 f"needed; missing {missing}, unknown {extra}")
            given = dict(actions)
        else:
            array = np.asarray(actions)
            if array.ndim == 0 or array.shape[0] != self.num_agents:
                raise ValueError(f"{name}.step(actions): an array of actions needs the agents first "
                                 f"({self.num_agents} rows), got shape {array.shape}")
            given = dict(enumerate(array))
        out = current.copy()
        for agent, row in rows.items():
            space = self.action_space(agent)
            value = np.asarray(given[agent])
            if not space.contains(value.astype(space.dtype) if space.dtype is not None else value):
                raise ValueError(f"{name}.step(actions): agent {agent}'s action {given[agent]!r} is not in its "
                                 f"action space {space}")
            if value.size != out[row].size:
                raise ValueError(f"{name}.step(actions): agent {agent}'s action has {value.size} values, its row "
                                 f"of the action array {out[row].size}")
            out[row] = value.reshape(out[row].shape)
        return out

    def single_env_observations(self) -> dict[int, np.ndarray]:
        """``{agent id: observation}`` of the replica's arrays as they are (copies), e.g. after
        ``single_env_arrays`` was written."""
        arrays = self.single_env_arrays
        if arrays is None:
            raise RuntimeError(f"{type(self).__name__} has no single env yet: call reset() first")
        obs = {agent: np.array(arrays[where][0, row]) for where, rows in self._single_env_rows("observations")
               for agent, row in rows.items()}
        return dict(sorted(obs.items()))
