"""Gymnasium views of single-agent warp_drive environments.

:class:`GymnasiumVectorEnv` — ``gymnasium.vector.VectorEnv`` over ``num_envs``
replicas stepped by one kernel launch.

Autoreset mode: **SAME_STEP** (declared in ``metadata["autoreset_mode"]``).
It is what the device does anyway: right after the step launch, the reset
kernel restores the replicas whose ``_done_`` is set (reading the flags where
they lie). So the observation a ``step`` returns for a replica that just
terminated or truncated is already the first observation of its next episode,
while its reward, ``terminated`` and ``truncated`` belong to the transition that
ended the episode; the last observation of the ended episode is in
``infos["final_obs"]`` with the mask ``infos["_final_obs"]`` (and an empty
``infos["final_info"]`` / ``infos["_final_info"]``), exactly as
``gymnasium.vector.SyncVectorEnv(..., autoreset_mode=SAME_STEP)`` lays them
out: ``final_obs`` is an object array of ``num_envs`` entries, ``None`` where the
replica is still running. When no replica finished, ``infos`` is ``{}``. The
next ``step`` simply continues every replica — no step is spent on resets.

``reset(options={"reset_mask": mask})`` resets only the masked replicas (as in
gymnasium's own vector envs).

With ``device_tensors=True`` the arrays are torch tensors on the executor's
device (copies, since the device buffers are rewritten by the next launch),
actions may be given as device tensors, and no step makes a host round trip:
``infos`` then always holds ``final_obs`` as an ``(num_envs, ...)`` tensor of
the pre-reset observations of *every* replica, with the boolean tensor
``_final_obs`` marking the replicas that actually finished (rows where it is
False equal the returned observations). Discrete actions given as tensors are
range-checked too (one reduction and a host sync per step: an out-of-range
action would make the kernel index its tables out of bounds).

:class:`GymnasiumEnv` — ``gymnasium.Env`` over one replica (what
``gymnasium.utils.env_checker.check_env`` and single-env tools take). It does not
autoreset: after ``terminated`` or ``truncated``, call ``reset()``.

Rewards are float64 NumPy arrays as in gymnasium's own vector envs (a float32
kernel value widens exactly), float32 tensors with ``device_tensors=True``, and a
Python float from :class:`GymnasiumEnv`; ``terminated``/``truncated`` are bool;
observations have the observation space's dtype.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
import torch
from gymnasium.vector import AutoresetMode, VectorEnv
from gymnasium.vector.utils import batch_space

from warp_drive.adapters import (
    build_wrapper,
    check_discrete_action_tensor,
    check_discrete_actions,
    check_fits,
    supported_space,
    to_host,
)
from warp_drive.environment import TERMINATED, TRUNCATED


class _SingleAgentView:
    """What both Gymnasium adapters need: agent 0's spaces and flat views of its arrays."""

    def _attach(self, wrapper) -> None:
        self.wrapper = wrapper
        env = wrapper.env
        name = wrapper.name
        self._single_obs_space = env.observation_space(0)
        self._single_act_space = env.action_space(0)
        supported_space(self._single_obs_space, "observation", name)
        supported_space(self._single_act_space, "action", name)
        n = wrapper.num_envs
        self._obs_size = int(np.prod(tuple(wrapper.obs.shape)[2:], dtype=np.int64))
        self._act_size = int(np.prod(tuple(wrapper.actions.shape)[2:], dtype=np.int64))
        check_fits(self._single_obs_space, self._obs_size, "observation", name, 0)
        check_fits(self._single_act_space, self._act_size, "action", name, 0)
        self._obs_dtype = np.dtype(self._single_obs_space.dtype)
        self._obs_torch_dtype = torch.from_numpy(np.zeros(0, self._obs_dtype)).dtype
        self._batched_obs_shape = (n, *self._single_obs_space.shape)
        self._actions_host = np.zeros(tuple(wrapper.actions.shape),
                                      np.int32 if wrapper.actions.dtype == torch.int32 else np.float32)

    # device views (no copies)
    def _obs_view(self) -> torch.Tensor:
        return self.wrapper.obs.reshape(self._batched_obs_shape)

    def _host_obs(self) -> np.ndarray:
        return to_host(self.wrapper.obs).reshape(self._batched_obs_shape).astype(self._obs_dtype, copy=False)

    def _write_actions(self, actions: Any, batched: bool) -> None:
        n = self.wrapper.num_envs
        if isinstance(actions, torch.Tensor):
            if actions.numel() != n * self._act_size:
                raise ValueError(f"actions of shape {tuple(actions.shape)}; expected {n * self._act_size} values "
                                 f"({'batched ' if batched else ''}action space {self.action_space})")
            check_discrete_action_tensor(self._single_act_space, actions.detach().reshape(n, self._act_size),
                                         "step(): agent 0")
            self.wrapper.actions.copy_(actions.detach().reshape(self.wrapper.actions.shape))
            return
        values = np.asarray(actions)
        if values.size != n * self._act_size:
            raise ValueError(f"actions of shape {values.shape}; expected {n * self._act_size} values "
                             f"({'batched ' if batched else ''}action space {self.action_space})")
        check_discrete_actions(self._single_act_space, values.reshape(n, self._act_size), "step(): agent 0")
        self._actions_host.reshape(-1)[:] = values.reshape(-1)
        self.wrapper.actions.copy_(torch.from_numpy(self._actions_host))


class GymnasiumVectorEnv(_SingleAgentView, VectorEnv):
    """``VectorEnv`` over ``num_envs`` replicas (SAME_STEP autoreset); see the module docstring.

    ``env``: a single-agent environment instance, class or registered name (or
    an ``EnvWrapper`` with ``num_envs`` replicas); ``seed``: the wrapper's seed
    (random when None); ``reset(seed=s)`` reseeds every replica's start states
    from ``s`` (see :mod:`warp_drive.adapters`).
    """

    def __init__(self, env: Any, num_envs: int, backend: Any = "cpu", seed: int | None = None,
                 env_config: dict | None = None, device_tensors: bool = False, reset_pool_size: int = 1000):
        wrapper = build_wrapper(env, num_envs, backend, seed, env_config, reset_pool_size, single_agent=True,
                                adapter="GymnasiumVectorEnv")
        self._attach(wrapper)
        self.num_envs = wrapper.num_envs
        self.device_tensors = bool(device_tensors)
        self.single_observation_space = self._single_obs_space
        self.single_action_space = self._single_act_space
        self.observation_space = batch_space(self.single_observation_space, self.num_envs)
        self.action_space = batch_space(self.single_action_space, self.num_envs)
        self.metadata = {"autoreset_mode": AutoresetMode.SAME_STEP, "render_modes": []}
        self.render_mode = None
        self.closed = False

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        super().reset(seed=seed)
        mask = None if options is None else options.get("reset_mask")
        if mask is None:
            if seed is not None:
                self.wrapper.reseed(seed)
            else:
                self.wrapper.reset_all_envs()
        else:
            mask_host = np.asarray(mask.cpu() if isinstance(mask, torch.Tensor) else mask)
            if mask_host.shape != (self.num_envs,) or mask_host.dtype != np.bool_:
                raise ValueError(f"options['reset_mask'] must be a bool array of shape ({self.num_envs},); "
                                 f"got {mask_host.dtype} {mask_host.shape}")
            if seed is not None:
                self.wrapper.reseed(seed)  # every replica restarts from the seed: the mask is moot
            else:
                flags = torch.from_numpy(np.where(mask_host, TRUNCATED, 0).astype(np.int32))
                self.wrapper.done.copy_(flags)
                self.wrapper.reset_only_done_envs()
        obs = self._obs_view().to(self._obs_torch_dtype, copy=True) if self.device_tensors else self._host_obs()
        return obs, {}

    def step(self, actions):
        w = self.wrapper
        self._write_actions(actions, batched=True)
        w.step_all_envs()
        if self.device_tensors:
            return self._step_device()
        done = to_host(w.done)
        rewards = to_host(w.rewards).reshape(self.num_envs).astype(np.float64)
        terminations, truncations = done == TERMINATED, done == TRUNCATED
        final = self._host_obs() if done.any() else None
        # Launched every step, done or not, as the training loop does: the reset
        # kernel's Philox counter advances per call, so this keeps a seeded run
        # identical to EnvWrapper driven by a trainer and to device_tensors mode.
        w.reset_only_done_envs()
        obs = self._host_obs()
        if final is None:
            return obs, rewards, terminations, truncations, {}
        finished = done != 0
        final_obs = np.full(self.num_envs, None, dtype=object)
        for i in np.flatnonzero(finished):
            final_obs[i] = final[i]
        infos = {"final_obs": final_obs, "_final_obs": finished.copy(),
                 "final_info": {}, "_final_info": finished.copy()}
        return obs, rewards, terminations, truncations, infos

    def _step_device(self):
        w = self.wrapper
        done = w.done.clone()
        rewards = w.rewards.reshape(self.num_envs).clone()
        final = self._obs_view().to(self._obs_torch_dtype, copy=True)
        w.reset_only_done_envs()  # reads _done_ on the device: no host sync
        obs = self._obs_view().to(self._obs_torch_dtype, copy=True)
        finished = done != 0
        infos = {"final_obs": final, "_final_obs": finished}
        return obs, rewards, done == TERMINATED, done == TRUNCATED, infos

    def close_extras(self, **kwargs):
        pass


class GymnasiumEnv(_SingleAgentView, gym.Env):
    """``gymnasium.Env`` over one replica of a single-agent environment (no autoreset)."""

    metadata = {"render_modes": []}

    def __init__(self, env: Any, backend: Any = "cpu", seed: int | None = None, env_config: dict | None = None,
                 render_mode: str | None = None, reset_pool_size: int = 1000):
        if render_mode is not None:
            raise ValueError(f"render_mode {render_mode!r}: warp_drive environments do not render")
        wrapper = build_wrapper(env, 1, backend, seed, env_config, reset_pool_size, single_agent=True,
                                adapter="GymnasiumEnv")
        self._attach(wrapper)
        self.observation_space = self._single_obs_space
        self.action_space = self._single_act_space
        self.render_mode = None
        self._needs_reset = True

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        super().reset(seed=seed)
        if seed is not None:
            self.wrapper.reseed(seed)
        else:
            self.wrapper.reset_all_envs()
        self._needs_reset = False
        return self._host_obs()[0], {}

    def step(self, action):
        if self._needs_reset:
            raise RuntimeError("call reset() before step() (the episode has not started or is over)")
        w = self.wrapper
        self._write_actions(action, batched=False)
        w.step_all_envs()
        obs = self._host_obs()[0]
        reward = float(to_host(w.rewards).reshape(-1)[0])
        done = int(w.done[0])
        self._needs_reset = done != 0
        return obs, reward, done == TERMINATED, done == TRUNCATED, {}

    def render(self):
        return None
