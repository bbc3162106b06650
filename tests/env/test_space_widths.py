"""A declared space must hold exactly the values per agent of the array it reads, both ways, at construction.

A space narrower than the shared array used to pass construction and fail at the first rollout with
``shape '[1536, 15]' is invalid for input of size 32256``, naming no env, array or space.
"""

from __future__ import annotations

import numpy as np
import pytest
from gymnasium import spaces

from example_envs.dummy_env.dummy_env import DummyEnv
from warp_drive.env.consistency import check
from warp_drive.env.wrapper import EnvWrapper


def _observing(width: int, agent: int | None = None):
    def observation_space(self, agent_id):
        n = width if agent is None or agent_id == agent else 2
        return spaces.Box(-np.inf, np.inf, shape=(n,), dtype=np.float32)
    return type("Observing", (DummyEnv,), {"name": "Observing", "observation_space": observation_space})


@pytest.mark.parametrize("width, word", [(1, "narrower"), (3, "wider")])
def test_an_observation_space_of_another_width_than_the_array_is_refused(width, word):
    with pytest.raises(ValueError) as error:
        EnvWrapper(_observing(width), num_envs=3, backend="cpu", seed=0)
    message = str(error.value)
    assert message.startswith("Observing: 'observations' has shape (3, 4, 2), 2 value(s) per agent")
    assert f"agent 0 (group 'shared')" in message and f"of {width}: {word} than the array" in message


def test_one_agent_of_a_group_with_a_narrower_space_is_named():
    with pytest.raises(ValueError, match=r"agent 2 \(group 'shared'\) has the observation space .* of 1: narrower"):
        EnvWrapper(_observing(1, agent=2), num_envs=3, backend="cpu", seed=0)


def test_an_action_space_wider_than_the_action_array_is_refused():
    env = type("Acting", (DummyEnv,), {"name": "Acting",
                                       "action_space": lambda self, a: spaces.MultiDiscrete([3, 3])})
    with pytest.raises(ValueError, match=r"'sampled_actions' has shape \(2, 4\), 1 value\(s\) per agent, .* of 2: "
                                         r"wider than the array"):
        EnvWrapper(env, num_envs=2, backend="cpu", seed=0)


def test_the_consistency_checker_refuses_it_too():
    with pytest.raises(ValueError, match="narrower than the array"):
        check(_observing(1), num_envs=2, backend="cpu", num_episodes=1)
