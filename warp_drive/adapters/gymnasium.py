"""Gymnasium views of single-agent warp_drive environments.

:class:`GymnasiumVectorEnv` — ``gymnasium.vector.VectorEnv`` over ``num_envs``
replicas stepped by one kernel launch, with the three autoreset modes of
Gymnasium's own vector envs (``autoreset_mode=``, an ``AutoresetMode`` or its
string value; declared in ``metadata["autoreset_mode"]``), laid out exactly as
``gymnasium.vector.SyncVectorEnv(..., autoreset_mode=...)`` lays them out:

* **NEXT_STEP** (the default, as Gymnasium's): a step that ends a replica's
  episode returns its last observation, reward and ``terminated``/``truncated``;
  the replica's ``_done_`` flag stays set on the device. The *next* step
  restarts that replica instead of stepping it: its action is ignored and it
  returns the first observation of the new episode with reward 0 and both flags
  False. ``infos`` is ``{}``. (On the device: the flagged replicas are reset
  before the launch, so the kernel never steps past an episode's end, and reset
  again after it, which discards the step their ignored action took; the masks
  never leave the device.) Two reset launches per step mean a seeded NEXT_STEP
  run draws other start states than a SAME_STEP run of the same seed, equally
  reproducible.
* **SAME_STEP**: what the device does when it trains. Right after the launch,
  the reset kernel restores the replicas that just ended, so the observation a
  step returns for them is already the first of their next episode, while
  reward and flags belong to the transition that ended the episode; the last
  observation of the ended episode is in ``infos["final_obs"]`` (an object
  array of ``num_envs`` entries, ``None`` where the replica is still running)
  with the mask ``infos["_final_obs"]``, and an empty ``infos["final_info"]`` /
  ``infos["_final_info"]``. When no replica finished, ``infos`` is ``{}``.
* **DISABLED**: no reset happens in ``step``. An ended replica must be reset
  with ``reset(options={"reset_mask": mask})`` (or ``reset()``) before the next
  step, which otherwise raises RuntimeError naming the replicas (Gymnasium
  asserts the same); checking costs one host read of the flags per step.

``reset(options={"reset_mask": mask})`` resets only the masked replicas, in
every mode; the others keep their state and any pending autoreset. With a
seed as well, the masked replicas restart from start states drawn from that
seed and the others keep their state; as the replicas share one seed, their
later restarts draw from it too (Gymnasium's sub-envs keep a generator each).

With ``device_tensors=True`` the arrays are torch tensors on the executor's
device (copies, since the device buffers are rewritten by the next launch) and
actions may be given as device tensors; ``reset_mask`` may be a bool tensor.
No NEXT_STEP or SAME_STEP step makes a host round trip of its own (DISABLED
reads the flags, as said). SAME_STEP's ``infos`` then always holds
``final_obs`` as an ``(num_envs, ...)`` tensor of the pre-reset observations of
*every* replica, with the boolean tensor ``_final_obs`` marking the replicas
that actually finished (rows where it is False equal the returned
observations); NEXT_STEP and DISABLED return ``infos == {}`` as in NumPy mode.
Discrete actions given as tensors are range-checked too (one reduction and a
host sync per step: an out-of-range action would make the kernel index its
tables out of bounds).

:class:`GymnasiumEnv` — ``gymnasium.Env`` over one replica (what
``gymnasium.utils.env_checker.check_env`` and single-env tools take). It does not
autoreset: after ``terminated`` or ``truncated``, call ``reset()``.

Registered ids: ``import warp_drive`` registers the single-agent example envs
with Gymnasium as ``warp_drive/<Gymnasium's id>`` (see
:mod:`warp_drive.env.gymnasium_ids`): ``gymnasium.make`` builds a
:class:`GymnasiumEnv`, ``gymnasium.make_vec`` a :class:`GymnasiumVectorEnv`.

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
from warp_drive.env.environment import TERMINATED, TRUNCATED


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


def autoreset_mode_of(value: Any) -> AutoresetMode:
    """``value`` (an ``AutoresetMode``, its string value or its name) as an ``AutoresetMode``."""
    if isinstance(value, AutoresetMode):
        return value
    try:
        return AutoresetMode(value)
    except ValueError:
        if isinstance(value, str) and value.upper() in AutoresetMode.__members__:
            return AutoresetMode[value.upper()]  # the member's name, "next_step" or "NEXT_STEP"
        choices = ", ".join(repr(m.value) for m in AutoresetMode)
        raise ValueError(f"autoreset_mode={value!r}; choose one of {choices} "
                         "(or a gymnasium.vector.AutoresetMode)") from None


class GymnasiumVectorEnv(_SingleAgentView, VectorEnv):
    """``VectorEnv`` over ``num_envs`` replicas; see the module docstring.

    ``env``: a single-agent environment instance, class or registered name (or
    an ``EnvWrapper`` with ``num_envs`` replicas); ``seed``: the wrapper's seed
    (random when None); ``reset(seed=s)`` reseeds every replica's start states
    from ``s`` (see :mod:`warp_drive.adapters`); ``autoreset_mode``: NEXT_STEP
    (default, as Gymnasium's), SAME_STEP or DISABLED, as the enum or its string.
    """

    def __init__(self, env: Any, num_envs: int, backend: Any = "cpu", seed: int | None = None,
                 env_config: dict | None = None, device_tensors: bool = False, reset_pool_size: int = 1000,
                 autoreset_mode: AutoresetMode | str = AutoresetMode.NEXT_STEP):
        mode = autoreset_mode_of(autoreset_mode)  # a bad mode fails before any build
        wrapper = build_wrapper(env, num_envs, backend, seed, env_config, reset_pool_size, single_agent=True,
                                adapter="GymnasiumVectorEnv")
        self._attach(wrapper)
        self.num_envs = wrapper.num_envs
        self.device_tensors = bool(device_tensors)
        self.autoreset_mode = mode
        self.single_observation_space = self._single_obs_space
        self.single_action_space = self._single_act_space
        self.observation_space = batch_space(self.single_observation_space, self.num_envs)
        self.action_space = batch_space(self.single_action_space, self.num_envs)
        self.metadata = {"autoreset_mode": mode, "render_modes": []}
        self.render_mode = None
        self.closed = False

    # ------------------------------------------------------------------ reset
    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        super().reset(seed=seed)
        w = self.wrapper
        mask = None if options is None else options.get("reset_mask")
        if seed is not None:  # one seed for every replica's start-state randomness
            w.reseed(seed, reset=mask is None)
        if mask is None:
            if seed is None:
                w.reset_all_envs()
        else:
            mask = self._device_mask(mask)
            ended = w.done.clone()  # replicas outside the mask keep a pending autoreset
            w.done.copy_(mask.to(torch.int32) * TRUNCATED)
            w.reset_only_done_envs()
            w.done.copy_(torch.where(mask, torch.zeros_like(ended), ended))
        obs = self._obs_view().to(self._obs_torch_dtype, copy=True) if self.device_tensors else self._host_obs()
        return obs, {}

    def _device_mask(self, mask: Any) -> torch.Tensor:
        """``options["reset_mask"]`` as a bool tensor where ``_done_`` lies (no host sync for a tensor)."""
        if isinstance(mask, torch.Tensor):
            shape, dtype, ok = tuple(mask.shape), mask.dtype, mask.dtype == torch.bool
        else:
            mask = np.asarray(mask)
            shape, dtype, ok = mask.shape, mask.dtype, mask.dtype == np.bool_
            mask = torch.from_numpy(mask)
        if shape != (self.num_envs,) or not ok:
            raise ValueError(f"options['reset_mask'] must be a bool array of shape ({self.num_envs},); "
                             f"got {dtype} {shape}")
        return mask.to(self.wrapper.done.device)

    # ------------------------------------------------------------------ step
    def step(self, actions):
        w = self.wrapper
        self._write_actions(actions, batched=True)
        if self.autoreset_mode is AutoresetMode.SAME_STEP:
            return self._step_same_step()
        if self.autoreset_mode is AutoresetMode.DISABLED:
            ended = to_host(w.done) != 0  # one host sync: stepping an ended episode is refused
            if ended.any():
                raise RuntimeError(
                    f"GymnasiumVectorEnv(autoreset_mode=DISABLED): env(s) {np.flatnonzero(ended).tolist()} ended "
                    "and were not reset; call reset(options={'reset_mask': mask}) with those envs in the mask "
                    "(or reset()) before the next step")
            w.step_all_envs()
            return self._outputs(w.rewards.reshape(self.num_envs))
        return self._step_next_step()

    def _step_next_step(self):
        """NEXT_STEP: the replicas that ended last step (their ``_done_`` is still set)
        restart instead of stepping; all masks stay on the device."""
        w = self.wrapper
        restart = w.done != 0
        # Restart them *before* the launch, so the kernel only ever steps a live
        # episode (never past its end, where timestep-indexed arrays would overflow) ...
        w.reset_only_done_envs()
        w.step_all_envs()
        # ... and reset them again after it: that discards the step their action
        # took, leaving the start state that this step returns (reward 0, not done).
        done = w.done.clone()
        w.done.copy_(restart.to(torch.int32) * TRUNCATED)
        w.reset_only_done_envs()
        w.done.copy_(torch.where(restart, torch.zeros_like(done), done))
        rewards = w.rewards.reshape(self.num_envs)
        return self._outputs(torch.where(restart, torch.zeros_like(rewards), rewards))

    def _outputs(self, rewards: torch.Tensor):
        """NEXT_STEP / DISABLED: the step's arrays as they lie (``_done_`` kept for the next step); infos ``{}``."""
        done = self.wrapper.done
        if self.device_tensors:
            obs = self._obs_view().to(self._obs_torch_dtype, copy=True)
            return obs, rewards.clone(), done == TERMINATED, done == TRUNCATED, {}
        flags = to_host(done)
        rewards = to_host(rewards).astype(np.float64)
        return self._host_obs(), rewards, flags == TERMINATED, flags == TRUNCATED, {}

    def _step_same_step(self):
        w = self.wrapper
        w.step_all_envs()
        if self.device_tensors:
            return self._step_same_step_device()
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

    def _step_same_step_device(self):
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


def make_vector_env(num_envs: int, env: Any, max_episode_steps: int | None = None, env_config: dict | None = None,
                    **kwargs: Any) -> GymnasiumVectorEnv:
    """``gymnasium.make_vec``'s ``vector_entry_point`` for the ``warp_drive/<id>`` ids.

    ``max_episode_steps`` (which ``make_vec`` passes to vector entry points)
    becomes the environment's own ``episode_length``: its kernel truncates.
    """
    if max_episode_steps is not None:
        env_config = {**(env_config or {}), "episode_length": int(max_episode_steps)}
    return GymnasiumVectorEnv(env, num_envs, env_config=env_config, **kwargs)
