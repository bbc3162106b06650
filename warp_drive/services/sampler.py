"""``Sampler``: draw actions on the device from the policy's output.

Randomness is stateless Philox4x32-10: a draw is a pure function of
``(seed, counter, stream, domain)`` where the stream is the flat
``env * n_agents + agent`` index, the counter advances once per call, and every
registered action head owns its own domain. So there is no per-thread RNG state
on the device (WarpDrive kept curand states on the device heap), heads and
policies never share streams, and a run is reproducible from its seed and
counters alone — on any executor, with any number of worker threads.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Sequence

import numpy as np
import torch

from warp_drive.runtime.data_feed import DataFeed
from warp_drive.runtime.function_manager import FunctionManager

FLAT_BLOCK = 256
OU_STATE_SUFFIX = "_ou_state"


def random_seed() -> int:
    return int.from_bytes(os.urandom(8), "little") >> 1


@dataclass
class _Head:
    """One registered action head: its own Philox domain and counter."""

    action_name: str
    head: int
    n_heads: int
    num_actions: int
    domain: int
    counter: int = 0


@dataclass
class _Continuous:
    action_name: str
    dim: int
    low: torch.Tensor
    high: torch.Tensor
    damping: float
    stddev: float
    domain: int
    counter: int = 0


class Sampler:
    """Categorical (discrete / multi-discrete) and Ornstein–Uhlenbeck (continuous) sampling."""

    def __init__(self, function_manager: FunctionManager, seed: int | None = None):
        self.function_manager = function_manager
        self.seed = random_seed() if seed is None else int(seed)
        self._discrete: dict[str, list[_Head]] = {}
        self._continuous: dict[str, _Continuous] = {}
        self._next_domain = 1

    # ------------------------------------------------------------------ setup
    def init_random(self, seed: int | None = None) -> None:
        """Restart every stream from ``seed`` (counters back to zero)."""
        self.seed = random_seed() if seed is None else int(seed)
        for heads in self._discrete.values():
            for head in heads:
                head.counter = 0
        for cont in self._continuous.values():
            cont.counter = 0

    def _new_domain(self) -> int:
        domain = self._next_domain
        self._next_domain += 1
        return domain

    def register_actions(self, data_manager, action_name: str, num_actions: int | Sequence[int]) -> None:
        """Register a discrete action array ``(E, N)`` or a multi-discrete one ``(E, N, H)``.

        ``num_actions`` is an int (one head) or one int per head.
        """
        self._require_new(action_name)
        shape = data_manager.get_shape(action_name)
        if data_manager.get_dtype(action_name) != "int32":
            raise TypeError(f"action array {action_name!r} must be int32, is {data_manager.get_dtype(action_name)}")
        sizes = [int(num_actions)] if np.isscalar(num_actions) else [int(n) for n in num_actions]
        # Per-policy action arrays hold a subset of the agents: (E, N_policy[, H]).
        expected_heads = 1 if len(shape) == 2 else (shape[2] if len(shape) == 3 else None)
        if len(shape) < 2 or shape[0] != data_manager.num_envs or expected_heads != len(sizes):
            raise ValueError(
                f"action array {action_name!r} has shape {shape}; for {len(sizes)} head(s) expected "
                f"({data_manager.num_envs}, n_agents)" + ("" if len(sizes) == 1 else f" or (E, n_agents, {len(sizes)})")
            )
        if any(n < 1 for n in sizes):
            raise ValueError(f"action array {action_name!r}: every head needs at least one action, got {sizes}")
        self._discrete[action_name] = [
            _Head(action_name, h, len(sizes), n, self._new_domain()) for h, n in enumerate(sizes)
        ]

    def register_continuous_actions(
        self,
        data_manager,
        action_name: str,
        low,
        high,
        damping: float = 0.15,
        stddev: float = 0.2,
    ) -> None:
        """Register a float32 action array ``(E, N)`` or ``(E, N, D)`` with bounds per dimension.

        Exploration noise is an Ornstein–Uhlenbeck process per (env, agent,
        dim): ``x <- (1 - damping) x + stddev * N(0, 1)``; ``damping=1`` gives
        iid Gaussian noise. Its state ``<action>_ou_state`` lives in the
        DataManager with a zero reset twin, so it restarts with the episode.
        """
        self._require_new(action_name)
        shape = data_manager.get_shape(action_name)
        if data_manager.get_dtype(action_name) != "float32":
            raise TypeError(f"action array {action_name!r} must be float32, is {data_manager.get_dtype(action_name)}")
        if len(shape) not in (2, 3) or shape[0] != data_manager.num_envs:
            raise ValueError(f"action array {action_name!r} has shape {shape}; expected (E, N) or (E, N, D)")
        dim = 1 if len(shape) == 2 else shape[2]
        device = data_manager.device
        low_t = torch.as_tensor(np.broadcast_to(np.asarray(low, np.float32), (dim,)).copy(), device=device)
        high_t = torch.as_tensor(np.broadcast_to(np.asarray(high, np.float32), (dim,)).copy(), device=device)
        if bool((low_t > high_t).any()):
            raise ValueError(f"action bounds of {action_name!r}: low {low} exceeds high {high}")
        if not 0.0 < damping <= 1.0 or stddev < 0:
            raise ValueError(f"OU noise of {action_name!r}: need 0 < damping <= 1 and stddev >= 0")
        feed = DataFeed()
        feed.add_data(action_name + OU_STATE_SUFFIX, np.zeros(shape, np.float32), save_copy_and_apply_at_reset=True)
        data_manager.push_data_to_device(feed)
        self._continuous[action_name] = _Continuous(
            action_name, dim, low_t, high_t, float(damping), float(stddev), self._new_domain()
        )

    def _require_new(self, action_name: str) -> None:
        if action_name in self._discrete or action_name in self._continuous:
            raise ValueError(f"action {action_name!r} is already registered with this sampler")

    # ------------------------------------------------------------------ sampling
    def sample(self, data_manager, probabilities, action_name: str, argmax: bool = False, **noise) -> None:
        """Write sampled actions into ``action_name`` in place.

        Discrete: ``probabilities`` is a float32 tensor ``(E, N, A)`` (one head)
        or a list of them (one per head); ``argmax=True`` takes the first most
        likely action. Continuous: ``probabilities`` is the mean ``(E, N[, D])``;
        ``argmax=True`` (or ``scale=0``) returns the clipped mean; ``damping``,
        ``stddev`` and ``scale`` override the registered noise for this call.
        """
        if action_name in self._continuous:
            self._sample_continuous(data_manager, probabilities, action_name, argmax, **noise)
            return
        if noise:
            raise TypeError(f"noise parameters {sorted(noise)} apply to continuous actions; {action_name!r} is discrete")
        if action_name not in self._discrete:
            raise KeyError(f"action {action_name!r} is not registered; registered: {self.registered_actions}")
        heads = self._discrete[action_name]
        per_head = probabilities if isinstance(probabilities, (list, tuple)) else [probabilities]
        if len(per_head) != len(heads):
            raise ValueError(f"action {action_name!r} has {len(heads)} head(s); got {len(per_head)} probability tensors")
        actions = data_manager.data_on_device_via_torch(action_name)
        n_rows = actions.shape[0] * actions.shape[1]
        for head, probs in zip(heads, per_head):
            self._check_distribution(probs, action_name, actions.shape[:2], head.num_actions, head.head)
            self.function_manager.launch_flat(
                "wd_sample_categorical",
                [probs, actions, n_rows, head.num_actions, head.n_heads, head.head, int(argmax),
                 self.seed, head.counter, head.domain],
                n_rows,
                FLAT_BLOCK,
            )
            head.counter += 1

    def _sample_continuous(self, data_manager, mean, action_name, deterministic, damping=None, stddev=None, scale=1.0):
        cont = self._continuous[action_name]
        actions = data_manager.data_on_device_via_torch(action_name)
        state = data_manager.data_on_device_via_torch(action_name + OU_STATE_SUFFIX)
        if not isinstance(mean, torch.Tensor) or mean.dtype != torch.float32 or tuple(mean.shape) != tuple(actions.shape):
            raise ValueError(
                f"mean for {action_name!r} must be a float32 tensor of shape {tuple(actions.shape)}; got "
                f"{getattr(mean, 'dtype', type(mean).__name__)} {tuple(getattr(mean, 'shape', ()))}"
            )
        n_rows = actions.shape[0] * actions.shape[1]
        self.function_manager.launch_flat(
            "wd_sample_ou",
            [mean.contiguous(), actions, state, cont.low, cont.high, n_rows, cont.dim,
             cont.damping if damping is None else damping, cont.stddev if stddev is None else stddev,
             0.0 if deterministic else scale, self.seed, cont.counter, cont.domain],
            n_rows * cont.dim,
            FLAT_BLOCK,
        )
        cont.counter += 1

    @staticmethod
    def _check_distribution(probs, action_name: str, leading: tuple, num_actions: int, head: int) -> None:
        expected = (*leading, num_actions)
        if not isinstance(probs, torch.Tensor):
            raise TypeError(f"probabilities for {action_name!r} head {head} must be a torch tensor")
        if probs.dtype != torch.float32 or tuple(probs.shape) != expected:
            raise ValueError(
                f"probabilities for {action_name!r} head {head}: expected float32 {expected}, got "
                f"{str(probs.dtype).replace('torch.', '')} {tuple(probs.shape)}"
            )
        if not probs.is_contiguous():
            raise ValueError(f"probabilities for {action_name!r} head {head} must be contiguous (.contiguous())")

    # ------------------------------------------------------------------ state
    @property
    def registered_actions(self) -> list[str]:
        return [*self._discrete, *self._continuous]

    def state_dict(self) -> dict:
        """Seed and counters: what a checkpoint needs to continue the same streams."""
        return {
            "seed": self.seed,
            "counters": {
                **{f"{a}/{h.head}": h.counter for a, heads in self._discrete.items() for h in heads},
                **{f"{a}/continuous": c.counter for a, c in self._continuous.items()},
            },
        }

    def load_state_dict(self, state: dict) -> None:
        self.seed = int(state["seed"])
        for action, heads in self._discrete.items():
            for head in heads:
                head.counter = int(state["counters"][f"{action}/{head.head}"])
        for action, cont in self._continuous.items():
            cont.counter = int(state["counters"][f"{action}/continuous"])
