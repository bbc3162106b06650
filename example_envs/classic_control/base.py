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
cosines from ``sincos32``, a NumPy port of the kernels' ``wd_sincosf``. NumPy
rounds each float32 operation on its own, as the kernels do (``-ffp-contract=off``
on the host, ``--fmad=false`` and IEEE division under nvcc), so reference and
kernel agree bit for bit and the consistency tolerances are zero: any
difference at all means the kernel and the reference compute different
formulas. Against Gymnasium itself (float64 in most envs) they agree to
float32 precision (see ``tests/test_classic_control.py``).
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np

from warp_drive.data_feed import DataFeed
from warp_drive.environment import TERMINATED, THREADS_PER_ENV, TRUNCATED, Environment

F32 = np.float32

# The kernel arguments every classic-control step kernel starts with, in order;
# each class appends its own scalar parameters (see ``param_names``).
STEP_ARGS_HEAD = ("state", "sampled_actions", "observations", "rewards", "_done_", "_timestep_",
                  "n_envs", "episode_length")


# ---------------------------------------------------------------------------
# wd_sincosf in NumPy, bit for bit
# ---------------------------------------------------------------------------
# A port of warp_drive/cuda/include/warp_drive/portable_math.h's wd_sincosf,
# operation by operation. NumPy float32 ufuncs round every +, -, * and / on
# their own (no FMA contraction), exactly like the header's wd_f*_rn helpers,
# so the port returns the kernel's bits for every float32 input, and the
# references below reproduce the kernels exactly. (float64 sin/cos rounded to
# float32 would differ from wd_sincosf by an ulp now and then, and the
# Acrobot's one-step map amplifies an ulp by up to ~1e4-1e5 at high speeds.)

_ONE, _HALF = F32(1.0), F32(0.5)


def _two_sum(a, b):
    s = a + b
    bb = s - a
    return s, (a - (s - bb)) + (b - bb)


def _fast_two_sum(a, b):
    s = a + b
    return s, b - (s - a)


def _split(a):
    c = F32(4097.0) * a
    h = c - (c - a)
    return h, a - h


def _two_prod(a, b):
    p = a * b
    ah, al = _split(a)
    bh, bl = _split(b)
    err = ah * bh - p
    err = err + ah * bl
    err = err + al * bh
    return p, err + al * bl


def _mad(a, b, c):
    return a * b + c


def _sincos_kernel(rh, rl, quadrant):
    """``wd_detail_sincos_kernel``: |r| <= ~pi/4, r = rh + rl."""
    z = rh * rh
    ps = _mad(z, F32(-2.5052108385441720e-08), F32(2.7557319223985891e-06))
    ps = _mad(z, ps, F32(-1.9841269841269841e-04))
    ps = _mad(z, ps, F32(8.3333333333333333e-03))
    ps = _mad(z, ps, F32(-1.6666666666666667e-01))
    v = z * rh
    s = rh + (v * ps + rl * (_ONE - _HALF * z))
    zh, zl = _two_prod(rh, rh)
    hz = _HALF * zh
    w = _ONE - hz
    corr = (_ONE - w) - hz
    pc = _mad(z, F32(-2.7557319223985891e-07), F32(2.4801587301587302e-05))
    pc = _mad(z, pc, F32(-1.3888888888888889e-03))
    pc = _mad(z, pc, F32(4.1666666666666667e-02))
    pc = (z * z) * pc
    c = w + (corr + (pc - (_HALF * zl + rh * rl)))
    # quadrant 0: (s, c), 1: (c, -s), 2: (-s, -c), 3: (-c, s); negation is exact.
    q = quadrant & 3
    odd = (q & 1) == 1
    sin = np.where(odd, c, s)
    cos = np.where(odd, s, c)
    sin = np.where(q >= 2, -sin, sin)
    cos = np.where((q == 1) | (q == 2), -cos, cos)
    return sin.astype(F32), cos.astype(F32)


_TWO_OVER_PI_WORDS = np.array(
    [0xA2F9836E, 0x4E441529, 0xFC2757D1, 0xF534DDC0, 0xDB629599, 0x3C439041, 0xFE5163AB, 0xDEBBC561,
     0xB7246E3A, 0x424DD2E0], dtype=np.uint64)


def _reduce_large(ax):
    """``wd_detail_reduce_large`` (Payne-Hanek) for finite ax >= 800, in integers."""
    u64 = np.uint64
    ix = ax.view(np.uint32).astype(np.int64)
    exponent = (ix >> 23) - 150
    m = ((ix & 0x007FFFFF) | 0x00800000).astype(u64)
    first_bit = np.maximum(exponent - 1, 1)
    extra = (first_bit - exponent + 1).astype(u64)
    word, shift = (first_bit - 1) >> 5, ((first_bit - 1) & 31).astype(u64)
    t0, t1, t2, t3 = (_TWO_OVER_PI_WORDS[np.minimum(word + k, 9)] for k in range(4))
    mask32 = u64(0xFFFFFFFF)

    def join(hi, lo):  # (hi << shift) | (lo >> (32 - shift)) in 32 bits; hi when shift == 0
        return np.where(shift == 0, hi, ((hi << shift) & mask32) | (lo >> (u64(32) - shift)))

    w0, w1, w2 = join(t0, t1), join(t1, t2), join(t2, t3)
    acc = m * w2
    lo64 = acc & mask32
    acc = (acc >> u64(32)) + m * w1
    lo64 = lo64 | (acc << u64(32))
    acc = (acc >> u64(32)) + m * w0
    hi64 = acc
    chunk = (hi64 << (u64(32) - extra)) | (lo64 >> (u64(32) + extra))
    rounded = chunk + u64(1 << 61)
    quadrant = (rounded >> u64(62)).astype(np.int64)
    frac = (chunk - ((rounded >> u64(62)) << u64(62))).view(np.int64)
    fh = frac.astype(F32)
    fl = (frac - fh.astype(np.int64)).astype(F32)
    two_m62 = F32(2.168404344971009e-19)
    fh, fl = fh * two_m62, fl * two_m62
    pio2_hi, pio2_lo = F32(1.5707963705062866), F32(-4.371138828673793e-08)
    p, e = _two_prod(fh, pio2_hi)
    e = e + (fh * pio2_lo + fl * pio2_hi)
    rh, rl = _fast_two_sum(p, e)
    return quadrant, rh, rl


def sincos32(x) -> tuple[np.ndarray, np.ndarray]:
    """``wd_sincosf`` over a float32 array: ``(sin x, cos x)``, the kernels' exact bits."""
    x = np.atleast_1d(np.asarray(x, F32))
    ax = np.abs(x)
    with np.errstate(over="ignore", invalid="ignore"):
        finite = ax <= F32(3.4028234663852886e38)
        tiny = ax < F32(2.44140625e-04)  # 2^-12: sin x = x, cos x = 1
        direct = ax <= F32(0.785398185253143310546875)
        medium = ~direct & (ax < F32(800.0))
        large = finite & ~direct & ~medium
        # Cody-Waite for |x| < 800 (computed everywhere, selected below).
        xm = np.where(medium, x, F32(0.0))
        t = xm * F32(0.6366197466850281)
        quadrant = np.trunc(t + np.where(t < 0, F32(-0.5), F32(0.5))).astype(np.int64)
        fn = quadrant.astype(F32)
        rh, rl = _two_sum(xm, -(fn * F32(1.57073974609375)))
        rh, e = _two_sum(rh, -(fn * F32(5.657970905303955e-05)))
        rl = rl + e
        rh, e = _two_sum(rh, -(fn * F32(9.920881893776823e-10)))
        rl = rl + e
        rh, e = _two_sum(rh, -(fn * F32(5.390302953474238e-15)))
        rl = rl + e
        rh, rl = _fast_two_sum(rh, rl)
        rh = np.where(direct, x, rh)
        rl = np.where(direct, F32(0.0), rl)
        quadrant = np.where(direct, 0, quadrant)
        if large.any():
            ql, rhl, rll = _reduce_large(ax[large])
            negative = x[large] < 0
            quadrant[large] = np.where(negative, -ql, ql)
            rh[large] = np.where(negative, -rhl, rhl)
            rl[large] = np.where(negative, -rll, rll)
        sin, cos = _sincos_kernel(rh.astype(F32), rl.astype(F32), quadrant)
    sin = np.where(tiny, x, sin)
    cos = np.where(tiny, F32(1.0), cos)
    nan = F32(np.nan)
    return np.where(finite, sin, nan).astype(F32), np.where(finite, cos, nan).astype(F32)


def sin32(x) -> np.ndarray:
    """float32 sin, the kernels' ``wd_sincosf`` bits."""
    return sincos32(x)[0].reshape(np.shape(x))


def cos32(x) -> np.ndarray:
    """float32 cos, the kernels' ``wd_sincosf`` bits."""
    return sincos32(x)[1].reshape(np.shape(x))


def clip32(x: np.ndarray, low, high) -> np.ndarray:
    """``min(max(x, low), high)`` in float32, like ``fminf(fmaxf(x, low), high)`` in the kernels."""
    return np.minimum(np.maximum(x, F32(low)), F32(high)).astype(F32)


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
    # Kernel scalars after STEP_ARGS_HEAD, in kernel order, with their defaults
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
            self.params[name] = np.int32(int(value)) if is_int else F32(value)

    @classmethod
    def param_names(cls) -> tuple[str, ...]:
        return tuple(cls.param_defaults)

    # ---------------------------------------------------------------- hooks
    def sample_start_states(self, n: int, rng: np.random.Generator) -> np.ndarray:
        """``n`` start states (n, state_dim) float32 from Gymnasium's reset distribution."""
        raise NotImplementedError

    def observe(self, states: np.ndarray) -> np.ndarray:
        """Observations (n, obs_dim) float32 of states (n, state_dim), as Gymnasium returns them."""
        raise NotImplementedError

    def dynamics(self, state: np.ndarray, action: np.ndarray, p: dict[str, np.generic]):
        """One vectorised float32 step: ``(new_state, observations, rewards, terminated)``.

        ``state`` is (E, state_dim), ``action`` (E,) (int32 or float32), ``p``
        the scalar parameters as float32/int32.
        """
        raise NotImplementedError

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
