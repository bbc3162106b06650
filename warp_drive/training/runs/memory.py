"""How much memory a training config will allocate, estimated before anything is, and refused when the
machine does not have it; and the two measures every memory figure needs (:func:`format_bytes`,
:func:`host_memory_available`), which the auto-scaler (``training/autoscale/``) uses too.

``run.build`` calls :func:`check_config` before it builds the env wrapper and the trainer: a config that
needs more than the memory available (the host's on the cpu executor, the GPU's on a GPU) stops at once
with :class:`MemoryEstimateError` naming the figure, the biggest item and the config key that changes it,
instead of allocating for minutes and being ended by the kernel's OOM killer without a message (an
uncapped run was, at 22 GB).

What is counted (:func:`estimate`, a pure function of the sizes):

* the env's arrays: what ``get_data_dictionary`` declares, measured on a copy of the env at 1 and 2 envs
  and scaled to ``trainer.num_envs``; on the device once (twice with a reset twin), and on the host the
  feed and the reset snapshot beside it;
* the rollout buffers: ``trainer.rollout_length x num_envs x agents`` rows of observations (and the final
  ones before a reset), actions, rewards, log-probabilities, values, advantages and returns, and a
  centralised critic's inputs;
* DDPG's replay buffers, ``replay_buffer_size`` transitions each;
* with the episode GIF (``warp-drive train`` without ``--no-evaluate``, ``evaluate --render``): the
  recorded episode, up to ``episode_length + 1`` rows of the env's ``render_arrays``, kept as a list of
  rows and stacked (worst case: an episode that runs to its limit).

Not counted: the models and optimizers, reset pools (``reset_pool_size`` rows), the executor and torch
themselves, and the env's ``_for_log`` buffers, which are allocated only when something logs
(``LogController``); the figure is a floor, which is why it is compared with all of what is available.
"""

from __future__ import annotations

import copy
import os
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np
import psutil
from gymnasium import spaces

from warp_drive.training.config import ConfigError

ROW_OVERHEAD = 120  # bytes of a NumPy array object (a recorded row) and its list slot


def format_bytes(n: float | None) -> str:
    """``n`` bytes as ``"1.5 GiB"`` (binary units); ``"-"`` for None (not measured)."""
    if n is None:
        return "-"
    for unit, size in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= size:
            return f"{n / size:,.1f} {unit}"
    return f"{int(n)} B"


def host_memory_available() -> int:
    """Bytes this process could still use: psutil's ``available``, capped by a cgroup memory limit (containers)."""
    available = psutil.virtual_memory().available
    for limit_file, usage_file in (("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory.current"),
                                   ("/sys/fs/cgroup/memory/memory.limit_in_bytes",
                                    "/sys/fs/cgroup/memory/memory.usage_in_bytes")):
        try:
            with open(limit_file) as f_limit, open(usage_file) as f_usage:
                limit, usage = f_limit.read().strip(), int(f_usage.read().strip())
        except (OSError, ValueError):
            continue
        if limit.isdigit() and int(limit) < 2**60:  # "max" or a huge number: no limit
            available = min(available, max(int(limit) - usage, 0))
        break
    return available


class MemoryEstimateError(ConfigError):
    """A config that needs more memory than the machine has (the message gives the figures and the key)."""


@dataclass(frozen=True)
class Item:
    """One allocation of a run: what it is, its bytes, where (``device`` or ``host``), the config key to change."""

    what: str
    nbytes: int
    where: str
    key: str


@dataclass(frozen=True)
class PolicySizes:
    """A policy's share of the rollout: its agents, observation width, action bytes per agent and step
    (int64 per discrete head, float32 per Box dimension), critic input width (0: its observations),
    replay capacity (DDPG; 0: none) and action width."""

    tag: str
    agents: int
    obs_dim: int
    action_bytes: int
    critic_width: int = 0
    replay_capacity: int = 0
    action_dim: int = 0


def estimate(num_envs: int, rollout_length: int, episode_length: int, env_fixed_bytes: int, env_bytes_per_env: int,
             policies: Sequence[PolicySizes], recorded_row_bytes: Sequence[int] = ()) -> list[Item]:
    """The allocations of a run of these sizes (module docstring), biggest first. ``env_*_bytes``: the env's
    declared arrays (reset twins included) for no env and per env; ``recorded_row_bytes``: one env's row of
    each array recorded for the GIF (empty: no GIF)."""
    E, T = int(num_envs), int(rollout_length)
    env_bytes = max(0, int(env_fixed_bytes)) + int(env_bytes_per_env) * E
    items = [Item("env arrays", env_bytes, "device", "trainer.num_envs"),
             Item("env arrays' host copies (feed, reset snapshots)", 2 * env_bytes, "host", "trainer.num_envs")]
    for p in policies:
        critic = p.critic_width * 4 * 2  # the critic's inputs, and the final ones before a reset
        per_row = 2 * p.obs_dim * 4 + p.action_bytes + 4 * 5 + critic  # rewards, logprobs, values, advantages, returns
        items.append(Item(f"rollout buffers of policy {p.tag!r}", T * E * p.agents * per_row, "device",
                          "trainer.rollout_length or trainer.num_envs"))
        if p.replay_capacity:
            items.append(Item(f"replay buffer of policy {p.tag!r}",
                              p.replay_capacity * (2 * p.obs_dim + p.action_dim + 2) * 4, "device",
                              f"policy.{p.tag}.replay_buffer_size"))
    if recorded_row_bytes:
        rows = int(episode_length) + 1
        row = sum(2 * r + ROW_OVERHEAD for r in recorded_row_bytes)  # a list of rows, then np.stack's copy
        items.append(Item("the episode recorded for the GIF", rows * row, "host",
                          "env.config.episode_length (or train with --no-evaluate)"))
    return sorted(items, key=lambda item: -item.nbytes)


def refuse_if_over(items: Sequence[Item], available: dict[str, int], processes: int = 1) -> None:
    """Raise :class:`MemoryEstimateError` when the items of a memory (``device``, ``host``; both ``host`` on
    the cpu executor) times ``processes`` (ranks sharing the machine) exceed what ``available`` has there."""
    for where, free in available.items():
        mine = [i for i in items if i.where == where or (where == "host" and i.where not in available)]
        total = processes * sum(i.nbytes for i in mine)
        if total > free:
            biggest = max(mine, key=lambda i: i.nbytes)
            ranks = f" ({processes} processes)" if processes > 1 else ""
            memory = "host memory" if where == "host" else "GPU memory"
            raise MemoryEstimateError(
                f"this config needs at least {format_bytes(total)} of {memory}{ranks}, more than the "
                f"{format_bytes(free)} available; the biggest item is {biggest.what} ({format_bytes(biggest.nbytes)}): "
                f"lower {biggest.key}")


def check_config(config: Any, env: Any, backend: Any, record_episode: bool = False) -> list[Item]:
    """Estimate ``config``'s allocations with ``env`` (an Environment instance, not yet wrapped) on ``backend``
    and refuse them when they do not fit (:func:`refuse_if_over`); returns the items."""
    fixed, per_env, rows = _env_bytes(env)
    trainer = config.trainer
    items = estimate(trainer.num_envs, trainer.rollout_length, env.episode_length, fixed, per_env,
                     _policy_sizes(config, env, rows),
                     [rows.get(name, 0) for name in env.render_arrays] if record_episode else ())
    refuse_if_over(items, available_memory(backend), _local_processes())
    return items


def available_memory(backend: Any) -> dict[str, int]:
    """Bytes free where the run allocates: ``{"host": ...}`` on an executor in host memory (the cpu
    executor), plus ``{"device": ...}`` on a GPU (``torch.cuda.mem_get_info``)."""
    free = {"host": host_memory_available()}
    if backend.capabilities.memory != "host":
        import torch

        free["device"] = int(torch.cuda.mem_get_info(backend.device)[0])
    return free


def _env_bytes(env: Any) -> tuple[int, int, dict[str, int]]:
    """(fixed, per env) bytes of the env's declared arrays (reset twins counted), and one env's row of each
    array, from ``get_data_dictionary`` of 1 and 2 envs on a copy (so the env's own random draws are untouched)."""
    try:
        probe = copy.deepcopy(env)
        one, two = (_feed_bytes(probe.data_dictionary(n)) for n in (1, 2))
    except Exception:  # an env that cannot be sized this way is built and checked as before, by its wrapper
        return 0, 0, {}
    per_env = two[0] - one[0]
    return one[0] - per_env, per_env, one[1]


def _feed_bytes(feed: dict) -> tuple[int, dict[str, int]]:
    total, rows = 0, {}
    for name, entry in feed.items():
        data = entry.get("data") if isinstance(entry, dict) else None
        if not isinstance(data, (np.ndarray, list, tuple)):
            continue  # a scalar: passed by value
        nbytes = np.asarray(data).size * 4  # everything reaches the device as 32-bit values
        rows[name] = nbytes
        total += nbytes * (2 if entry.get("attributes", {}).get("save_copy_and_apply_at_reset") else 1)
    return total, rows


def _policy_sizes(config: Any, env: Any, rows: dict[str, int]) -> list[PolicySizes]:
    tags = list(config.policy)
    groups = {tags[0]: list(range(env.num_agents))} if len(tags) == 1 else env.agent_groups()
    out = []
    for tag in tags:
        agents = list(groups.get(tag, ()))
        if not agents:
            continue  # a policy the env has no group for: the trainer refuses it, naming both
        cfg = config.policy[tag]
        obs_dim = spaces.flatdim(env.observation_space(agents[0]))
        action = env.action_space(agents[0])
        if isinstance(action, spaces.Discrete):
            action_bytes, action_dim = 8, 1
        elif isinstance(action, spaces.MultiDiscrete):
            action_bytes, action_dim = 8 * len(action.nvec), len(action.nvec)
        else:
            action_dim = int(np.prod(action.shape))
            action_bytes = 4 * action_dim
        critic = getattr(cfg, "critic_input", "local")
        n = len(agents)
        critic_width = 0 if critic == "local" else (
            sum(rows.get(name, 0) for name in env.state_arrays) // 4 + n if critic == "state" else n * obs_dim + n)
        replay = int(getattr(cfg, "replay_buffer_size", 0) or 0) if cfg.algorithm == "DDPG" else 0
        out.append(PolicySizes(tag, n, obs_dim, action_bytes, critic_width, replay, action_dim))
    return out


def _local_processes() -> int:
    """Training processes on this machine: torchrun's ``LOCAL_WORLD_SIZE`` (``--nproc``), else 1."""
    try:
        return max(1, int(os.environ.get("LOCAL_WORLD_SIZE", "1")))
    except ValueError:
        return 1
