"""ContinuousMountainCar: Gymnasium's ``MountainCarContinuous-v0`` (one thread per env).

State = observation ``(position, velocity)``; actions ``Box(-1, 1, (1,))``
float32 (``sampled_actions`` is (E, 1, 1)); the force is the action clipped to
``[min_action, max_action]`` times ``power``; reward 100 on reaching the goal
minus ``0.1 * action**2`` (of the action as given — Gymnasium squares the
unclipped action, and so does this env); terminated when ``position >=
goal_position`` (0.45) and ``velocity >= goal_velocity`` (0); truncated at
``episode_length`` (999, the ``MountainCarContinuous-v0`` limit). Starts:
position uniform in ``(-0.6, -0.4)``, velocity 0.

Gymnasium stores this env's state as float32 between steps (unlike
MountainCar), so its state is exactly what this env keeps.
"""

from __future__ import annotations

import numpy as np
from gymnasium import spaces

from .base import F32, ClassicControlEnv, clip32, control_parameters
from warp_drive.env.environment import Parameter
from warp_drive.runtime.portable_math import cos32
from .mountain_car import (
    mountain_car_drawing,
    mountain_car_observation_space,
    mountain_car_start_states,
    mountain_car_track,
    mountain_car_view,
)

_CONTINUOUS_MOUNTAIN_CAR_PARAMETERS = control_parameters(
    999,
    Parameter("min_action", -1.0, doc="least force (the action space's low)"),
    Parameter("max_action", 1.0, doc="greatest force (the action space's high)"),
    *mountain_car_track(0.45),
    Parameter("power", 0.0015, ge=0, doc="acceleration per unit of force"),
    Parameter("gravity", 0.0025, ge=0, doc="the hill's pull (a literal in Gymnasium's step)"),
)


class ContinuousMountainCar(ClassicControlEnv):
    name = "ContinuousMountainCar"
    cuda_source = "continuous_mountain_car.cu"
    step_kernel = "ContinuousMountainCarStep"
    parameters = _CONTINUOUS_MOUNTAIN_CAR_PARAMETERS
    state_dim = 2
    obs_dim = 2
    continuous_actions = True

    def observation_space(self, agent_id: int):
        return mountain_car_observation_space(self.params)

    def action_space(self, agent_id: int):
        return spaces.Box(low=float(self.params["min_action"]), high=float(self.params["max_action"]),
                          shape=(1,), dtype=np.float32)

    def sample_start_states(self, n: int, rng: np.random.Generator) -> np.ndarray:
        return mountain_car_start_states(n, rng)

    def observe(self, states: np.ndarray) -> np.ndarray:
        return np.array(states, dtype=F32)

    def dynamics(self, state, action, p):
        position, velocity = state[:, 0].astype(F32), state[:, 1].astype(F32)
        action = action.astype(F32)
        force = clip32(action, p["min_action"], p["max_action"])
        velocity = velocity + (force * p["power"] - p["gravity"] * cos32(F32(3.0) * position))
        velocity = clip32(velocity, -p["max_speed"], p["max_speed"])
        position = clip32(position + velocity, p["min_position"], p["max_position"])
        velocity = np.where((position == p["min_position"]) & (velocity < 0), F32(0.0), velocity).astype(F32)
        new_state = np.stack([position, velocity], axis=1).astype(F32)
        terminated = (position >= p["goal_position"]) & (velocity >= p["goal_velocity"])
        rewards = (np.where(terminated, F32(100.0), F32(0.0)) - (action * action) * F32(0.1)).astype(F32)
        return new_state, new_state.copy(), rewards, terminated

    # ---------------------------------------------------------------- rendering
    def view(self):
        return mountain_car_view(self.params)

    def draw_state(self, state):
        return mountain_car_drawing(float(state[0]))
