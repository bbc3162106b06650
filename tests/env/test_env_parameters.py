"""Env constructors refuse NaN and inf among their float parameters, naming them (a NaN max_acceleration
trained on silently and exited 0; grid_length=inf failed later, in the GIF writer)."""

from __future__ import annotations

import math

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
