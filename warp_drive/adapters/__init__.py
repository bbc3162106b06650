"""Adapters: warp_drive environments behind the ecosystem's standard APIs.

* :class:`PettingZooParallelEnv` — PettingZoo's ``ParallelEnv`` over one
  replica of a (multi-agent) environment;
* :class:`GymnasiumVectorEnv` — a ``gymnasium.vector.VectorEnv`` over many
  replicas of a single-agent environment, stepped by one kernel launch, in
  any of Gymnasium's autoreset modes (``NEXT_STEP`` by default, ``SAME_STEP``,
  ``DISABLED``);
* :class:`GymnasiumEnv` — a ``gymnasium.Env`` over one replica of a
  single-agent environment (so ``gymnasium.utils.env_checker.check_env`` and
  single-env tooling apply).

The adapters are conveniences for interoperability and testing: every call
crosses the host/device boundary (actions in, observations out), which is what
these APIs ask for. Training at full speed keeps everything on the device with
``EnvWrapper`` and the trainer (``GymnasiumVectorEnv(device_tensors=True)`` is
the middle ground: torch tensors, no host copies).

The classes are imported lazily so ``import warp_drive.adapters`` needs neither
PettingZoo nor Gymnasium. The helpers below are shared by the adapter modules.

Seeding: ``reset(seed=s)`` makes the replicas' start states a function of ``s``
alone — the reset pools are redrawn with ``numpy.random.default_rng(s)`` and the
reset kernel's Philox stream restarts from seed ``s`` — so the state after it is
exactly that of a fresh ``EnvWrapper(env, num_envs, seed=s)``, whatever seed
the adapter was built with. ``reset()`` without a seed draws the next start
state of the current stream (still reproducible after a seeded reset).
"""

from __future__ import annotations

import importlib
import warnings
from typing import Any

import numpy as np
import torch

from warp_drive.env.wrapper import EnvWrapper, make_env

_EXPORTS = {
    "PettingZooParallelEnv": "warp_drive.adapters.pettingzoo",
    "GymnasiumVectorEnv": "warp_drive.adapters.gymnasium",
    "GymnasiumEnv": "warp_drive.adapters.gymnasium",
}
__all__ = list(_EXPORTS)


def __getattr__(name: str):
    if name in _EXPORTS:
        return getattr(importlib.import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module 'warp_drive.adapters' has no attribute {name!r}")


# ---------------------------------------------------------------------- shared helpers
def build_wrapper(env: Any, num_envs: int, backend: Any, seed: int | None, env_config: dict | None,
                  reset_pool_size: int = 1000, single_agent: bool = False, adapter: str = "adapter"):
    """An ``EnvWrapper`` over ``num_envs`` replicas of ``env``.

    ``env`` is an environment instance, class or registered name, or an
    existing ``EnvWrapper`` (which must have ``num_envs`` replicas). With
    ``single_agent`` the environment must have exactly one agent; this is
    checked on the instance, before any kernel is built.
    """
    if isinstance(env, EnvWrapper):
        if env_config:
            raise ValueError(f"{adapter}: env_config does not apply to an existing EnvWrapper")
        if env.num_envs != int(num_envs):
            raise ValueError(f"{adapter}: the EnvWrapper has {env.num_envs} replicas; expected {num_envs}")
        wrapper = env
        instance = env.env
    else:
        instance = make_env(env, env_config)
    if single_agent and int(instance.num_agents) != 1:
        raise ValueError(
            f"{adapter} needs a single-agent environment (num_agents == 1); {instance.name or type(instance).__name__} "
            f"has {instance.num_agents} agents. Use warp_drive.adapters.PettingZooParallelEnv for multi-agent "
            "environments."
        )
    if not isinstance(env, EnvWrapper):
        wrapper = EnvWrapper(instance, int(num_envs), backend=backend, seed=seed, reset_pool_size=reset_pool_size)
    owners = [g.group for g in wrapper.group_arrays.values() if any(g.owned.values())]
    if owners and single_agent:
        raise ValueError(f"{adapter}: group(s) {owners} of {wrapper.name} own their arrays (observations_<group>, ...); "
                         f"the single-agent adapters read the shared observations, sampled_actions and rewards only")
    _check_observations_reset(wrapper, adapter)
    return wrapper


def _check_observations_reset(wrapper, adapter: str) -> None:
    """After a reset the adapters return the observations as they lie on the device (the shared
    ``observations`` and groups' own ``observations_<group>``), which is right only if the reset restores
    them (a twin or a pool): the kernel never writes observations at a reset."""
    dm = wrapper.data_manager
    arrays = [name for name in ("observations", *(g.names["observations"] for g in wrapper.group_arrays.values()))
              if dm.is_data_on_device(name)]
    for name in dict.fromkeys(arrays):
        if name not in dm.reset_data_list and name not in dm.reset_target_to_pool:
            warnings.warn(
                f"{adapter}: {wrapper.name}'s {name!r} are neither saved for reset "
                "(save_copy_and_apply_at_reset=True) nor drawn from a reset pool, so the observations "
                "returned after a reset are those of the previous episode's last step",
                stacklevel=3,
            )


def to_host(tensor: torch.Tensor) -> np.ndarray:
    """A NumPy copy the caller owns (on the cpu executor ``.cpu()`` is the device
    buffer itself, which the next launch overwrites)."""
    return tensor.detach().to("cpu", copy=True).numpy()


def supported_space(space, what: str, env_name: str) -> None:
    """Spaces the adapters move through flat numeric device arrays."""
    from gymnasium import spaces

    if not isinstance(space, (spaces.Box, spaces.Discrete, spaces.MultiDiscrete, spaces.MultiBinary)):
        raise TypeError(
            f"{env_name}: {what} space {space} is not supported by the adapters "
            "(Box, Discrete, MultiDiscrete and MultiBinary spaces are)"
        )


def check_fits(space, per_agent_size: int, what: str, env_name: str, agent: Any) -> None:
    """A space must hold exactly one agent's slice of its device array."""
    size = int(np.prod(space.shape, dtype=np.int64)) if space.shape else 1
    if size != per_agent_size:
        raise ValueError(
            f"{env_name}: agent {agent}'s {what} space {space} has {size} values, but the device array holds "
            f"{per_agent_size} per agent"
        )


def _discrete_bounds(space):
    """``(low, high)`` of a discrete space's values (arrays for MultiDiscrete), or None."""
    from gymnasium import spaces

    if isinstance(space, spaces.Discrete):
        return int(space.start), int(space.start + space.n - 1)
    if isinstance(space, spaces.MultiDiscrete):
        return np.asarray(space.start).reshape(-1), np.asarray(space.start + space.nvec - 1).reshape(-1)
    if isinstance(space, spaces.MultiBinary):
        return 0, 1
    return None


def _range_text(low, high) -> str:
    if np.ndim(low) == 0:
        return f"{int(low)}..{int(high)}"
    return "[" + ", ".join(f"{int(a)}..{int(b)}" for a, b in zip(np.ravel(low), np.ravel(high))) + "]"


def check_discrete_actions(space, values: np.ndarray, who: str) -> None:
    """Out-of-range discrete actions would index kernel tables out of bounds: refuse them here.

    ``values`` is one agent's action, or ``(rows, size)`` actions of one agent
    in several replicas (the error then names the replica).
    """
    bounds = _discrete_bounds(space)
    if bounds is None or not values.size:
        return
    if values.dtype == bool or not np.issubdtype(values.dtype, np.number) or (
            np.issubdtype(values.dtype, np.floating) and not np.all(np.isfinite(values) & (values == np.trunc(values)))):
        # The copy into the int32 device array would truncate 1.7 to 1 and turn NaN into -2147483648.
        raise ValueError(f"{who}: discrete actions must be integers; got {values.tolist()} ({values.dtype}) for the "
                         f"action space {space}")
    low, high = bounds
    if not (np.any(values < low) or np.any(values > high)):
        return
    if values.ndim == 2 and values.shape[0] > 1:
        row = int(np.flatnonzero(np.any((values < low) | (values > high), axis=1))[0])
        who, values = f"{who}, env {row}", values[row]
    raise ValueError(f"{who}: action {values.tolist()} is outside the action space {space} "
                     f"(valid values: {_range_text(low, high)})")


def check_discrete_action_tensor(space, values, who: str) -> None:
    """:func:`check_discrete_actions` for a torch tensor of ``(rows, size)`` actions,
    reduced where it lies (one host sync: the adapters' step is a host round trip anyway)."""
    bounds = _discrete_bounds(space)
    if bounds is None or not values.numel():
        return
    if values.is_floating_point():
        if not bool(torch.all(values == torch.trunc(values))):
            raise ValueError(f"{who}: discrete actions must be integers; got {values.detach().cpu().tolist()} "
                             f"for the action space {space}")
    low, high = (torch.as_tensor(b, device=values.device) for b in bounds)
    if bool(torch.any((values < low) | (values > high))):
        check_discrete_actions(space, values.detach().cpu().numpy(), who)
