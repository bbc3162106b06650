"""Consistency checker: an environment's kernel against its NumPy reference.

Every step, the reference starts from the kernel's current state (so the check
is of the step function itself and float rounding cannot accumulate into a
false alarm), both sides get the same freshly drawn random actions (valid for
each agent's action space, new every step), and every array — state,
observations, rewards, ``_done_``, ``_timestep_`` — is compared. The first
mismatch raises :class:`ConsistencyError` naming the configuration, step,
array, env, agent and both values. Resets, which are the framework's, are
checked too: after ``reset_only_done_envs`` the envs that were not done are
untouched, and the done ones hold their reset twin or one pool row (the same
row across paired pools), with ``_done_`` and ``_timestep_`` cleared. For an
env with a reset kernel the arrays it may write are left out of the twin and
pool checks (it draws its own starts over them); with a ``reference_reset``
every array after the reset is compared with the reference's reset of the state
the kernel started from (the same ``reset_seed`` and ``reset_count``), and
without one the untouched and cleared checks are all there is.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np
import torch
from gymnasium import spaces

from warp_drive.runtime.data_manager import AT_RESET_SUFFIX, DONE, FOR_LOG_SUFFIX, TIMESTEP
from warp_drive.env.wrapper import POOL_SUFFIX, EnvWrapper

DEFAULT_ATOL = 1e-5
DEFAULT_RTOL = 1e-5


class ConsistencyError(AssertionError):
    """The kernel and the reference disagree (the message says where)."""


class NoReferenceError(ValueError):
    """The env has no NumPy reference, so there is nothing to check its kernel against."""


@dataclass
class CheckReport:
    env: str
    config: dict
    steps: int = 0
    arrays: list[str] = field(default_factory=list)
    terminated: int = 0
    truncated: int = 0


def _legal_draw(legal: np.ndarray, sizes: list[int], rng: np.random.Generator) -> np.ndarray:
    """One action per row and head, uniform among the legal ones (``legal``: (rows, sum of sizes))."""
    heads, start = [], 0
    for n in sizes:
        scores = rng.random((legal.shape[0], n)) + 1.0  # > 0 where legal, 0 where masked
        heads.append(np.argmax(scores * legal[:, start:start + n], axis=1))
        start += n
    return np.stack(heads, axis=1)


def _draw(space: spaces.Space, rows: int, rng: np.random.Generator) -> np.ndarray:
    """``(rows, width)`` valid actions of ``space``."""
    if isinstance(space, spaces.Discrete):
        return rng.integers(space.start, space.start + space.n, size=(rows, 1))
    if isinstance(space, spaces.MultiDiscrete):
        return rng.integers(0, space.nvec, size=(rows, len(space.nvec)))
    if isinstance(space, spaces.Box):
        return rng.uniform(space.low, space.high, size=(rows, *space.shape)).reshape(rows, -1)
    raise TypeError(f"random actions for {type(space).__name__} spaces are not supported")


def random_actions(wrapper: EnvWrapper, rng: np.random.Generator) -> np.ndarray:
    """One valid action per (env, agent) of the shared ``sampled_actions``, drawn from each agent's own
    action space (among the legal ones when the env has an ``action_mask``: kernels may rely on it).
    Rows of agents whose group owns its action array stay 0 (:func:`random_action_arrays` fills those)."""
    shape = tuple(wrapper.actions.shape)
    dtype = wrapper.actions.dtype
    out = np.zeros(shape, np.int32 if dtype == torch.int32 else np.float32)
    flat = out.reshape(shape[0], shape[1], -1)
    mask = wrapper.action_mask
    legal = None if mask is None else mask.cpu().numpy() != 0
    for agent in wrapper.agents_on_shared("sampled_actions"):
        space = wrapper.env.action_space(agent)
        if legal is not None:  # the wrapper accepts a mask only over Discrete / MultiDiscrete spaces from 0
            sizes = [int(space.n)] if isinstance(space, spaces.Discrete) else [int(n) for n in space.nvec]
            draw = _legal_draw(legal[:, agent], sizes, rng)
        else:
            draw = _draw(space, shape[0], rng)
        if draw.shape[1] != flat.shape[2]:
            raise ValueError(
                f"{wrapper.name}: agent {agent}'s action space {space} does not fit sampled_actions of shape {shape}"
            )
        flat[:, agent, :] = draw
    return out


def random_action_arrays(wrapper: EnvWrapper, rng: np.random.Generator) -> dict[str, np.ndarray]:
    """Valid random actions for every action array the kernel reads: the shared ``sampled_actions`` (when
    some agents use it) and each group's own ``sampled_actions_<group>``."""
    dm = wrapper.data_manager
    out = {}
    if dm.is_data_on_device("sampled_actions"):
        out["sampled_actions"] = random_actions(wrapper, rng)
    for group in wrapper.group_arrays.values():
        if group.owned["sampled_actions"]:
            name = group.names["sampled_actions"]
            shape = dm.get_shape(name)
            space = wrapper.env.action_space(group.agents[0])
            if group.mask is not None:  # legal actions only (the group_arrays check made the space discrete)
                legal = wrapper.data_manager.pull_data_from_device(group.mask).reshape(shape[0] * shape[1], -1) != 0
                sizes = [int(space.n)] if isinstance(space, spaces.Discrete) else [int(n) for n in space.nvec]
                draw = _legal_draw(legal, sizes, rng)
            else:
                draw = _draw(space, shape[0] * shape[1], rng)
            out[name] = draw.reshape(shape).astype(np.int32 if dm.get_dtype(name) == "int32" else np.float32)
    return out


def _state_arrays(wrapper: EnvWrapper) -> list[str]:
    """The arrays a step reads and writes (not reset twins, pools or log buffers)."""
    skip = (AT_RESET_SUFFIX, FOR_LOG_SUFFIX, POOL_SUFFIX)
    return [name for name in wrapper.data_manager.array_names if not name.endswith(skip)]


def _compared_arrays(wrapper: EnvWrapper) -> list[str]:
    return [name for name in _state_arrays(wrapper) if name not in wrapper.env.consistency_skip]


def host_arrays(wrapper: EnvWrapper) -> dict[str, Any]:
    """Host copies of the env's arrays and scalars, named as the kernel and the reference name them."""
    dm = wrapper.data_manager
    arrays: dict[str, Any] = {name: dm.pull_data_from_device(name) for name in _state_arrays(wrapper)}
    arrays.update({name: dm.meta_info(name) for name in dm.scalar_data_list})
    return arrays


def _locate(index: tuple, shape: tuple, wrapper: EnvWrapper) -> str:
    parts = []
    if len(shape) >= 1 and shape[0] == wrapper.num_envs:
        parts.append(f"env {index[0]}")
        if len(shape) >= 2 and shape[1] == wrapper.num_agents:
            parts.append(f"agent {index[1]}")
            rest = index[2:]
        else:
            rest = index[1:]
    else:
        rest = index
    if rest:
        parts.append(f"index {tuple(int(i) for i in rest)}")
    return ", ".join(parts) or "scalar"


def compare(name: str, kernel: np.ndarray, reference: np.ndarray, atol: float, rtol: float, where: str,
            wrapper: EnvWrapper) -> None:
    reference = np.asarray(reference)
    if reference.shape != kernel.shape:
        raise ConsistencyError(f"{where}: array {name!r}: the reference has shape {reference.shape}, "
                               f"the kernel {kernel.shape}")
    if np.issubdtype(kernel.dtype, np.floating):
        ok = np.isclose(kernel, reference, atol=atol, rtol=rtol, equal_nan=True)
    else:
        ok = kernel == reference
    if not ok.all():
        index = tuple(np.argwhere(~ok)[0])
        raise ConsistencyError(
            f"{where}: array {name!r}, {_locate(index, kernel.shape, wrapper)}: kernel {kernel[index]!r} "
            f"vs reference {reference[index]!r} ({int((~ok).sum())} of {ok.size} values differ)"
        )


def _reset_and_check(wrapper: EnvWrapper, before: dict, done: np.ndarray, where: str, atol: float,
                     rtol: float) -> None:
    """``reset_only_done_envs`` as training calls it, then :func:`_check_reset`; for an env with a reset kernel
    and a ``reference_reset``, every array after it against the reference's reset of the state the kernel
    started from (read between the twins and pools and the kernel)."""
    resetter, env = wrapper.env_resetter, wrapper.env
    start: dict[str, Any] = {}
    count = resetter.counter  # what the reset kernel gets as reset_count
    resetter.reset_when_done(wrapper.data_manager, mode="if_done",
                             before_reset_kernel=lambda: start.update(host_arrays(wrapper)))
    after = host_arrays(wrapper)
    _check_reset(wrapper, before, after, done, where)
    if start and env.has_reference_reset():
        env.run_reference_reset(start, resetter.seed, count)
        start[DONE][done] = 0
        start[TIMESTEP][done] = 0
        for name in _compared_arrays(wrapper):
            compare(name, after[name], start[name], atol, rtol, f"{where} (reset kernel vs reference_reset)", wrapper)


def _check_reset(wrapper: EnvWrapper, before: dict, after: dict, done: np.ndarray, where: str) -> None:
    dm = wrapper.data_manager
    written = set(wrapper.reset_kernel_writes)  # the reset kernel's own starts replace twins' and pools'
    pools = {target: pool for target, pool in dm.reset_target_to_pool.items() if target not in written}
    for name in _compared_arrays(wrapper):
        if before[name].shape[:1] != (wrapper.num_envs,):
            continue
        if not np.array_equal(before[name][~done], after[name][~done]):
            raise ConsistencyError(f"{where}: reset changed {name!r} in envs that were not done")
    for name in (DONE, TIMESTEP):
        if (after[name][done] != 0).any():
            raise ConsistencyError(f"{where}: {name} not cleared for the reset envs")
    for name in dm.reset_data_list:
        if name in dm.reset_target_to_pool or name in written:
            continue
        twin = dm.pull_data_from_device(name + AT_RESET_SUFFIX)
        if not np.array_equal(after[name][done], twin[done]):
            raise ConsistencyError(f"{where}: reset envs of {name!r} do not hold their start state")
    by_size: dict[int, list[str]] = {}
    for target, pool_name in pools.items():
        by_size.setdefault(dm.get_shape(pool_name)[0], []).append(target)
    for size, targets in by_size.items():
        for env in np.flatnonzero(done):
            rows = None
            for target in targets:
                pool = dm.pull_data_from_device(pools[target]).reshape(size, -1)
                match = set(np.flatnonzero((pool == after[target][env].reshape(1, -1)).all(axis=1)))
                rows = match if rows is None else rows & match
            if not rows:
                raise ConsistencyError(
                    f"{where}: env {env} after reset does not hold one common row of the pools of {targets}"
                )


def check(
    env_class,
    configs: dict | Sequence[dict] = ({},),
    num_envs: int = 3,
    num_episodes: int = 2,
    backend: str = "cpu",
    seed: int = 0,
    atol: float | None = None,
    rtol: float | None = None,
    reset_pool_size: int = 100,
    steps: int | None = None,
) -> list[CheckReport]:
    """Step kernel and reference side by side for ``num_episodes * episode_length`` steps per config, or
    ``steps`` when given (``warp-drive check`` bounds long episodes so); episodes that terminate early are
    reset and continue, so the step count is fixed."""
    configs = [configs] if isinstance(configs, dict) else list(configs)
    reports = []
    for config in configs:
        wrapper = EnvWrapper(env_class, num_envs, backend=backend, seed=seed, env_config=config,
                             reset_pool_size=reset_pool_size)
        env = wrapper.env
        if not env.has_reference():
            raise NoReferenceError(f"{env.name}: no reference_step, so the consistency checker has nothing to compare "
                                   f"its kernel with (a NumPy reference is optional: it is the oracle when porting an "
                                   f"env; `warp-drive check {env.name}` runs every other check)")
        own_atol, own_rtol = env.consistency_atol, env.consistency_rtol  # None: the checker's defaults
        atol_ = atol if atol is not None else (DEFAULT_ATOL if own_atol is None else own_atol)
        rtol_ = rtol if rtol is not None else (DEFAULT_RTOL if own_rtol is None else own_rtol)
        rng = np.random.default_rng(seed)
        report = CheckReport(env.name, dict(config), arrays=_compared_arrays(wrapper))
        for step in range(num_episodes * wrapper.episode_length if steps is None else int(steps)):
            where = f"{env.name} {config}, step {step}"
            for name, actions in random_action_arrays(wrapper, rng).items():
                wrapper.data_manager.data_on_device_via_torch(name).copy_(torch.from_numpy(actions))
            reference = host_arrays(wrapper)
            env.run_reference_step(reference)  # with the framework's clock around it where the env has it
            wrapper.step_all_envs()
            kernel = host_arrays(wrapper)
            for name in report.arrays:
                compare(name, kernel[name], reference[name], atol_, rtol_, where, wrapper)
            done = kernel[DONE] != 0
            report.terminated += int((kernel[DONE] == 1).sum())
            report.truncated += int((kernel[DONE] == 2).sum())
            if done.any():
                _reset_and_check(wrapper, kernel, done, where + " (reset)", atol_, rtol_)
            report.steps += 1
        reports.append(report)
    return reports
