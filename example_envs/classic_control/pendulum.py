"""Pendulum: Gymnasium's ``Pendulum-v1`` as a warp_drive environment (one thread per env).

State ``(theta, thetadot)``; observation ``(cos theta, sin theta, thetadot)``;
actions ``Box(-2, 2, (1,))`` float32 torque (``sampled_actions`` is (E, 1, 1)),
clipped to ``+-max_torque``; reward ``-(normalize(theta)^2 + 0.1 thetadot^2 +
0.001 u^2)`` of the state before the step; never terminates; truncated at
``episode_length`` (200, the ``Pendulum-v1`` limit). Starts: theta uniform in
``(-pi, pi)``, thetadot in ``(-1, 1)``, as Gymnasium's ``reset``. ``g``
defaults to Gymnasium's 10.0 (WarpDrive's port used 9.81; pass ``g=9.81`` for
that).

Like Gymnasium, theta itself is never wrapped (only the cost normalises it).
"""

from __future__ import annotations

import numpy as np
from gymnasium import spaces

from .base import F32, ClassicControlEnv, clip32, control_parameters
from warp_drive.env.environment import Parameter
from warp_drive.runtime.portable_math import sin32, sincos32

# Gymnasium's PendulumEnv constants: m and l divide (3 / (m l^2)), dt = 0 would never move, and the limits
# bound the spaces (Box(-max_torque, max_torque)).
_PENDULUM_PARAMETERS = control_parameters(
    200,
    Parameter("max_speed", 8.0, gt=0, doc="angular speed limit (rad/s)"),
    Parameter("max_torque", 2.0, gt=0, doc="torque limit, the action space's bound"),
    Parameter("dt", 0.05, gt=0, doc="seconds per step"),
    Parameter("g", 10.0, ge=0, doc="gravitational acceleration (Gymnasium's constructor option)"),
    Parameter("m", 1.0, gt=0, doc="mass of the pendulum"),
    Parameter("l", 1.0, gt=0, doc="length of the pendulum"),
)
_PI = F32(np.pi)
_TWO_PI = F32(2 * np.pi)


def angle_normalize32(x: np.ndarray) -> np.ndarray:
    """Gymnasium's ``((x + pi) % (2 pi)) - pi`` in float32 (NumPy's % is floored and exact)."""
    return (((x.astype(F32) + _PI) % _TWO_PI) - _PI).astype(F32)


class Pendulum(ClassicControlEnv):
    name = "Pendulum"
    cuda_source = "pendulum.cu"
    step_kernel = "PendulumStep"
    parameters = _PENDULUM_PARAMETERS
    state_dim = 2
    obs_dim = 3
    continuous_actions = True

    def observation_space(self, agent_id: int):
        high = np.array([1.0, 1.0, float(self.params["max_speed"])], dtype=np.float32)
        return spaces.Box(-high, high, dtype=np.float32)

    def action_space(self, agent_id: int):
        torque = float(self.params["max_torque"])
        return spaces.Box(low=-torque, high=torque, shape=(1,), dtype=np.float32)

    def sample_start_states(self, n: int, rng: np.random.Generator) -> np.ndarray:
        high = np.array([np.pi, 1.0])
        return rng.uniform(-high, high, size=(n, 2)).astype(F32)

    def observe(self, states: np.ndarray) -> np.ndarray:
        s = states.astype(F32)
        sin, cos = sincos32(s[:, 0])
        return np.stack([cos, sin, s[:, 1]], axis=1).astype(F32)

    def dynamics(self, state, action, p):
        th, thdot = state[:, 0].astype(F32), state[:, 1].astype(F32)
        u = clip32(action.astype(F32), -p["max_torque"], p["max_torque"])
        costs = angle_normalize32(th) ** 2 + F32(0.1) * thdot**2 + F32(0.001) * (u**2)
        g, m, l, dt = p["g"], p["m"], p["l"], p["dt"]
        newthdot = thdot + (F32(3.0) * g / (F32(2.0) * l) * sin32(th) + F32(3.0) / (m * (l * l)) * u) * dt
        newthdot = clip32(newthdot, -p["max_speed"], p["max_speed"])
        newth = th + newthdot * dt
        new_state = np.stack([newth, newthdot], axis=1).astype(F32)
        return new_state, self.observe(new_state), (-costs).astype(F32), np.zeros(state.shape[0], bool)

    # ---------------------------------------------------------------- rendering
    def view(self):
        return (-1.3, 1.3, -1.3, 1.3), []

    def draw_state(self, state):
        """The rod from the pivot; theta = 0 points up."""
        theta = float(state[0])
        return [([0.0, np.sin(theta)], [0.0, np.cos(theta)])]
