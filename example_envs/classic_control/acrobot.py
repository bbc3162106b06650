"""Acrobot: Gymnasium's ``Acrobot-v1`` as a warp_drive environment (one thread per env).

State ``(theta1, theta2, dtheta1, dtheta2)``; observation ``(cos theta1, sin
theta1, cos theta2, sin theta2, dtheta1, dtheta2)``; actions ``Discrete(3)``
(torque -1, 0, +1 on the joint between the links); one RK4 step of 0.2 s of
the "book" equations of motion, angles wrapped into ``[-pi, pi]`` and
velocities bounded by ``4 pi`` and ``9 pi``; reward -1 per step and 0 on the
terminating one; terminated when ``-cos theta1 - cos(theta1 + theta2) > 1``;
truncated at ``episode_length`` (500, the ``Acrobot-v1`` limit). Starts: all
four state variables uniform in ``(-0.1, 0.1)``, as Gymnasium's ``reset``.

The physical constants are Gymnasium's class constants, written into the
kernel (Gymnasium exposes no constructor option for them).
"""

from __future__ import annotations

import numpy as np
from gymnasium import spaces

from .base import F32, ClassicControlEnv, clip32, control_parameters
from warp_drive.runtime.portable_math import cos32, sincos32

MAX_VEL_1 = F32(4 * np.pi)
MAX_VEL_2 = F32(9 * np.pi)
DT = F32(0.2)
_PI = F32(np.pi)
_TURN = _PI - (-_PI)


def _wrap(x: np.ndarray) -> np.ndarray:
    """Gymnasium's ``wrap(x, -pi, pi)`` in float32 (the kernel's ``acrobot_wrap``)."""
    x = x.astype(F32)
    for sign in (1, -1):
        while True:
            outside = x > _PI if sign == 1 else x < -_PI
            shifted = (x - _TURN) if sign == 1 else (x + _TURN)
            move = outside & (shifted != x)
            if not move.any():
                break
            x = np.where(move, shifted, x).astype(F32)
    return x


def _dsdt(s: np.ndarray, a: np.ndarray) -> np.ndarray:
    """Gymnasium's ``AcrobotEnv._dsdt`` ("book"), float32, vectorised; ``s`` is (E, 4)."""
    theta1, theta2, dtheta1, dtheta2 = s[:, 0], s[:, 1], s[:, 2], s[:, 3]
    n = s.shape[0]
    sines, cosines = sincos32(np.concatenate([theta2, theta1, theta1 + theta2]))  # one call: cheaper
    sin2, cos2, sin1, sin12 = sines[:n], cosines[:n], sines[n:2 * n], sines[2 * n:]
    one, quarter, half = F32(1.0), F32(0.25), F32(0.5)
    d1 = ((quarter + (F32(1.25) + one * cos2)) + one) + one
    d2 = (quarter + half * cos2) + one
    phi2 = F32(0.5 * 9.8) * sin12  # cos(t1 + t2 - pi/2) = sin(t1 + t2)
    phi1 = ((-half * (dtheta2 * dtheta2)) * sin2 - ((one * dtheta2) * dtheta1) * sin2) + F32(1.5 * 9.8) * sin1 + phi2
    ddtheta2 = (a + d2 / d1 * phi1 - (half * (dtheta1 * dtheta1)) * sin2 - phi2) / (F32(1.25) - (d2 * d2) / d1)
    ddtheta1 = -(d2 * ddtheta2 + phi1) / d1
    return np.stack([dtheta1, dtheta2, ddtheta1, ddtheta2], axis=1).astype(F32)


class Acrobot(ClassicControlEnv):
    name = "Acrobot"
    cuda_source = "acrobot.cu"
    step_kernel = "AcrobotStep"
    parameters = control_parameters(500)  # Gymnasium exposes no physical constant of Acrobot
    state_dim = 4
    obs_dim = 6

    def observation_space(self, agent_id: int):
        high = np.array([1.0, 1.0, 1.0, 1.0, MAX_VEL_1, MAX_VEL_2], dtype=np.float32)
        return spaces.Box(-high, high, dtype=np.float32)

    def action_space(self, agent_id: int):
        return spaces.Discrete(3)

    def sample_start_states(self, n: int, rng: np.random.Generator) -> np.ndarray:
        return rng.uniform(-0.1, 0.1, size=(n, 4)).astype(F32)

    def observe(self, states: np.ndarray) -> np.ndarray:
        s = states.astype(F32)
        sin1, cos1 = sincos32(s[:, 0])
        sin2, cos2 = sincos32(s[:, 1])
        return np.stack([cos1, sin1, cos2, sin2, s[:, 2], s[:, 3]], axis=1).astype(F32)

    def dynamics(self, state, action, p):
        y0 = state.astype(F32)
        a = (action.astype(np.int32) - 1).astype(F32)
        dt2 = DT / F32(2.0)
        dt6 = DT / F32(6.0)
        k1 = _dsdt(y0, a)
        k2 = _dsdt(y0 + dt2 * k1, a)
        k3 = _dsdt(y0 + dt2 * k2, a)
        k4 = _dsdt(y0 + DT * k3, a)
        ns = (y0 + dt6 * (k1 + F32(2.0) * k2 + F32(2.0) * k3 + k4)).astype(F32)
        ns[:, 0] = _wrap(ns[:, 0])
        ns[:, 1] = _wrap(ns[:, 1])
        ns[:, 2] = clip32(ns[:, 2], -MAX_VEL_1, MAX_VEL_1)
        ns[:, 3] = clip32(ns[:, 3], -MAX_VEL_2, MAX_VEL_2)
        obs = self.observe(ns)
        terminated = -obs[:, 0] - cos32(ns[:, 1] + ns[:, 0]) > F32(1.0)  # obs[:, 0] = cos theta1
        rewards = np.where(terminated, F32(0.0), F32(-1.0)).astype(F32)
        return ns, obs, rewards, terminated

    # ---------------------------------------------------------------- rendering
    def view(self):
        return (-2.2, 2.2, -2.2, 2.2), [([-2.2, 2.2], [1.0, 1.0])]  # the height the tip must pass

    def draw_state(self, state):
        """The two unit links from the pivot; both angles 0 hang straight down."""
        t1, t2 = float(state[0]), float(state[1])
        x1, y1 = np.sin(t1), -np.cos(t1)
        return [([0.0, x1], [0.0, y1]), ([x1, x1 + np.sin(t1 + t2)], [y1, y1 - np.cos(t1 + t2)])]
