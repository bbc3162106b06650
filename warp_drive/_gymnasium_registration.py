"""The single-agent example environments as Gymnasium ids ``warp_drive/<Gymnasium's id>``.

``gymnasium.make("warp_drive/CartPole-v1")`` builds a
:class:`~warp_drive.adapters.gymnasium.GymnasiumEnv` (one replica) and
``gymnasium.make_vec("warp_drive/CartPole-v1", num_envs=8)`` a
:class:`~warp_drive.adapters.gymnasium.GymnasiumVectorEnv` (all replicas in one
kernel launch, through the spec's ``vector_entry_point``). The ids carry
Gymnasium's version suffixes for the same environments. Keyword arguments go
to the adapter: ``backend=`` ("auto" unless given), ``seed=``, ``env_config=``
(e.g. ``{"episode_length": 200}``), and for ``make_vec`` also
``autoreset_mode=`` and ``device_tensors=``.

Gymnasium 1.x loads no plugins, so the ids must be registered before
``gymnasium.make`` looks them up, and ``import warp_drive`` does it
(:func:`install`). Importing Gymnasium costs about a quarter of a second, and
``import warp_drive`` stays cheap by not paying it: when Gymnasium is already
imported the ids are registered at once, otherwise a one-shot import hook
registers them right after Gymnasium's own import. Registering only records
strings (no torch import, no kernel build): the adapter module is imported when
an environment is made.
"""

from __future__ import annotations

import importlib.abc
import importlib.util
import sys

NAMESPACE = "warp_drive"
# Gymnasium's id -> the name in warp_drive's environment registry.
GYMNASIUM_IDS = {
    "CartPole-v1": "CartPole",
    "Acrobot-v1": "Acrobot",
    "MountainCar-v0": "MountainCar",
    "MountainCarContinuous-v0": "ContinuousMountainCar",
    "Pendulum-v1": "Pendulum",
}
_ADAPTERS = "warp_drive.adapters.gymnasium"


def register_gymnasium_envs() -> None:
    """Register every ``warp_drive/<id>`` with Gymnasium (ids already registered are left alone)."""
    import gymnasium

    for gym_id, name in GYMNASIUM_IDS.items():
        env_id = f"{NAMESPACE}/{gym_id}"
        if env_id in gymnasium.registry:
            continue
        gymnasium.register(
            env_id,
            entry_point=f"{_ADAPTERS}:GymnasiumEnv",
            vector_entry_point=f"{_ADAPTERS}:make_vector_env",
            kwargs={"env": name, "backend": "auto"},
        )


class _RegisterAfterLoad(importlib.abc.Loader):
    """Gymnasium's own loader, then :func:`register_gymnasium_envs`."""

    def __init__(self, loader):
        self.loader = loader

    def create_module(self, spec):
        return self.loader.create_module(spec)

    def exec_module(self, module):
        # The module describes its real loader (importlib.resources and reloads use it).
        module.__loader__ = module.__spec__.loader = self.loader
        self.loader.exec_module(module)
        register_gymnasium_envs()


class _GymnasiumImportHook(importlib.abc.MetaPathFinder):
    """Finds Gymnasium with the other finders and wraps its loader, once."""

    def find_spec(self, name, path=None, target=None):
        if name != "gymnasium":
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec(name)
        if spec is not None and spec.loader is not None:
            spec.loader = _RegisterAfterLoad(spec.loader)
        return spec


def install() -> None:
    """Register now if Gymnasium is imported, else when it is (called by ``warp_drive/__init__.py``)."""
    if "gymnasium" in sys.modules:
        register_gymnasium_envs()
    elif not any(isinstance(finder, _GymnasiumImportHook) for finder in sys.meta_path):
        sys.meta_path.insert(0, _GymnasiumImportHook())
