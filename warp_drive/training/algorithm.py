"""What an algorithm is to the trainer, and the table from a config's ``algorithm`` to the one that runs it.

The trainer (``training/loop.py``) composes a :class:`~warp_drive.training.rollout.Rollout`
with one :class:`Algorithm`. The rollout owns what every algorithm needs --
device buffers of observations, actions, rewards and done flags, the env
steps, resets, episode tallies and evaluation episodes -- and calls the
algorithm at four points of a rollout step; the algorithm owns its models'
use, its extra buffers, its state and its update. Adding an algorithm is a
new module with an :class:`Algorithm` subclass and one row of
:data:`ALGORITHMS`; no rollout, policy or loop code changes.

A rollout step of policy ``p`` at step ``t``::

    obs = the policy's observations            (rollout)
    acted = algorithm.act(p, obs, t)           writes the env's action array
    rollout records obs, acted.actions, the action mask
    algorithm.record(p, t, obs, acted)         its own buffers (log-probs, values, ...)
    ... one env step for every env ...
    rollout records rewards, final observations, done flags
    algorithm.after_step(p, t)                 before the done envs are reset
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any, Callable, Mapping, NamedTuple

if TYPE_CHECKING:  # this module imports no torch: the config reads its table
    import torch

    from warp_drive.training.loop import OnDeviceTrainer
    from warp_drive.training.policies import Policy

# algorithm name -> ("module:Class", the policy config section it reads: "on_policy" or "ddpg"); the class is
# imported when a trainer is built.
ALGORITHMS = {
    "A2C": ("warp_drive.training.ppo.algorithm:PPO", "on_policy"),  # PPO's update, one full-batch step
    "PPO": ("warp_drive.training.ppo.algorithm:PPO", "on_policy"),
    "DDPG": ("warp_drive.training.ddpg.algorithm:DDPG", "ddpg"),
    "VTRACE": ("warp_drive.training.vtrace:VTrace", "on_policy"),
}
DEFAULT_ALGORITHM = "PPO"


class Acted(NamedTuple):
    """What :meth:`Algorithm.act` chose: the actions as the rollout records them ``(E * n, heads)``, the
    distribution they came from (None for a deterministic actor), and what the algorithm wants back in
    :meth:`Algorithm.record` (e.g. PPO's value estimate)."""

    actions: torch.Tensor
    dist: Any = None
    extra: Any = None


class Algorithm:
    """The contract between the trainer and one algorithm (module docstring); the defaults do nothing.

    ``trainer`` gives the shared services: ``env``, ``config``, ``device``, ``sampler``, ``generator``,
    ``distributed``, ``rollout`` (after :meth:`make_policy`), ``timed(phase)`` and ``guard`` (the NaN/inf
    policy).
    """

    def __init__(self, trainer: "OnDeviceTrainer"):
        self.trainer = trainer
        self.env = trainer.env
        self.device = trainer.device

    def make_policy(self, tag: str, agent_ids: list[int]) -> "Policy":
        """The policy ``tag`` of ``agent_ids``: its model, optimizer and action array (and its state here)."""
        raise NotImplementedError

    def buffers(self, p: "Policy") -> dict[str, tuple[tuple[int, ...], torch.dtype]]:
        """Extra rollout buffers of policy ``p``: name -> (shape, dtype); ``(T, E * n, ...)`` by convention."""
        return {}

    def act(self, p: "Policy", obs: torch.Tensor, t: int | None = None, greedy: bool = False) -> Acted:
        """Choose actions for ``obs`` and write them into the env's action array. ``t``: the rollout step
        (None in an evaluation episode, which records nothing)."""
        raise NotImplementedError

    def record(self, p: "Policy", t: int, obs: torch.Tensor, acted: Acted) -> None:
        """Write step ``t``'s extras into this algorithm's buffers of ``p``."""

    def after_step(self, p: "Policy", t: int) -> None:
        """After the env step ``t``, before the done envs are reset (their final observations still there)."""

    def restart(self, ended: torch.Tensor | None = None) -> None:
        """The envs ``ended (E,)`` (None: all) start new episodes: forget what a policy remembers of them."""

    def update(self, optimizers: Mapping[str, Any] | None = None,
               backward: Callable[[torch.Tensor], None] | None = None) -> dict[str, float]:
        """Learn from the last rollout; return the metrics. ``optimizers`` (tag -> optimizer) and ``backward``
        (replaces ``loss.backward()``) let the Lightning module run the update through its own."""
        raise NotImplementedError

    def state_dict(self) -> dict:
        """This algorithm's part of a checkpoint (merged into the trainer's, top level)."""
        return {}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        pass


def algorithms_of(config: Any) -> dict[str, str]:
    """{policy tag: algorithm} of a RunConfig, our config dict, or a WarpDrive run-config dict."""
    policies = config.get("policy") if isinstance(config, Mapping) else getattr(config, "policy", None)
    out = {}
    for tag, section in (policies or {}).items():
        algorithm = section.get("algorithm", "") if isinstance(section, Mapping) else getattr(section, "algorithm", "")
        out[str(tag)] = str(algorithm or DEFAULT_ALGORITHM).upper()
    return out


def uses_ddpg(config: Any) -> bool:
    """True when any policy of ``config`` trains with DDPG."""
    return "DDPG" in algorithms_of(config).values()


def algorithm_class(config: Any) -> type[Algorithm]:
    """The one algorithm class that trains every policy of ``config``; a mix is refused naming the policies."""
    chosen = {tag: ALGORITHMS.get(name, (None,))[0] for tag, name in algorithms_of(config).items()}
    unknown = sorted(tag for tag, path in chosen.items() if path is None)
    if unknown:
        raise ValueError(f"policies {unknown}: unknown algorithm; choose one of {', '.join(ALGORITHMS)}")
    if len(set(chosen.values())) > 1:
        names = algorithms_of(config)
        raise ValueError(f"policies use {sorted(set(names.values()))} ({names}): one trainer trains one algorithm "
                         f"family; give every policy the same algorithm (A2C and PPO mix)")
    module, _, name = next(iter(chosen.values()), ALGORITHMS[DEFAULT_ALGORITHM][0]).partition(":")
    return getattr(importlib.import_module(module), name)
