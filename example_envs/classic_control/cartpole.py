"""CartPole: Gymnasium's ``CartPole-v1`` as a warp_drive environment (one thread per env).

State ``(x, x_dot, theta, theta_dot)`` = observation; actions ``Discrete(2)``
(0 pushes left, 1 right); reward 1 every step, including the terminating one
(or Sutton & Barto's 0 / -1 with ``sutton_barto_reward=True``); terminated when
``|x| > x_threshold`` or ``|theta| > 12 deg``; truncated at ``episode_length``
(500, the ``CartPole-v1`` time limit). Starts: every state variable uniform in
``(-0.05, 0.05)``, as Gymnasium's ``reset``.

Gymnasium keeps a float64 state between steps; here the state is float32, so
each step starts from Gymnasium's state rounded to float32.
"""

from __future__ import annotations

import math

import numpy as np
from gymnasium import spaces

from .base import F32, ClassicControlEnv, control_parameters
from warp_drive.env.environment import Parameter
from warp_drive.runtime.portable_math import sincos32

# Gymnasium's CartPoleEnv constants: masses, the pole, the time step and the bounds must be > 0 (length=0
# divided by zero in thetaacc and trained into NaN; tau=0 would never move).
_CARTPOLE_PARAMETERS = control_parameters(
    500,
    Parameter("gravity", 9.8, ge=0, doc="gravitational acceleration (m/s^2)"),
    Parameter("masscart", 1.0, gt=0, doc="mass of the cart (kg)"),
    Parameter("masspole", 0.1, gt=0, doc="mass of the pole (kg)"),
    Parameter("length", 0.5, gt=0, doc="half the pole's length (m)"),
    Parameter("force_mag", 10.0, ge=0, doc="force of a push (N)"),
    Parameter("tau", 0.02, gt=0, doc="seconds between state updates (Euler step)"),
    Parameter("theta_threshold_radians", 12 * 2 * math.pi / 360, gt=0, doc="pole angle that terminates"),
    Parameter("x_threshold", 2.4, gt=0, doc="cart position that terminates"),
    Parameter("sutton_barto_reward", False, doc="Sutton & Barto's reward: 0 a step, -1 on termination"),
)


class CartPole(ClassicControlEnv):
    name = "CartPole"
    cuda_source = "cartpole.cu"
    step_kernel = "CartPoleStep"
    parameters = _CARTPOLE_PARAMETERS
    state_dim = 4
    obs_dim = 4

    def observation_space(self, agent_id: int):
        high = np.array([float(self.params["x_threshold"]) * 2, np.inf,
                         float(self.params["theta_threshold_radians"]) * 2, np.inf], dtype=np.float32)
        return spaces.Box(-high, high, dtype=np.float32)

    def action_space(self, agent_id: int):
        return spaces.Discrete(2)

    def sample_start_states(self, n: int, rng: np.random.Generator) -> np.ndarray:
        return rng.uniform(-0.05, 0.05, size=(n, 4)).astype(F32)

    def observe(self, states: np.ndarray) -> np.ndarray:
        return np.array(states, dtype=F32)

    def dynamics(self, state, action, p):
        x, x_dot, theta, theta_dot = (state[:, i].astype(F32) for i in range(4))
        total_mass = p["masspole"] + p["masscart"]
        polemass_length = p["masspole"] * p["length"]
        force = np.where(action == 1, p["force_mag"], -p["force_mag"]).astype(F32)
        sintheta, costheta = sincos32(theta)
        temp = (force + polemass_length * np.square(theta_dot) * sintheta) / total_mass
        thetaacc = (p["gravity"] * sintheta - costheta * temp) / (
            p["length"] * (F32(4.0) / F32(3.0) - p["masspole"] * np.square(costheta) / total_mass)
        )
        xacc = temp - polemass_length * thetaacc * costheta / total_mass
        x = x + p["tau"] * x_dot
        x_dot = x_dot + p["tau"] * xacc
        theta = theta + p["tau"] * theta_dot
        theta_dot = theta_dot + p["tau"] * thetaacc
        new_state = np.stack([x, x_dot, theta, theta_dot], axis=1).astype(F32)
        terminated = ((x < -p["x_threshold"]) | (x > p["x_threshold"])
                      | (theta < -p["theta_threshold_radians"]) | (theta > p["theta_threshold_radians"]))
        if p["sutton_barto_reward"]:
            rewards = np.where(terminated, F32(-1.0), F32(0.0)).astype(F32)
        else:
            rewards = np.ones(state.shape[0], F32)
        return new_state, new_state.copy(), rewards, terminated

    # ---------------------------------------------------------------- rendering
    def view(self):
        limit = float(self.params["x_threshold"]) + 0.5
        return (-limit, limit, -0.5, 2.0), [([-limit, limit], [0.0, 0.0])]  # the track

    def draw_state(self, state):
        """The cart as a box on the track and the pole from its top (``length`` is half the pole)."""
        x, theta = float(state[0]), float(state[2])
        w, h, pole = 0.25, 0.15, 2 * float(self.params["length"])
        cart = ([x - w, x + w, x + w, x - w, x - w], [0.0, 0.0, 2 * h, 2 * h, 0.0])
        return [cart, ([x, x + pole * np.sin(theta)], [2 * h, 2 * h + pole * np.cos(theta)])]
