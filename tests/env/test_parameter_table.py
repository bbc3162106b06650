"""Parameters declared once (``warp_drive/env/env_parameters.py``): one table per env drives validation at
construction, the kernel's scalars, the run config's ``env.config`` keys and ``warp-drive envs --describe``;
envs without a table keep working."""

from __future__ import annotations

import math

import numpy as np
import pytest
from gymnasium import spaces

from example_envs.classic_control.cartpole import CartPole
from example_envs.dummy_env.dummy_env import DummyEnv
from warp_drive.cli import main
from warp_drive.runtime.data_feed import DataFeed
from warp_drive.env.environment import Environment, Parameter, ParameterError
from warp_drive.env.registry import BUILTIN_ENVS, get_env_class, register_env
from warp_drive.training.config import ConfigError, RunConfig, check_env


def test_cartpole_length_zero_is_refused_at_construction_in_one_line():
    """It divided by zero in the pole's acceleration and trained into NaN."""
    with pytest.raises(ValueError) as error:
        CartPole(length=0)
    message = str(error.value)
    assert message == "CartPole: length=0: must be > 0 (gt=0). Fix: set length > 0 (default 0.5)"
    assert (error.value.env, error.value.parameter, error.value.value) == ("CartPole", "length", 0)


@pytest.mark.parametrize("config, match", [
    ({"num_agents": True}, r"DummyEnv: num_agents=True: must be an integer, got bool\. Fix: "),
    ({"num_agents": 2.5}, r"DummyEnv: num_agents=2\.5: must be an integer\. Fix: set num_agents to a whole"),
    ({"step_size": "0.3"}, r"DummyEnv: step_size='0\.3': must be a number, got str"),
    ({"step_size": -0.25}, r"DummyEnv: step_size=-0\.25: must be > 0 \(gt=0\)\. Fix: set step_size > 0"),
    ({"target": math.nan}, r"DummyEnv: target=nan: must be finite"),
    ({"target": 1e39}, r"DummyEnv: target=1e\+39: beyond float32's range"),
    ({"episode_length": 2 ** 31}, r"DummyEnv: episode_length=2147483648: beyond int32's range"),
    ({"random_starts": "yes"}, r"DummyEnv: random_starts='yes': must be true or false"),
    ({"step_sise": 0.3}, r"DummyEnv: unknown parameter 'step_sise' \(did you mean 'step_size'\?\); known: "
                         r"num_agents, episode_length, step_size, target, tolerance, random_starts\. Fix: "),
])
def test_every_refusal_is_one_line_naming_env_parameter_value_and_fix(config, match):
    with pytest.raises(ParameterError, match=match) as error:
        DummyEnv(**config)
    assert "\n" not in str(error.value) and isinstance(error.value, TypeError) and isinstance(error.value, ValueError)


def test_values_are_held_as_declared():
    env = DummyEnv(num_agents=3.0, step_size=1, random_starts=0)
    assert (env.num_agents, env.step_size, env.random_starts) == (3, 1.0, False)
    assert type(env.num_agents) is int and type(env.step_size) is float and type(env.random_starts) is bool
    assert CartPole(seed=2 ** 62 + 1).seed == 2 ** 62 + 1  # a host-only int: no int32 limit, no float rounding


def test_kernel_parameters_are_pushed_as_scalars_of_their_names():
    env = DummyEnv(step_size=0.5)
    assert "step_size" not in env.get_data_dictionary(2)  # declared once: the env pushes none of them itself
    feed = env.data_dictionary(2)
    assert feed["step_size"]["data"] == np.float32(0.5) and feed["step_size"]["data"].dtype == np.float32
    assert {"target", "tolerance"} <= set(feed) and not {"random_starts", "num_agents", "episode_length"} & set(feed)
    env.target = 1.5  # the attribute as it is when pushed
    assert env.data_dictionary(2)["target"]["data"] == np.float32(1.5)
    gridworld = get_env_class("TagGridWorld")(use_full_observation=False).data_dictionary(1)
    assert gridworld["use_full_observation"]["data"] == 0 and gridworld["use_full_observation"]["data"].dtype == np.int32


def test_a_name_the_env_pushes_itself_wins():
    class OwnTarget(DummyEnv):
        def get_data_dictionary(self, num_envs):
            feed = super().get_data_dictionary(num_envs)
            feed.add_data("target", np.float32(-3.0))
            return feed

    assert OwnTarget(target=2.0).data_dictionary(1)["target"]["data"] == np.float32(-3.0)


def test_declarations_are_checked():
    with pytest.raises(TypeError, match="type must be one of int, float, bool, str"):
        Parameter("table", [1, 2])
    with pytest.raises(ParameterError, match="Parameter declaration: speed=0: must be > 1"):
        Parameter("speed", 0, gt=1)
    with pytest.raises(ParameterError, match="must be one of 'a', 'b'"):
        Parameter("mode", "c", choices=("a", "b"))
    assert Parameter("seed", None, type=int).validate(None, "X") is None
    assert not Parameter("mode", "a").pushed and Parameter("flag", True).pushed
    assert not Parameter("num_agents", 2).pushed and not Parameter("n", 1, kernel=False).pushed


class NoTable(Environment):
    """An old-style env: its own constructor, no table."""

    name = "NoTable"
    cuda_source = DummyEnv.cuda_source_path()
    step_kernel = "DummyEnvStep"

    def __init__(self, num_agents: int = 2, episode_length: int = 5, speed: float = 1.0):
        if speed <= 0:
            raise ValueError(f"NoTable: speed must be > 0, got {speed}")
        self.num_agents, self.episode_length, self.speed = num_agents, episode_length, speed

    def observation_space(self, agent_id):
        return spaces.Box(-np.inf, np.inf, (2,), np.float32)

    def action_space(self, agent_id):
        return spaces.Discrete(3)

    def get_data_dictionary(self, num_envs):
        return DataFeed()


class Bare(Environment):
    observation_space = NoTable.observation_space
    action_space = NoTable.action_space
    get_data_dictionary = NoTable.get_data_dictionary


def test_envs_without_a_table_keep_their_constructors():
    assert NoTable(speed=2.0).speed == 2.0 and NoTable.config_keys() == ["num_agents", "episode_length", "speed"]
    Bare()
    with pytest.raises(ParameterError, match="Bare: unknown parameter 'x'; known: none"):
        Bare(x=1)


register_env("NoTableEnv", NoTable, overwrite=True)


def _config(name: str, env_config: dict) -> RunConfig:
    return RunConfig.from_dict({"name": "t", "env": {"name": name, "config": env_config},
                                "trainer": {"num_envs": 2, "rollout_length": 4, "total_steps": 8},
                                "policy": {"shared": {}}})


def test_run_config_env_keys_are_checked_by_the_table():
    with pytest.raises(ConfigError) as error:
        check_env(_config("CartPole", {"length": 0}))
    assert str(error.value) == "env.config: CartPole: length=0: must be > 0 (gt=0). Fix: set length > 0 (default 0.5)"
    with pytest.raises(ConfigError, match=r"env.config: CartPole: unknown parameter 'lenght' \(did you mean "
                                          r"'length'\?\); known: episode_length, seed, gravity"):
        check_env(_config("CartPole", {"lenght": 0.6}))
    with pytest.raises(ConfigError, match=r"env.config: TagGridWorld: unknown parameter 'starting_x'.*"
                                          r"starting_location_x, starting_location_y"):
        check_env(_config("TagGridWorld", {"starting_x": [0] * 11}))
    check_env(_config("CartPole", {"length": 0.6, "episode_length": 50}))
    check_env(_config("NoTableEnv", {"speed": 2.0}))  # no table: the constructor checks, as before
    with pytest.raises(ConfigError, match="NoTable: speed must be > 0"):
        check_env(_config("NoTableEnv", {"speed": -1.0}))


def test_envs_describe(capsys):
    assert main(["envs", "--describe", "CartPole"]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[1].split() == ["name", "type", "default", "bounds", "kernel", "doc"]
    row = next(line for line in out.splitlines() if line.startswith("length "))
    assert row.split()[:5] == ["length", "float", "0.5", ">", "0"] and "scalar" in row and "half the pole" in row
    assert main(["envs", "--describe", "NoTableEnv"]) == 0
    assert "NoTable(num_agents: 'int' = 2, episode_length: 'int' = 5, speed: 'float' = 1.0)" in capsys.readouterr().out
    assert main(["envs", "--describe", "NoSuchEnv"]) == 2
    assert "no environment named 'NoSuchEnv'" in capsys.readouterr().err


@pytest.mark.parametrize("name", sorted(BUILTIN_ENVS))
def test_every_example_env_declares_its_parameters(name):
    env_class = get_env_class(name)
    assert env_class.parameters, f"{name} declares no parameter table"
    env = env_class()
    for parameter in env_class.parameters:
        assert hasattr(env, parameter.name), (name, parameter.name)
    assert "episode_length" in env_class.config_keys()


@pytest.mark.parametrize("name, parameter", [(n, p) for n in ("CartPole", "Pendulum", "MountainCar",
                                                                "ContinuousMountainCar")
                                             for p in get_env_class(n).parameters
                                             if p.name in ("masscart", "masspole", "length", "tau", "dt", "m", "l",
                                                           "max_speed", "max_torque")])
def test_classic_control_magnitudes_must_be_positive(name, parameter):
    with pytest.raises(ParameterError, match=rf"{name}: {parameter.name}=0: must be > 0"):
        get_env_class(name)(**{parameter.name: 0})
