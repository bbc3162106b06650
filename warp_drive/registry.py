"""Environment registry: names to environment classes.

Built-in example environments are imported lazily by name. Users register
their own class — its ``.cu`` file lives next to it, outside the package —
with :func:`register_env`, or from an installed package through the entry-point
group ``warp_drive.envs``. Nothing in the installed package is written.
"""

from __future__ import annotations

import importlib
from importlib.metadata import entry_points

from warp_drive.environment import Environment

BUILTIN_ENVS = {
    "TagContinuous": "warp_drive.example_envs.tag_continuous.tag_continuous:TagContinuous",
    "TagGridWorld": "warp_drive.example_envs.tag_gridworld.tag_gridworld:TagGridWorld",
    "DummyEnv": "warp_drive.example_envs.dummy_env.dummy_env:DummyEnv",
    "CartPole": "warp_drive.example_envs.classic_control.cartpole:CartPole",
    "Acrobot": "warp_drive.example_envs.classic_control.acrobot:Acrobot",
    "MountainCar": "warp_drive.example_envs.classic_control.mountain_car:MountainCar",
    "ContinuousMountainCar": "warp_drive.example_envs.classic_control.continuous_mountain_car:ContinuousMountainCar",
    "Pendulum": "warp_drive.example_envs.classic_control.pendulum:Pendulum",
    "SimpleSpread": "warp_drive.example_envs.simple_spread.simple_spread:SimpleSpread",
    "PandemicEconomy": "warp_drive.example_envs.pandemic_economy.pandemic_economy:PandemicEconomy",
}
ENTRY_POINT_GROUP = "warp_drive.envs"

_registered: dict[str, type[Environment]] = {}


def _load(target: str) -> type:
    module_name, _, attribute = target.partition(":")
    return getattr(importlib.import_module(module_name), attribute)


def register_env(name: str, env_class: type[Environment], overwrite: bool = False) -> type[Environment]:
    """Make ``env_class`` available to ``EnvWrapper`` and the CLI as ``name``."""
    if not (isinstance(env_class, type) and issubclass(env_class, Environment)):
        raise TypeError(f"register_env({name!r}, ...): expected a subclass of warp_drive.Environment, got {env_class!r}")
    if not overwrite and (name in _registered or name in BUILTIN_ENVS):
        raise ValueError(f"an environment named {name!r} is already registered; pass overwrite=True to replace it")
    env_class.cuda_source_path()  # fail now, not at the first build, if the .cu is missing
    _registered[name] = env_class
    return env_class


def registered_envs() -> list[str]:
    plugins = [ep.name for ep in entry_points(group=ENTRY_POINT_GROUP)]
    return sorted({*BUILTIN_ENVS, *_registered, *plugins})


def get_env_class(name: str) -> type[Environment]:
    if name in _registered:
        return _registered[name]
    if name in BUILTIN_ENVS:
        return _load(BUILTIN_ENVS[name])
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        if ep.name == name:
            return ep.load()
    raise KeyError(f"no environment named {name!r}; registered: {', '.join(registered_envs())}")
