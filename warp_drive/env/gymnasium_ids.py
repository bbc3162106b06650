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

Gymnasium 1.x loads no plugins (0.26's ``gymnasium.envs`` entry-point group is
gone: ``gymnasium/envs/__init__.py`` registers its own envs and nothing else), so
a package's ids exist once that package is imported, which is what
``gymnasium.register_envs(warp_drive)`` spells out. ``import warp_drive`` calls
:func:`register_gymnasium_envs`, which imports Gymnasium (a dependency; about a
quarter of a second over NumPy, which Gymnasium imports) whichever of the two was
imported first, and installs no import hook: a hook that waited for Gymnasium's
own import would save that time only for programs that never use Gymnasium, at
the price of an entry in ``sys.meta_path`` seen by every import of the process.
Registering records strings only (no torch import, no kernel build): the adapter
module is imported when an environment is made.
"""

from __future__ import annotations

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
