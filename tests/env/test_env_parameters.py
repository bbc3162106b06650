"""Env constructors refuse NaN and inf among their float parameters, naming them (a NaN max_acceleration
trained on silently and exited 0; grid_length=inf failed later, in the GIF writer)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from example_envs.simple_spread.simple_spread import SimpleSpread
from example_envs.tag_continuous.tag_continuous import TagContinuous


@pytest.mark.parametrize("env_class, name", [(TagContinuous, "max_acceleration"), (TagContinuous, "grid_length"),
                                             (TagContinuous, "tag_reward_for_tagger"), (SimpleSpread, "dt"),
                                             (SimpleSpread, "max_speed"), (SimpleSpread, "agent_radius")])
@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf])
def test_a_non_finite_float_parameter_is_refused_by_name(env_class, name, value):
    with pytest.raises(ValueError, match=rf"{env_class.__name__}: {name}={value!r}: must be finite numbers"):
        env_class(**{name: value})
    env_class()  # the defaults still construct


# The other shipped envs, each through its constructor's float parameters (Acrobot has none: Gymnasium exposes
# none for it). TagGridWorld already refused NaN and inf (its magnitudes are checked >= 0 and finite).
from example_envs.classic_control.cartpole import CartPole  # noqa: E402
from example_envs.classic_control.continuous_mountain_car import ContinuousMountainCar  # noqa: E402
from example_envs.classic_control.mountain_car import MountainCar  # noqa: E402
from example_envs.classic_control.pendulum import Pendulum  # noqa: E402
from example_envs.dummy_env.dummy_env import DummyEnv  # noqa: E402
from example_envs.pandemic_economy.pandemic_economy import PandemicEconomy  # noqa: E402
from example_envs.tag_gridworld.tag_gridworld import TagGridWorld  # noqa: E402

MORE_PARAMETERS = [(CartPole, "gravity"), (CartPole, "tau"), (MountainCar, "force"), (MountainCar, "goal_velocity"),
                   (ContinuousMountainCar, "power"), (ContinuousMountainCar, "max_action"), (Pendulum, "g"),
                   (Pendulum, "max_torque"), (DummyEnv, "step_size"), (DummyEnv, "tolerance"),
                   (PandemicEconomy, "eta"), (PandemicEconomy, "borrow_rate"), (PandemicEconomy, "vaccination_rate"),
                   (PandemicEconomy, "max_subsidy"), (PandemicEconomy, "R0_range"), (TagGridWorld, "wall_hit_penalty")]


@pytest.mark.parametrize("env_class, name", MORE_PARAMETERS)
@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf])
def test_every_shipped_env_refuses_a_non_finite_float_parameter_by_name(env_class, name, value):
    given = (1.0, value) if name.endswith("_range") else value
    with pytest.raises(ValueError, match=rf"{name}\b.*finite"):
        env_class(**{name: given})


@pytest.mark.parametrize("env_class", sorted({c for c, _ in MORE_PARAMETERS}, key=lambda c: c.__name__))
def test_the_defaults_still_construct(env_class):
    env_class()


@pytest.mark.parametrize("env_class, name", [(CartPole, "length"), (Pendulum, "dt"), (MountainCar, "gravity")])
def test_a_classic_control_parameter_beyond_float32_is_refused(env_class, name):
    """1e39 is finite, but the kernels take float32: it reached them as inf."""
    with pytest.raises(ValueError, match=rf"{env_class.__name__}: {name}=1e\+39: beyond float32's range"):
        env_class(**{name: 1e39})


@pytest.mark.parametrize("kwargs, match", [
    ({"vaccination_rate": 2.0}, r"vaccination_rate=2.0: must be <= 1"),
    ({"alpha_range": (0.3, 1.2)}, "alpha_range=.*within \\[0, 1\\]"),
    ({"population_range": (0.0, 5.0)}, "population_range=.*> 0"),
    ({"R0_range": (2.7, 1.3)}, "R0_range=.*low <= high"),
])
def test_pandemic_economy_refuses_parameters_outside_their_documented_ranges(kwargs, match):
    with pytest.raises(ValueError, match=match):
        PandemicEconomy(**kwargs)


def test_pandemic_economy_refuses_a_params_file_holding_nan(tmp_path):
    path = tmp_path / "params.npz"
    np.savez(path, R0=np.array([1.5, np.nan, 2.0]))
    with pytest.raises(ValueError, match=r"params.npz: 'R0' holds NaN or inf"):
        PandemicEconomy(num_regions=3, params_file=path)
