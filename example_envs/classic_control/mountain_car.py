"""MountainCar: Gymnasium's ``MountainCar-v0`` as a warp_drive environment (one thread per env).

State = observation ``(position, velocity)``; actions ``Discrete(3)`` (push
left, none, right); reward -1 per step; terminated when ``position >=
goal_position`` (0.5) and ``velocity >= goal_velocity`` (0, Gymnasium's
constructor option); truncated at ``episode_length`` (200, the
``MountainCar-v0`` limit). Starts: position uniform in ``(-0.6, -0.4)``,
velocity 0, as Gymnasium's ``reset``.

(WarpDrive's version flagged the goal with done = 2; here 1 is termination and
2 the time limit, as for every warp_drive environment.)
"""

from __future__ import annotations

import numpy as np
from gymnasium import spaces

from .base import F32, ClassicControlEnv, clip32, control_parameters
from warp_drive.env.environment import Parameter
from warp_drive.runtime.portable_math import cos32


def mountain_car_track(goal_position: float) -> tuple[Parameter, ...]:
    """The track both mountain cars share (Gymnasium's constants): positions are free (the goal may be moved,
    e.g. next to the start), the speed limit and the hill's gravity are magnitudes."""
    return (
        Parameter("min_position", -1.2, doc="left end of the track (a wall)"),
        Parameter("max_position", 0.6, doc="right end of the track"),
        Parameter("max_speed", 0.07, gt=0, doc="speed limit, both ways"),
        Parameter("goal_position", goal_position, doc="position that terminates (with goal_velocity)"),
        Parameter("goal_velocity", 0.0, doc="least velocity at the goal that terminates"),
    )


_MOUNTAIN_CAR_PARAMETERS = control_parameters(
    200, *mountain_car_track(0.5),
    Parameter("force", 0.001, ge=0, doc="acceleration of a push"),
    Parameter("gravity", 0.0025, ge=0, doc="the hill's pull (times cos(3 position))"),
)


def mountain_car_start_states(n: int, rng: np.random.Generator) -> np.ndarray:
    """Gymnasium's reset: position uniform in (-0.6, -0.4), velocity 0."""
    states = np.zeros((n, 2), F32)
    states[:, 0] = rng.uniform(-0.6, -0.4, size=n)
    return states


def mountain_car_observation_space(p: dict) -> spaces.Box:
    low = np.array([p["min_position"], -p["max_speed"]], dtype=np.float32)
    high = np.array([p["max_position"], p["max_speed"]], dtype=np.float32)
    return spaces.Box(low, high, dtype=np.float32)


class MountainCar(ClassicControlEnv):
    name = "MountainCar"
    cuda_source = "mountain_car.cu"
    step_kernel = "MountainCarStep"
    parameters = _MOUNTAIN_CAR_PARAMETERS
    state_dim = 2
    obs_dim = 2

    def observation_space(self, agent_id: int):
        return mountain_car_observation_space(self.params)

    def action_space(self, agent_id: int):
        return spaces.Discrete(3)

    def sample_start_states(self, n: int, rng: np.random.Generator) -> np.ndarray:
        return mountain_car_start_states(n, rng)

    def observe(self, states: np.ndarray) -> np.ndarray:
        return np.array(states, dtype=F32)

    def dynamics(self, state, action, p):
        position, velocity = state[:, 0].astype(F32), state[:, 1].astype(F32)
        push = (action.astype(np.int32) - 1).astype(F32)
        velocity = velocity + (push * p["force"] + cos32(F32(3.0) * position) * (-p["gravity"]))
        velocity = clip32(velocity, -p["max_speed"], p["max_speed"])
        position = clip32(position + velocity, p["min_position"], p["max_position"])
        velocity = np.where((position == p["min_position"]) & (velocity < 0), F32(0.0), velocity).astype(F32)
        new_state = np.stack([position, velocity], axis=1).astype(F32)
        terminated = (position >= p["goal_position"]) & (velocity >= p["goal_velocity"])
        rewards = np.full(state.shape[0], -1.0, F32)
        return new_state, new_state.copy(), rewards, terminated

    # ---------------------------------------------------------------- rendering
    def view(self):
        return mountain_car_view(self.params)

    def draw_state(self, state):
        return mountain_car_drawing(float(state[0]))


def _hill(x):
    """Gymnasium's track height."""
    return np.sin(3 * np.asarray(x)) * 0.45 + 0.55


def mountain_car_view(p) -> tuple:
    """Limits and background (the hill and the goal flag) of both mountain cars."""
    low, high, goal = float(p["min_position"]), float(p["max_position"]), float(p["goal_position"])
    xs = np.linspace(low, high, 100)
    flag = ([goal, goal], [float(_hill(goal)), float(_hill(goal)) + 0.2])
    return (low - 0.05, high + 0.05, -0.1, 1.3), [(xs, _hill(xs)), flag]


def mountain_car_drawing(position: float) -> list:
    """The car: a short segment along the slope at ``position`` with its centre marked."""
    half = 0.06
    xs = np.array([position - half, position, position + half])
    return [(xs, _hill(xs) + 0.03)]
