"""SimpleSpread: MPE's cooperative navigation, as JaxMARL's ``MPE_simple_spread_v3`` defines it.

N agents (radius 0.15) must cover L landmarks (radius 0.05) on the plane
without bumping into each other. Everything below follows JaxMARL's
``jaxmarl/environments/mpe/{simple,simple_spread,default_params}.py``:

* **Start**: agent and landmark positions uniform in ``[-1, 1]^2``, velocities
  0. The draws are this framework's: rows of reset pools (``get_reset_pools``)
  that the Philox-based reset kernel hands to each env being reset. Parity with
  JaxMARL comes from feeding both the same start states and actions
  (``benchmarks/parity_simple_spread.py``), not from the same RNG.
* **Actions**: ``Discrete(5)``: 0 no-op, 1 force along -x, 2 +x, 3 -y, 4 +y;
  or, with ``continuous_actions=True``, ``Box(0, 1, (5,))`` laid out as
  JaxMARL's: force ``(a[2] - a[1], a[4] - a[3])`` (``a[0]`` unused). The force
  is the action times ``accel`` (5.0).
* **Physics**, per step: contact forces between every pair of colliding
  agents (landmarks neither move nor collide),
  ``contact_force * (p_i - p_j) / d * k * log(1 + exp(-(d - r_i - r_j) / k))``
  with ``k = contact_margin``, evaluated as JaxMARL's ``logaddexp(0, x)``
  (``max(x, 0) + log1p(exp(-|x|))``, no overflow for deep overlaps); total
  force = contacts + action force; then JaxMARL's ``_integrate_state``:
  ``p += v dt`` (with the velocity *before* the step), ``v *= 1 - damping``,
  ``v += F / m dt``, ``v`` rescaled to ``max_speed`` when one is set (none by
  default). ``integrator="semi_implicit"`` uses MPE/PettingZoo's order instead
  (velocity first, then ``p += v_new dt``).
* **Reward** of agent i, on the state after the move:
  ``local_ratio * (-#{j != i : |p_i - p_j| < 2 r}) + (1 - local_ratio) * sum_l (-min_j |p_j - p_l|)``.
* **Observation** of agent i, ``4 + 2L + 4(N - 1)`` floats (18 for N = L = 3):
  own velocity, own position, each landmark's position minus its own, each
  other agent's position minus its own (others in id order: JaxMARL's two
  ``jnp.roll`` give exactly that), and ``2(N - 1)`` zeros (the silent agents'
  communication channels).
* **Time limit**: ``_done_ = 2`` (truncated) at step ``episode_length`` (25);
  the env never terminates. JaxMARL tests ``state.step >= max_steps`` *before*
  it increments the step counter, so its episodes end on step
  ``max_steps + 1`` (26); ``jaxmarl_done_step=True`` reproduces that: an
  episode then has ``episode_length + 1`` steps (``self.episode_length`` is
  the number of steps the framework counts).

Device arrays: ``agent_pos`` (E, N, 2), ``agent_vel`` (E, N, 2),
``landmark_pos`` (E, L, 2), ``observations`` (E, N, obs), ``rewards`` (E, N),
``sampled_actions`` (E, N) int32 or (E, N, 5) float32; ``state`` (E, 4N + 2L):
the compact global state for a centralised critic, per agent ``(px, py, vx,
vy)`` then per landmark ``(x, y)``, written by the kernel every step and by
the reset (from the pools); scratch the step writes for later phases and for
inspection: ``agent_force`` (E, N, 2), the total force of the last step, and
``landmark_dist`` (E, L), each landmark's distance to its nearest agent.

Where this differs from JaxMARL, and why:

* two agents at exactly the same point (distance 0) exert no contact force
  on each other; JaxMARL divides 0 by 0 and its state becomes NaN;
* float32 arithmetic in XLA's order where it is known (``-(d - r_sum) / k``
  as ``-(d - r_sum) * (1 / k)`` and ``c * dx / d * pen`` as ``c * (dx / d) *
  pen``, as XLA evaluates JaxMARL's expressions), but ``exp``/``log`` of
  ``warp_drive/portable_math.h`` rather than XLA's and the contact forces
  summed in id order: one transition agrees with JaxMARL's to a few ulps
  (at most 1e-6 in ``benchmarks/parity_simple_spread.py``), not bit for bit.
  Over an episode the stiff contacts amplify those last bits while agents
  overlap (to about 1e-5 for N = 3, as much as JaxMARL's own float32 run
  differs from its float64 run).

The NumPy reference reproduces the kernel's float32 operations one by one
(``wd_expf`` and ``wd_logf`` ported in ``warp_drive.runtime.portable_math``), so kernel and reference agree bit for
bit and the consistency tolerance is zero.
"""

from __future__ import annotations

import numpy as np
from gymnasium import spaces

from warp_drive.runtime.data_feed import DataFeed
from warp_drive.env.environment import AGENT_PHASES, TRUNCATED, Environment, Parameter
from warp_drive.runtime.portable_math import expf32, log1p32, logf32  # noqa: F401  (re-exported)

F32 = np.float32
NUM_ACTIONS = 5
CONTINUOUS_ACTION_SIZE = 5
COMM_DIM = 2  # JaxMARL's dim_c: zeros in the observation (the agents are silent)
INTEGRATORS = ("jaxmarl", "semi_implicit")


# ---------------------------------------------------------------------------
# NumPy ports of wd_expf / wd_logf: in warp_drive.runtime.portable_math (importable from here too)
# ---------------------------------------------------------------------------


def softplus_penetration(x, k) -> np.ndarray:
    """``logaddexp(0, x) * k`` as JaxMARL writes it, ``(max(x, 0) + log1p(exp(-|x|))) * k``, in float32."""
    x = np.asarray(x, F32)
    return ((np.maximum(x, F32(0.0)) + log1p32(expf32(-np.abs(x)))) * F32(k)).astype(F32)


# ---------------------------------------------------------------------------
# The environment
# ---------------------------------------------------------------------------


class SimpleSpread(Environment):
    """MPE simple_spread as JaxMARL's ``MPE_simple_spread_v3`` (see the module docstring).

    Constructor arguments: the parameter table below (``warp-drive envs --describe SimpleSpread``);
    ``jaxmarl_done_step`` ends an episode at step ``episode_length + 1``, as JaxMARL does, ``seed`` draws
    the start state kept as every env's reset twin (used when the wrapper has no pools,
    ``reset_pool_size=0``) and ``pool_max_bytes`` caps a reset pool (each row holds a start state's
    observations).
    """

    name = "SimpleSpread"
    cuda_source = "simple_spread.cu"
    step_kernel = "SimpleSpreadStep"  # SimpleSpreadContinuousStep with continuous actions (set per instance)
    thread_layout = AGENT_PHASES
    # The reference reproduces the kernel's float32 operations (wd_expf and wd_logf included).
    consistency_atol = 0.0
    state_arrays = ("state",)  # (px, py, vx, vy) per agent and the landmarks: a centralised critic's input
    consistency_rtol = 0.0
    DEFAULT_POOL_MAX_BYTES = 64 * 1024 * 1024

    parameters = (
        Parameter("num_agents", 3, ge=1, doc="agents"),
        Parameter("num_landmarks", 3, ge=1, doc="landmarks"),
        Parameter("episode_length", 25, ge=1, doc="JaxMARL's max_steps"),
        Parameter("jaxmarl_done_step", False, kernel=False, doc="done at step episode_length + 1, as JaxMARL"),
        Parameter("continuous_actions", False, kernel=False, doc="Box(5) actions (else Discrete(5))"),
        Parameter("local_ratio", 0.5, ge=0, le=1, doc="weight of the local (collision) reward"),
        Parameter("dt", 0.1, gt=0, doc="seconds per step"),
        Parameter("damping", 0.25, ge=0, kernel=False, doc="velocity lost per step (a fraction)"),
        Parameter("mass", 1.0, gt=0, doc="agent mass"),
        Parameter("accel", 5.0, doc="agent acceleration (force scale)"),
        Parameter("max_speed", None, type=float, gt=0, kernel=False, doc="speed limit (None: unlimited)"),
        Parameter("contact_force", 100.0, doc="collision force"),
        Parameter("contact_margin", 1e-3, gt=0, doc="softness of collisions"),
        Parameter("agent_radius", 0.15, ge=0, doc="agent size (collisions)"),
        Parameter("landmark_radius", 0.05, ge=0, kernel=False, doc="landmark size (drawn only)"),
        Parameter("integrator", "jaxmarl", choices=INTEGRATORS, doc="JaxMARL's order of updates, or semi-implicit"),
        Parameter("seed", 0, kernel=False, doc="the start state kept as every env's reset twin"),
        Parameter("pool_max_bytes", DEFAULT_POOL_MAX_BYTES, ge=1, kernel=False, doc="cap on a reset pool's bytes"),
    )

    def __init__(self, **config):
        super().__init__(**config)  # the table: types, finiteness, bounds
        episode_length, max_speed, damping = self.episode_length, self.max_speed, self.damping
        self.max_steps = int(episode_length)
        self.episode_length = self.max_steps + (1 if self.jaxmarl_done_step else 0)
        if self.continuous_actions:
            self.step_kernel = "SimpleSpreadContinuousStep"
        self.global_ratio = F32(1.0 - self.local_ratio)  # JaxMARL: global_rew * (1 - local_ratio), in double
        self.velocity_retention = F32(1.0 - damping)  # JaxMARL: p_vel * (1 - damping), in double
        self.max_speed = F32(-1.0 if max_speed is None else max_speed)  # pushed: -1 is unlimited
        # Float32 once, as the kernel reads them (the reference computes with these).
        for name in ("local_ratio", "dt", "mass", "accel", "contact_force", "contact_margin", "agent_radius",
                     "landmark_radius"):
            setattr(self, name, F32(getattr(self, name)))

    # ---------------------------------------------------------------- sizes and spaces
    @property
    def observation_size(self) -> int:
        n, l = self.num_agents, self.num_landmarks
        return 4 + 2 * l + 2 * (n - 1) + COMM_DIM * (n - 1)

    @property
    def state_size(self) -> int:
        return 4 * self.num_agents + 2 * self.num_landmarks

    def observation_space(self, agent_id: int):
        return spaces.Box(-np.inf, np.inf, shape=(self.observation_size,), dtype=np.float32)

    def action_space(self, agent_id: int):
        if self.continuous_actions:
            return spaces.Box(0.0, 1.0, shape=(CONTINUOUS_ACTION_SIZE,), dtype=np.float32)
        return spaces.Discrete(NUM_ACTIONS)

    # ---------------------------------------------------------------- start states
    def draw_start_states(self, rng: np.random.Generator, count: int) -> tuple[np.ndarray, np.ndarray]:
        """``count`` start states: agent positions (count, N, 2) and landmark positions (count, L, 2),
        uniform in [-1, 1]^2."""
        agents = rng.uniform(-1.0, 1.0, size=(count, self.num_agents, 2)).astype(F32)
        landmarks = rng.uniform(-1.0, 1.0, size=(count, self.num_landmarks, 2)).astype(F32)
        return agents, landmarks

    def start_arrays(self, agent_pos: np.ndarray, landmark_pos: np.ndarray) -> dict[str, np.ndarray]:
        """The arrays of start states (zero velocities): positions, observations and global state."""
        agent_pos, landmark_pos = np.asarray(agent_pos, F32), np.asarray(landmark_pos, F32)
        vel = np.zeros_like(agent_pos)
        return {"agent_pos": agent_pos, "landmark_pos": landmark_pos,
                "observations": self.observe(agent_pos, vel, landmark_pos),
                "state": self.global_state(agent_pos, vel, landmark_pos)}

    def pool_rows(self, pool_size: int) -> int:
        """How many start states a pool holds: ``pool_size``, capped by ``pool_max_bytes``."""
        row_bytes = 4 * (self.num_agents * self.observation_size + 2 * self.num_agents + 2 * self.num_landmarks
                         + self.state_size)
        return int(max(1, min(int(pool_size), self.pool_max_bytes // row_bytes)))

    def get_reset_pools(self, pool_size: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
        """Random start states (positions uniform in [-1, 1]^2) with their observations and global states.
        All four pools have the same rows, so the reset gives an env one consistent start."""
        if int(pool_size) < 1:
            return {}
        return self.start_arrays(*self.draw_start_states(rng, self.pool_rows(pool_size)))

    # ---------------------------------------------------------------- data
    def get_data_dictionary(self, num_envs: int) -> DataFeed:
        e, n, l = int(num_envs), self.num_agents, self.num_landmarks
        start = self.start_arrays(*self.draw_start_states(np.random.default_rng(self.seed), e))
        feed = DataFeed()
        feed.add_data("agent_pos", start["agent_pos"], save_copy_and_apply_at_reset=True)
        feed.add_data("agent_vel", np.zeros((e, n, 2), F32), save_copy_and_apply_at_reset=True)
        feed.add_data("landmark_pos", start["landmark_pos"], save_copy_and_apply_at_reset=True)
        feed.add_data("state", start["state"], save_copy_and_apply_at_reset=True)
        feed.add_data("observations", start["observations"], save_copy_and_apply_at_reset=True)
        if self.continuous_actions:
            feed.add_data("sampled_actions", np.zeros((e, n, CONTINUOUS_ACTION_SIZE), F32))
        else:
            feed.add_data("sampled_actions", np.zeros((e, n), np.int32))
        feed.add_data("rewards", np.zeros((e, n), F32))
        feed.add_data("agent_force", np.zeros((e, n, 2), F32), save_copy_and_apply_at_reset=True)
        feed.add_data("landmark_dist", np.zeros((e, l), F32), save_copy_and_apply_at_reset=True)
        # Derived scalars (num_landmarks, dt, mass, accel, the contact and the ratio: the table's).
        feed.add_data("velocity_retention", self.velocity_retention)
        feed.add_data("max_speed", self.max_speed)
        feed.add_data("global_ratio", self.global_ratio)
        feed.add_data("semi_implicit", np.int32(self.integrator == "semi_implicit"))
        return feed

    # ---------------------------------------------------------------- NumPy reference
    def observe(self, agent_pos: np.ndarray, agent_vel: np.ndarray, landmark_pos: np.ndarray) -> np.ndarray:
        """Observations (E, N, obs) of states given as (E, N, 2), (E, N, 2), (E, L, 2) arrays."""
        e, n = agent_pos.shape[:2]
        own = agent_pos[:, :, None, :]
        to_landmarks = (landmark_pos[:, None, :, :] - own).reshape(e, n, -1)
        others = self._others()
        to_others = (agent_pos[:, others, :] - own).reshape(e, n, -1)
        comm = np.zeros((e, n, COMM_DIM * (n - 1)), F32)
        return np.concatenate([agent_vel, agent_pos, to_landmarks, to_others, comm], axis=2).astype(F32)

    def global_state(self, agent_pos: np.ndarray, agent_vel: np.ndarray, landmark_pos: np.ndarray) -> np.ndarray:
        """The compact global state (E, 4N + 2L): per agent (px, py, vx, vy), then per landmark (x, y)."""
        e = agent_pos.shape[0]
        agents = np.concatenate([agent_pos, agent_vel], axis=2).reshape(e, -1)
        return np.concatenate([agents, landmark_pos.reshape(e, -1)], axis=1).astype(F32)

    def _others(self) -> np.ndarray:
        """``(N, N-1)``: row i lists every agent but i, in id order."""
        n = self.num_agents
        slots = np.arange(n - 1)[None, :]
        return slots + (slots >= np.arange(n)[:, None])

    @staticmethod
    def action_force(actions: np.ndarray, accel, continuous: bool) -> np.ndarray:
        """The action forces (E, N, 2): JaxMARL's decoding times ``accel``."""
        accel = F32(accel)
        if continuous:
            a = actions.astype(F32)
            u = np.stack([a[..., 2] - a[..., 1], a[..., 4] - a[..., 3]], axis=-1)
            return (u * accel).astype(F32)
        a = actions.astype(np.int64)
        ux = np.where(a == 1, F32(-1.0), np.where(a == 2, F32(1.0), F32(0.0))).astype(F32)
        uy = np.where(a == 3, F32(-1.0), np.where(a == 4, F32(1.0), F32(0.0))).astype(F32)
        return (np.stack([ux, uy], axis=-1) * accel).astype(F32)

    @staticmethod
    def pair_distances(agent_pos: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``dx, dy, d`` (E, N, N) with ``[e, i, j]`` = agent i's position minus agent j's and their distance."""
        dx = agent_pos[:, :, None, 0] - agent_pos[:, None, :, 0]
        dy = agent_pos[:, :, None, 1] - agent_pos[:, None, :, 1]
        return dx, dy, np.sqrt(dx * dx + dy * dy).astype(F32)

    @classmethod
    def contact_forces(cls, agent_pos: np.ndarray, contact_force, contact_margin, agent_radius) -> np.ndarray:
        """Sum of the contact forces on each agent (E, N, 2): the kernel's order, the others
        of smaller id summed first, then those of larger id, each in id order."""
        e, n = agent_pos.shape[:2]
        c, k, r = F32(contact_force), F32(contact_margin), F32(agent_radius)
        dx, dy, d = cls.pair_distances(agent_pos)
        with np.errstate(divide="ignore", invalid="ignore"):
            x = -(d - (r + r)) * (F32(1.0) / k)  # XLA's evaluation of JaxMARL's -(d - r_sum) / k
            pen = softplus_penetration(x, k)
            apart = d > 0  # coincident agents (and an agent with itself) push nothing
            fx = np.where(apart, (c * (dx / d)) * pen, F32(0.0)).astype(F32)
            fy = np.where(apart, (c * (dy / d)) * pen, F32(0.0)).astype(F32)
        ids = np.arange(n)[None, :]
        lo = np.zeros((e, n, 2), F32)
        hi = np.zeros((e, n, 2), F32)
        for j in range(n):
            f = np.stack([fx[:, :, j], fy[:, :, j]], axis=-1)
            lo = np.where((j < ids)[..., None], lo + f, lo)
            hi = np.where((j > ids)[..., None], hi + f, hi)
        return (lo + hi).astype(F32)

    def reference_step(self, arrays: dict) -> None:
        """One step of every env in NumPy, operation for operation like the kernel."""
        pos, vel, landmarks = arrays["agent_pos"], arrays["agent_vel"], arrays["landmark_pos"]
        timestep = arrays["_timestep_"]
        t = timestep + 1

        # 1. forces (positions before the move)
        u = self.action_force(arrays["sampled_actions"], arrays["accel"], self.continuous_actions)
        force = (self.contact_forces(pos, arrays["contact_force"], arrays["contact_margin"], arrays["agent_radius"])
                 + u).astype(F32)

        # 2. integrate
        dt, keep, mass = F32(arrays["dt"]), F32(arrays["velocity_retention"]), F32(arrays["mass"])
        max_speed = F32(arrays["max_speed"])
        new_vel = vel * keep + (force / mass) * dt
        if max_speed >= 0:
            speed = np.sqrt(new_vel[..., 0] * new_vel[..., 0] + new_vel[..., 1] * new_vel[..., 1])
            with np.errstate(divide="ignore", invalid="ignore"):
                capped = (new_vel / speed[..., None]) * max_speed
            new_vel = np.where((speed > max_speed)[..., None], capped, new_vel)
        new_vel = new_vel.astype(F32)
        new_pos = pos + (new_vel if arrays["semi_implicit"] else vel) * dt

        # 3. each landmark's nearest agent
        ldx = new_pos[:, :, None, 0] - landmarks[:, None, :, 0]
        ldy = new_pos[:, :, None, 1] - landmarks[:, None, :, 1]
        landmark_dist = np.sqrt(ldx * ldx + ldy * ldy).min(axis=1)  # (E, L)

        # 4. rewards and observations
        g = np.zeros(pos.shape[0], F32)
        for l in range(landmarks.shape[1]):
            g = g + (-landmark_dist[:, l])
        _, _, d = self.pair_distances(new_pos)
        r = F32(arrays["agent_radius"])
        colliding = (d < (r + r)) & ~np.eye(pos.shape[1], dtype=bool)[None]
        count = colliding.sum(axis=2)
        rewards = ((-count).astype(F32) * F32(arrays["local_ratio"]) + g[:, None] * F32(arrays["global_ratio"]))

        pos[...] = new_pos
        vel[...] = new_vel
        arrays["agent_force"][...] = force
        arrays["landmark_dist"][...] = landmark_dist
        arrays["rewards"][...] = rewards
        arrays["observations"][...] = self.observe(new_pos, new_vel, landmarks)
        arrays["state"][...] = self.global_state(new_pos, new_vel, landmarks)
        timestep[...] = t
        done = arrays["_done_"]
        done[(t >= arrays["episode_length"]) & (done == 0)] = TRUNCATED
