"""Environment registry: names to environment classes.

Built-in example environments are imported lazily by name, from the package
``example_envs`` installed beside ``warp_drive``. A user's own class
(its ``.cu`` file lives next to it, outside the package) is reached in one of
three ways, none of which edits a package file:

* ``package.module:Class`` as the name (``env.name`` of a run config): imported
  from the current directory first, then ``sys.path``, as ``python -m`` would,
  so ``warp-drive train --config my.yaml`` run in the folder holding ``my_env/``
  finds ``my_env.my_env:MyEnv`` with no packaging;
* :func:`register_env` in the process;
* the entry-point group ``warp_drive.envs`` of an installed package (see
  :data:`HOW_TO_REGISTER` for the ``pyproject.toml`` stanza).

Nothing in the installed package is written.

:func:`module_extension` serves the example env modules' ``__getattr__``: names
that another installed package adds to a module through an entry point, which is
how WarpDrive 2.7's ``CUDATagGridWorld`` (defined in ``warp_drive.compat``) is
importable from ``example_envs.tag_gridworld.tag_gridworld`` while that module
never imports compat.
"""

from __future__ import annotations

import difflib
import importlib
import os
import reprlib
import sys
from importlib.metadata import entry_points

from warp_drive.env.environment import Environment

BUILTIN_ENVS = {
    "TagContinuous": "example_envs.tag_continuous.tag_continuous:TagContinuous",
    "TagGridWorld": "example_envs.tag_gridworld.tag_gridworld:TagGridWorld",
    "DummyEnv": "example_envs.dummy_env.dummy_env:DummyEnv",
    "CartPole": "example_envs.classic_control.cartpole:CartPole",
    "Acrobot": "example_envs.classic_control.acrobot:Acrobot",
    "MountainCar": "example_envs.classic_control.mountain_car:MountainCar",
    "ContinuousMountainCar": "example_envs.classic_control.continuous_mountain_car:ContinuousMountainCar",
    "Pendulum": "example_envs.classic_control.pendulum:Pendulum",
    "SimpleSpread": "example_envs.simple_spread.simple_spread:SimpleSpread",
    "PandemicEconomy": "example_envs.pandemic_economy.pandemic_economy:PandemicEconomy",
}
ENTRY_POINT_GROUP = "warp_drive.envs"

HOW_TO_REGISTER = (
    "name your class as package.module:Class in env.name (imported from the current directory or sys.path), "
    "call warp_drive.register_env(name, cls), or install it with an entry point: in pyproject.toml "
    '[project.entry-points."warp_drive.envs"] MyEnv = "my_pkg.my_env:MyEnv", with the .cu shipped as package '
    'data: [tool.setuptools.package-data] my_pkg = ["*.cu"]'
)

_registered: dict[str, type[Environment]] = {}


class EnvLookupError(KeyError):
    """A name that leads to no environment class: unknown, a module that does not import, a missing attribute,
    or something that is not an :class:`Environment`. A ``KeyError`` (what an unknown name always raised);
    ``str()`` is the message itself, one line naming the fix, not KeyError's quoted repr."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


def _load(target: str) -> type:
    module_name, _, attribute = target.partition(":")
    return getattr(importlib.import_module(module_name), attribute)


def _load_builtin(name: str) -> type[Environment]:
    """A built-in env's class; a one-line error when ``example_envs`` is not warp_drive's (a package of the
    user's own of that name first on ``sys.path`` shadows it, since both are top-level packages)."""
    target = BUILTIN_ENVS[name]
    try:
        return _load(target)
    except ModuleNotFoundError as exc:
        if not (exc.name or "").startswith("example_envs"):
            raise
        found = sys.modules.get("example_envs")
        where = getattr(found, "__file__", None) or "nowhere on sys.path"
        raise EnvLookupError(
            f"built-in env {name!r} is {target} in warp_drive's example_envs package, but the example_envs imported "
            f"is {where}: rename a package of your own named example_envs (it comes first on sys.path), or "
            f"reinstall warp_drive if its example_envs is missing") from None


def module_extension(module: str, name: str) -> object:
    """Attribute ``name`` that an installed package adds to ``module`` (for a module's ``__getattr__``).

    The package declares it as entry point ``name`` in the group named after the module, e.g.
    ``[project.entry-points."example_envs.tag_gridworld.tag_gridworld"]
    CUDATagGridWorld = "warp_drive.compat.example_envs:CUDATagGridWorld"``: the module lends its namespace to a
    name it must not import (compat sits above the env layer) and loads it only when asked for. Private and
    dunder names are never looked up (``hasattr(module, "__path__")`` and the like stay fast); a name nobody
    declares raises the ``AttributeError`` a module without ``__getattr__`` would.
    """
    if not name.startswith("_"):
        for entry_point in entry_points(group=module, name=name):
            return entry_point.load()
    raise AttributeError(f"module {module!r} has no attribute {name!r}")


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
    """The class of a registered name (built in, :func:`register_env`, an entry point) or of
    ``package.module:Class``; :class:`EnvLookupError` otherwise, saying how to register one."""
    if name in _registered:
        return _registered[name]
    if name in BUILTIN_ENVS:
        return _load_builtin(name)
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        if ep.name == name:
            return ep.load()
    if ":" in name:
        return import_env_class(name)
    names = registered_envs()
    close = difflib.get_close_matches(name, names, n=3)
    hint = f"did you mean {' or '.join(repr(c) for c in close)}? " if close else ""
    raise EnvLookupError(f"no environment named {name!r}; {hint}registered: {', '.join(names)}; to use your own, "
                         f"{HOW_TO_REGISTER}")


def import_env_class(spec: str) -> type[Environment]:
    """``package.module:Class`` imported as ``python -m`` would find it: the current directory comes first on
    ``sys.path`` (it is put there, once, when absent: the ``warp-drive`` script's own ``sys.path[0]`` is its
    bin folder, so a user's ``my_env/`` beside the run config would not import otherwise)."""
    module_name, _, attribute = spec.partition(":")
    if not module_name or not attribute or ":" in attribute:
        raise EnvLookupError(f"env {spec!r}: expected package.module:Class, e.g. my_env.my_env:MyEnv")
    cwd = os.getcwd()
    if not any(os.path.abspath(entry or os.curdir) == cwd for entry in sys.path):
        sys.path.insert(0, cwd)
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        missing = exc.name or module_name
        if module_name == missing or module_name.startswith(missing + "."):  # the module itself is not there
            parent, _, leaf = missing.rpartition(".")
            package = sys.modules.get(parent) if parent else None
            if package is not None:  # the package imports, the module inside it does not exist
                where = ", ".join(getattr(package, "__path__", [])) or parent
                raise EnvLookupError(f"env {spec!r}: cannot import module {module_name!r}: package {parent} "
                                     f"({where}) has no module {leaf!r}") from None
            raise EnvLookupError(
                f"env {spec!r}: cannot import module {module_name!r} (no module named {missing!r} in the current "
                f"directory {cwd} or on sys.path): run from the folder that holds {missing.split('.')[0]}/, or add "
                f"that folder to PYTHONPATH") from None
        raise EnvLookupError(f"env {spec!r}: importing {module_name} failed: {exc} (a module it imports; install "
                             f"it or add it to PYTHONPATH)") from None
    except ImportError as exc:
        raise EnvLookupError(f"env {spec!r}: importing {module_name} failed: {exc}") from None
    target: object = module
    for part in attribute.split("."):
        if not hasattr(target, part):
            found = sorted(n for n, v in vars(module).items()
                           if isinstance(v, type) and issubclass(v, Environment) and v is not Environment)
            where = getattr(module, "__file__", None) or module_name
            raise EnvLookupError(f"env {spec!r}: module {module_name} ({where}) has no attribute {attribute!r}"
                                 + (f"; its Environment classes: {', '.join(found)}" if found else
                                    "; it defines no Environment subclass"))
        target = getattr(target, part)
    if not (isinstance(target, type) and issubclass(target, Environment)):
        raise EnvLookupError(f"env {spec!r}: {attribute} is {reprlib.repr(target)}, not a subclass of "
                             f"warp_drive.Environment")
    return target
