"""WarpDrive: end-to-end multi-agent reinforcement learning on a GPU.

Environment steps are CUDA C kernels (one block per environment, its agents
spread over the block's threads). They run on a GPU through PyCUDA, or on any machine through the ``cpu``
executor, which builds the same ``.cu`` sources with the host C++ compiler.

Submodules are imported lazily: ``import warp_drive`` stays free of torch and
PyCUDA. It registers the single-agent example envs with Gymnasium
(``gymnasium.make("warp_drive/CartPole-v1")``; see
``warp_drive.env.gymnasium_ids``) and installs no import hook. The example
environments are the package ``example_envs``, beside this one.
"""

from warp_drive.runtime import launch_clock  # noqa: F401  (its clock starts now, for platforms without /proc)
from warp_drive.env import gymnasium_ids

gymnasium_ids.register_gymnasium_envs()  # warp_drive/<id> for gymnasium.make / make_vec

__version__ = "0.1.0"

_EXPORTS = {
    "DataFeed": "warp_drive.runtime.data_feed",
    "DataManager": "warp_drive.runtime.data_manager",
    "FunctionManager": "warp_drive.runtime.function_manager",
    "FunctionFeed": "warp_drive.runtime.function_manager",
    "Sampler": "warp_drive.services.sampler",
    "EnvironmentReset": "warp_drive.services.reset",
    "LogController": "warp_drive.services.log",
    "Environment": "warp_drive.env.environment",
    "AGENT_PHASES": "warp_drive.env.environment",
    "Parameter": "warp_drive.env.environment",
    "EnvWrapper": "warp_drive.env.wrapper",
    "register_env": "warp_drive.env.registry",
    "registered_envs": "warp_drive.env.registry",
    "get_backend": "warp_drive.runtime.backends",
}
__all__ = ["__version__", *_EXPORTS]


def __getattr__(name: str):
    if name in _EXPORTS:
        import importlib

        return getattr(importlib.import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module 'warp_drive' has no attribute {name!r}")


def __dir__():
    # Without this, dir() and tab completion would not show the lazy exports.
    return sorted({*globals(), *__all__})
