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
* ``rewards`` (E, 1) float32; ``_done_`` is written every step, 0 running or
  1 terminated; the framework owns the clock (``framework_clock``): it
  advances ``_timestep_`` before the step and sets 2 (truncated) after it
  where the kernel left 0, so termination wins when both fall on one step;
* the physical constants as a parameter table (:func:`control_parameters`),
  pushed as float32/int32 kernel scalars of their names, so that Gymnasium's
  constructor options (``g``, ``goal_velocity``, ``sutton_barto_reward``) are
  plain ``env_config`` entries, each checked at construction against bounds
  that keep the physics meaningful (masses, lengths and time steps > 0: a
  ``length=0`` CartPole divided by zero and trained into NaN).

Random starts: ``get_reset_pools`` draws ``state`` rows from Gymnasium's own
reset distribution and computes the matching ``observations`` rows; both pools
have the same size, so the reset kernel gives an env the same row of each.
The data dictionary's initial ``state`` (a draw seeded by ``seed``) is also
saved as a reset twin: with ``reset_pool_size=0`` every env restarts from its
own fixed start, as WarpDrive's snapshot reset did.

The NumPy reference works in float32, operation by operation in the order of
Gymnasium's Python (so it reads as Gymnasium's formulas), with its sines and
cosines from ``warp_drive.runtime.portable_math.sincos32``, a NumPy port of the kernels' ``wd_sincosf``. NumPy
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

from warp_drive.runtime.data_feed import DataFeed
from warp_drive.env.environment import TERMINATED, THREADS_PER_ENV, Environment, Parameter

F32 = np.float32


def clip32(x: np.ndarray, low, high) -> np.ndarray:
    """``min(max(x, low), high)`` in float32, like ``fminf(fmaxf(x, low), high)`` in the kernels."""
    return np.minimum(np.maximum(x, F32(low)), F32(high)).astype(F32)


def control_parameters(episode_length: int, *physics: Parameter) -> tuple[Parameter, ...]:
    """A classic-control env's table: its time limit (Gymnasium's registration), the seed of its fixed
    starts, then its physical constants (the kernel's scalars)."""
    return (Parameter("episode_length", episode_length, ge=1, doc="the time limit (Gymnasium's TimeLimit)"),
            Parameter("seed", 0, kernel=False, doc="draws every env's fixed start (used with reset_pool_size=0)"),
            *physics)


class ClassicControlEnv(Environment):
    """Base class: one agent, one thread per env, Gymnasium semantics.

    Subclasses set the class attributes below and implement
    ``sample_start_states``, ``observe`` and ``dynamics``; everything that
    touches the framework (data dictionary, pools, the parameter table, the
    reference's ``_done_``) lives here once.
    """

    thread_layout = THREADS_PER_ENV
    framework_clock = True  # the kernels and references neither count steps nor truncate

    state_dim: ClassVar[int]
    obs_dim: ClassVar[int]
    default_episode_length: ClassVar[int]  # the table's episode_length default (set for each subclass)
    continuous_actions: ClassVar[bool] = False
    # The references reproduce the kernels bit for bit (module docstring), so
    # the consistency checker tolerates no difference at all.
    consistency_atol: ClassVar[float] = 0.0
    consistency_rtol: ClassVar[float] = 0.0
    parameters = control_parameters(500)

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        cls.default_episode_length = next(p.default for p in cls.parameters if p.name == "episode_length")

    def __init__(self, **config: Any):
        super().__init__(**config)  # validated against the table: episode_length, seed, the physics
        self.num_agents = 1
        # The kernel's scalars as it takes them (float32 / int32), read by the spaces and the drawing.
        self.params: dict[str, np.generic] = {p.name: p.device_value(getattr(self, p.name))
                                              for p in self.parameters if p.pushed}

    @classmethod
    def param_names(cls) -> tuple[str, ...]:
        return tuple(p.name for p in cls.parameters if p.pushed)

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
        return feed  # the physics: pushed from the table

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
        state[...] = new_state.reshape(state.shape)
        arrays["observations"][...] = obs.reshape(arrays["observations"].shape)
        arrays["rewards"][...] = rewards.reshape(arrays["rewards"].shape)
        # The framework truncates after this where _done_ is 0 (termination wins on the same step).
        arrays["_done_"][...] = np.where(terminated, TERMINATED, 0)

    # ---------------------------------------------------------------- rendering
    render_arrays = ("state",)

    def render(self, frames: dict[str, np.ndarray], out_path):
        """GIF of one episode, each frame drawn from the state by ``draw_state`` (line segments)."""
        from warp_drive.env.rendering import render_polylines_episode

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
