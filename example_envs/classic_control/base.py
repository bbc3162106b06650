"""What the five classic-control environments share.

Each of CartPole, Acrobot, MountainCar, ContinuousMountainCar and Pendulum is a
single-agent environment whose dynamics, rewards, termination and time limit
follow Gymnasium's ``gymnasium/envs/classic_control`` implementation (the
``-v1``/``-v0`` registrations and their ``TimeLimit``). The kernels run **one
thread per environment replica** (``THREADS_PER_ENV``): a flat launch of
``ceil(E / 256)`` blocks of 256 threads, thread ``wd_global_thread_id()``
stepping env ``i < n_envs``. The original WarpDrive launched one block of one
thread per env (its §9 item 22), which leaves 31 of every 32 lanes idle.

Data layout (every env the same way, so trainers and tools see one shape):

* ``state`` (E, 1, D) float32 — Gymnasium's ``env.unwrapped.state``;
* ``observations`` (E, 1, obs_dim) float32 — what Gymnasium's ``step`` returns;
* ``sampled_actions`` (E, 1) int32 for ``Discrete`` action spaces,
  (E, 1, 1) float32 for ``Box(1)`` ones (the shape of one agent's action is
  the Box shape, and ``Sampler.register_continuous_actions`` takes (E, N, D));
* ``rewards`` (E, 1) float32; ``_done_`` is written every step: 0 running,
  1 terminated, 2 truncated (termination wins when both fall on one step);
* the physical constants as float32/int32 kernel scalars (meta info), so that
  Gymnasium's constructor options (``g``, ``goal_velocity``,
  ``sutton_barto_reward``) are plain ``env_config`` entries.

Random starts: ``get_reset_pools`` draws ``state`` rows from Gymnasium's own
reset distribution and computes the matching ``observations`` rows; both pools
have the same size, so the reset kernel gives an env the same row of each.
The data dictionary's initial ``state`` (a draw seeded by ``seed``) is also
saved as a reset twin: with ``reset_pool_size=0`` every env restarts from its
own fixed start, as WarpDrive's snapshot reset did.

The NumPy reference works in float32, operation by operation in the order of
Gymnasium's Python (so it reads as Gymnasium's formulas), with its sines and
cosines from ``warp_drive.portable_math.sincos32``, a NumPy port of the kernels' ``wd_sincosf``. NumPy
rounds each float32 operation on its own, as the kernels do (``-ffp-contract=off``
on the host, ``--fmad=false`` and IEEE division under nvcc), so reference and
kernel agree bit for bit and the consistency tolerances are zero: any
difference at all means the kernel and the reference compute different
formulas. Against Gymnasium itself (float64 in most envs) they agree to
float32 precision (see ``tests/env/test_classic_control.py``).
"""

from __future__ import annotations

import abc
from typing import Any, ClassVar

import numpy as np

from warp_drive.data_feed import DataFeed
from warp_drive.environment import TERMINATED, THREADS_PER_ENV, TRUNCATED, Environment, require_finite

F32 = np.float32


def clip32(x: np.ndarray, low, high) -> np.ndarray:
    """``min(max(x, low), high)`` in float32, like ``fminf(fmaxf(x, low), high)`` in the kernels."""
    return np.minimum(np.maximum(x, F32(low)), F32(high)).astype(F32)


def _float_param(env: str, name: str, value: Any) -> np.float32:
    """A float parameter as the kernel takes it: finite (NaN and inf are refused, naming it; a NaN ``gravity``
    trained on silently) and within float32's range (1e39 would reach the kernel as inf)."""
    require_finite(env, **{name: value})
    if abs(float(value)) > float(np.finfo(F32).max):
        raise ValueError(f"{env}: {name}={value!r}: beyond float32's range (magnitude at most 3.4e38), which "
                         f"the kernel computes in")
    return F32(value)


def _int_param(env: str, name: str, value: Any) -> np.int32:
    if isinstance(value, float) and not value.is_integer():
        raise ValueError(f"{env}: {name}={value!r}: must be an integer")
    try:
        return np.int32(int(value))
    except (TypeError, ValueError, OverflowError):
        raise ValueError(f"{env}: {name}={value!r}: must be an integer within int32's range") from None


class ClassicControlEnv(Environment):
    """Base class: one agent, one thread per env, Gymnasium semantics.

    Subclasses set the class attributes below and implement
    ``sample_start_states``, ``observe`` and ``dynamics``; everything that
    touches the framework (data dictionary, pools, ``_done_``/``_timestep_``
    bookkeeping of the reference) lives here once.
    """

    thread_layout = THREADS_PER_ENV

    state_dim: ClassVar[int]
    obs_dim: ClassVar[int]
    default_episode_length: ClassVar[int]
    continuous_actions: ClassVar[bool] = False
    # The references reproduce the kernels bit for bit (module docstring), so
    # the consistency checker tolerates no difference at all.
    consistency_atol: ClassVar[float] = 0.0
    consistency_rtol: ClassVar[float] = 0.0
    # The kernel's scalar parameters (bound by their C names), with their defaults
    # (Gymnasium's values). int defaults become int32, float ones float32.
    param_defaults: ClassVar[dict[str, Any]] = {}

    def __init__(self, episode_length: int | None = None, seed: int = 0, **params: Any):
        unknown = sorted(set(params) - set(self.param_defaults))
        if unknown:
            raise TypeError(
                f"{type(self).__name__} got unknown parameter(s) {unknown}; known: "
                f"episode_length, seed, {', '.join(self.param_defaults)}"
            )
        self.num_agents = 1
        self.episode_length = int(self.default_episode_length if episode_length is None else episode_length)
        if self.episode_length < 1:
            raise ValueError(f"episode_length must be >= 1, got {self.episode_length}")
        self.seed = int(seed)
        self.params: dict[str, np.generic] = {}
        for name, default in self.param_defaults.items():
            value = params.get(name, default)
            is_int = isinstance(default, (bool, int, np.integer)) and not isinstance(default, float)
            self.params[name] = _int_param(type(self).__name__, name, value) if is_int \
                else _float_param(type(self).__name__, name, value)

    @classmethod
    def param_names(cls) -> tuple[str, ...]:
        return tuple(cls.param_defaults)

    # ---------------------------------------------------------------- hooks
    @abc.abstractmethod
    def sample_start_states(self, n: int, rng: np.random.Generator) -> np.ndarray:
        """``n`` start states (n, state_dim) float32 from Gymnasium's reset distribution."""

    @abc.abstractmethod
    def observe(self, states: np.ndarray) -> np.ndarray:
        """Observations (n, obs_dim) float32 of states (n, state_dim), as Gymnasium returns them."""

    @abc.abstractmethod
    def dynamics(self, state: np.ndarray, action: np.ndarray, p: dict[str, np.generic]):
        """One vectorised float32 step: ``(new_state, observations, rewards, terminated)``.

        ``state`` is (E, state_dim), ``action`` (E,) (int32 or float32), ``p``
        the scalar parameters as float32/int32.
        """

    # ---------------------------------------------------------------- spaces
    def agent_groups(self) -> dict[str, list[int]]:
        return {"shared": [0]}

    # ---------------------------------------------------------------- data
    def get_data_dictionary(self, num_envs: int) -> DataFeed:
        start = self.sample_start_states(num_envs, np.random.default_rng(self.seed))
        feed = DataFeed()
        feed.add_data("state", np.ascontiguousarray(start[:, None, :], F32),
                      save_copy_and_apply_at_reset=True, log_data_across_episode=True)
        feed.add_data("observations", np.ascontiguousarray(self.observe(start)[:, None, :], F32),
                      save_copy_and_apply_at_reset=True)
        if self.continuous_actions:
            feed.add_data("sampled_actions", np.zeros((num_envs, 1, 1), F32))
        else:
            feed.add_data("sampled_actions", np.zeros((num_envs, 1), np.int32))
        feed.add_data("rewards", np.zeros((num_envs, 1), F32))
        for name, value in self.params.items():
            feed.add_data(name, value)
        return feed

    def get_reset_pools(self, pool_size: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
        if pool_size < 1:
            return {}  # fixed starts: the reset twins saved by get_data_dictionary
        states = self.sample_start_states(pool_size, rng)
        return {
            "state": np.ascontiguousarray(states[:, None, :], F32),
            "observations": np.ascontiguousarray(self.observe(states)[:, None, :], F32),
        }

    # ---------------------------------------------------------------- reference
    def reference_step(self, arrays: dict[str, np.ndarray]) -> None:
        state = arrays["state"]
        n_envs = state.shape[0]
        actions = arrays["sampled_actions"].reshape(n_envs)
        p = {name: arrays[name] for name in self.param_names()}
        p = {name: (np.int32(v) if np.issubdtype(np.asarray(v).dtype, np.integer) else F32(v))
             for name, v in p.items()}
        new_state, obs, rewards, terminated = self.dynamics(state.reshape(n_envs, self.state_dim), actions, p)
        timestep = arrays["_timestep_"]
        timestep += 1
        state[...] = new_state.reshape(state.shape)
        arrays["observations"][...] = obs.reshape(arrays["observations"].shape)
        arrays["rewards"][...] = rewards.reshape(arrays["rewards"].shape)
        # Termination wins when both happen on the same step (returns must not
        # bootstrap past a terminal state).
        timed_out = timestep >= np.int32(arrays["episode_length"])
        arrays["_done_"][...] = np.where(terminated, TERMINATED, np.where(timed_out, TRUNCATED, 0))

    # ---------------------------------------------------------------- rendering
    render_arrays = ("state",)

    def render(self, frames: dict[str, np.ndarray], out_path):
        """GIF of one episode, each frame drawn from the state by ``draw_state`` (line segments)."""
        from warp_drive.rendering import render_polylines_episode

        states = np.asarray(frames["state"], dtype=np.float64).reshape(len(frames["state"]), -1)
        limits, background = self.view()
        return render_polylines_episode(out_path, len(states), lambda t: self.draw_state(states[t]), limits,
                                        background, fps=30, title=self.name)

    def view(self) -> tuple[tuple[float, float, float, float], list]:
        """``((xmin, xmax, ymin, ymax), background polylines)`` of the drawing."""
        raise NotImplementedError(f"{type(self).__name__} does not define its drawing (view and draw_state)")

    def draw_state(self, state: np.ndarray) -> list:
        """The moving parts for one state (Gymnasium's ``state`` vector) as ``[(xs, ys), ...]``."""
        raise NotImplementedError(f"{type(self).__name__} does not define its drawing (view and draw_state)")
