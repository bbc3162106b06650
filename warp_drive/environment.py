"""The environment contract: a Python class plus one CUDA C step kernel.

An environment declares

* its arrays, with the env dimension first (``get_data_dictionary``), including
  the reserved ``observations``, ``sampled_actions`` and ``rewards``; arrays
  that must return to a start state carry ``save_copy_and_apply_at_reset=True``;
* optionally pools of random start states (``get_reset_pools``): on every reset
  each done env draws one pool row on the device, so episodes start differently
  and a fixed seed reproduces them;
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

The kernel never resets an environment: resets are the framework's (twins and
pools, ``warp_drive/reset.py``). ``_done_`` is 1 when an episode terminated and
2 when it was truncated by the time limit, so returns bootstrap correctly.

Checkpoints: state and constants. A checkpoint restores an env's *state*, the
arrays a step or a reset may change, and checks its *constants*, which must be
the values the env was built with. The rule, per array the env pushes:

* state: ``_done_`` and ``_timestep_``; every array declared with
  ``save_copy_and_apply_at_reset=True`` (and its ``_at_reset`` twin); the
  agents' ``observations``, ``sampled_actions``, ``rewards`` and action masks
  (shared or a group's own); ``active_array``; and the arrays named in
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
"""

from __future__ import annotations

import abc
import inspect
from pathlib import Path
from typing import Any, Callable, ClassVar, Mapping, Sequence

import numpy as np

from warp_drive.data_feed import DataFeed
from warp_drive.layouts import (  # noqa: F401  (re-exported: env classes name their layout from here)
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


TERMINATED = 1
TRUNCATED = 2
# The optional per-agent mask of legal discrete actions (see the module docstring).
ACTION_MASK = "action_mask"



class Environment(abc.ABC):
    """Base class of warp_drive environments (see the module docstring).

    The four abstract methods are the contract; a class that misses one cannot
    be instantiated (a clear error at construction rather than mid-run).
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

    # ---------------------------------------------------------------- optional hooks
    # Every attribute the wrapper or the checker reads from an env is declared
    # here with its default; an env sets only the ones it needs.
    # Compile-time defines of the step's source (-DNAME=value, on both executors).
    cuda_defines: ClassVar[Mapping[str, str]] = {}
    # The consistency checker's tolerances for this env (None: its defaults; 0.0: bit-exact).
    consistency_atol: ClassVar[float | None] = None
    consistency_rtol: ClassVar[float | None] = None
    # Whether EnvWrapper.reseed may redraw the reset pools with get_reset_pools
    # (False where the pools are the env's own, drawn once).
    redraw_reset_pools: ClassVar[bool] = True
    # Whether the first episode starts from the pushed arrays as they are (an env
    # whose own host reset made them) rather than from a device reset.
    host_first_reset: ClassVar[bool] = False
    # What EnvWrapper.reset_all_envs() returns the first time, {agent: observation};
    # None: env 0's row of the observations array.
    first_observations: Mapping[int, Any] | None = None
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
    # An env that builds and launches its own step: bind_step(wrapper) returns the
    # launch to call each step. None: the wrapper builds cuda_source and binds
    # step_kernel to step_args.
    bind_step: Callable[[Any], Callable[[], None]] | None = None

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
        itself. The helpers of ``warp_drive.rendering`` draw markers
        and polylines; this method stays NumPy/matplotlib, never executor code.
        """
        raise NotImplementedError(f"environment {type(self).__name__} has no renderer (set render_arrays and "
                                  f"override render)")

    # ---------------------------------------------------------------- reference
    @abc.abstractmethod
    def reference_step(self, arrays: dict[str, np.ndarray]) -> None:
        """Advance every env by one step in NumPy, updating ``arrays`` in place.

        ``arrays`` holds host copies of all the env's device arrays (env
        dimension first) and its scalars, under the same names the kernel uses.
        """
