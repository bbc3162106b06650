"""A rollout as a Lightning batch: :class:`Rollout` (views of the device buffers) and :class:`RolloutLoader`,
which collects one on the device each time Lightning asks for the next batch."""

from __future__ import annotations

from typing import Iterator

from warp_drive.training.loop import OnDeviceTrainer


class Rollout:
    """One batch: the rollout just collected, as views of the OnDeviceTrainer's device buffers (no copies).

    ``policies[tag]`` maps ``obs``, ``final_obs``, ``actions``, ``logprobs``,
    ``values`` and ``rewards`` to ``(T, E * the policy's agents, ...)`` tensors;
    ``done`` is ``(T, E)``. A plain class rather than a dict, so that Lightning
    does not walk it to move or cast tensors that already sit on the device.
    """

    def __init__(self, trainer: OnDeviceTrainer):
        self.iteration = trainer.iteration  # 0-based index of this rollout in the run
        self.env_steps = trainer.env_steps  # env steps collected so far, this rollout included
        self.policies = {tag: dict(buffers) for tag, buffers in trainer.rollout.buffers.items()}
        self.done = trainer.rollout.done


class RolloutLoader:
    """An iterable of rollouts: each ``next()`` collects one on the device and yields its buffers.

    It stops when the warp_drive OnDeviceTrainer has run the config's iterations, or
    after ``rollouts_per_epoch`` rollouts when that is given (WarpDrive's
    epochs). Its length is the epoch's number of rollouts (by default the
    run's iterations: one epoch = the whole run), which also stops Lightning
    from fetching a batch ahead.
    """

    def __init__(self, trainer: OnDeviceTrainer, rollouts_per_epoch: int | None = None):
        self.trainer = trainer
        self.rollouts_per_epoch = rollouts_per_epoch

    def __len__(self) -> int:
        return self.rollouts_per_epoch or self.trainer.num_iterations

    def state_dict(self) -> dict[str, int]:
        """Makes Lightning treat the loader as resumable mid-epoch, which it is: the envs, samplers and
        counters it draws from are restored with the rest of the OnDeviceTrainer by ``on_load_checkpoint``."""
        return {"iteration": self.trainer.iteration}

    def load_state_dict(self, state: dict[str, int]) -> None:
        pass  # see state_dict

    def __iter__(self) -> Iterator[Rollout]:
        trainer, left = self.trainer, self.rollouts_per_epoch
        while trainer.iteration < trainer.num_iterations and (left is None or left > 0):
            left = None if left is None else left - 1
            trainer.begin_iteration()
            trainer.collect_rollout()
            yield Rollout(trainer)
