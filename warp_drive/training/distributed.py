"""Data-parallel training over several processes with ``torch.distributed``.

How a multi-process run works (and why it is shaped this way):

* **Launch** is torch's own: ``torchrun`` (or ``warp-drive train --nproc N``,
  which re-launches itself under ``torch.distributed.run --standalone``) starts
  one worker per GPU or CPU share and sets ``RANK`` / ``WORLD_SIZE`` /
  ``LOCAL_RANK`` / ``MASTER_ADDR`` / ``MASTER_PORT``. We never pick ports or
  spawn processes ourselves (the original hard-coded port 8888 and printed
  worker exceptions instead of failing), so multi-node runs
  (``--nnodes``, ``--rdzv-endpoint``) need no code change, and torchrun's
  elastic agent stops every worker and exits non-zero when one of them fails.
* **Data**: each rank simulates its own ``num_envs`` envs with seed
  ``seed + rank``; the models start identical (rank 0's parameters are
  broadcast) and stay identical because every rank applies the same averaged
  gradient. We all-reduce gradients explicitly instead of wrapping models in
  DDP: the checkpoints then hold plain ``state_dict``s (no ``module.``
  prefixes) that load into a single-process run unchanged, and the algorithm
  code needs only a hook after ``backward``.
* **Decisions** that end loops (PPO's KL early stop) are taken on all-reduced
  values so that every rank runs the same number of collective calls; a rank
  that stopped alone would leave the others waiting forever.
* **Collectives time out** (``$WARP_DRIVE_DIST_TIMEOUT`` seconds, default 300)
  so that a wedged peer turns into an error rather than a silent hang.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from datetime import timedelta
from typing import TYPE_CHECKING, Any, Mapping

import torch
import torch.distributed as dist
from torch import nn

from warp_drive.runtime import env_vars
from warp_drive.runtime.backends import backend_class

if TYPE_CHECKING:
    from warp_drive.runtime.backends.base import Backend

TIMEOUT_ENV = "WARP_DRIVE_DIST_TIMEOUT"
SUMMED_METRICS = ("charts/SPS",)  # throughputs add up over ranks; everything else is averaged
# Per-episode means of episode_metrics(): averaged over ranks weighted by their episodes.
EPISODE_MEANS = ("episodic_return", "team_return")


def launched_by_torchrun() -> bool:
    """True in a worker started by torchrun (even with one process: ``--nproc 1`` still takes this path)."""
    return all(key in os.environ for key in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT"))


@dataclass
class Distributed:
    """This process's place in the group, and the collectives the trainer needs."""

    rank: int
    world_size: int
    local_rank: int
    device: torch.device  # where tensors for collectives live (cuda for NCCL, cpu for gloo)

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    # ------------------------------------------------------------------ model state
    @torch.no_grad()
    def broadcast_module(self, module: nn.Module, src: int = 0) -> None:
        """Copy rank ``src``'s parameters and buffers into every rank's ``module``.

        More robust than seeding every rank's init identically: it also covers
        user models whose constructors draw from other RNGs.
        """
        for tensor in module.state_dict().values():
            self._in_place(tensor, lambda t: dist.broadcast(t, src))

    @torch.no_grad()
    def average_gradients(self, module: nn.Module) -> None:
        """All-reduce the gradients of ``module`` and divide by the world size (one flat buffer, one call).

        Called after ``backward`` and before the grad-norm clip, so the clip
        sees the global gradient and every rank takes the same optimizer step.
        A parameter without a gradient gets zeros, so the flat buffers have
        the same layout on all ranks.
        """
        params = [p for p in module.parameters() if p.requires_grad]
        for p in params:
            if p.grad is None:
                p.grad = torch.zeros_like(p)
        flat = torch.cat([p.grad.reshape(-1) for p in params]).to(self.device)
        dist.all_reduce(flat)
        flat /= self.world_size
        offset = 0
        for p in params:
            n = p.grad.numel()
            p.grad.copy_(flat[offset:offset + n].view_as(p.grad))
            offset += n

    @torch.no_grad()
    def average_buffers(self, module: nn.Module) -> None:
        """Average floating-point buffers (observation-normalisation statistics) over ranks.

        Each rank updates its running mean/variance from its own envs; without
        this the models' forward passes would drift apart even though their
        parameters are identical. Every rank has seen the same number of rows,
        so averaging the means is exact; averaging the variances ignores the
        spread between the ranks' means (a small underestimate) -- a deliberate
        simplification.
        """
        for tensor in module.buffers():
            if tensor.is_floating_point():
                self._in_place(tensor, lambda t: (dist.all_reduce(t), t.div_(self.world_size)))

    def _in_place(self, tensor: torch.Tensor, op) -> None:
        """Run collective ``op`` on ``tensor``, staging through the collective device when it lives elsewhere."""
        if tensor.device == self.device:
            op(tensor)
        else:
            staged = tensor.to(self.device)
            op(staged)
            tensor.copy_(staged)

    # ------------------------------------------------------------------ scalars and metrics
    def mean(self, value: torch.Tensor) -> torch.Tensor:
        """Mean of a scalar tensor over ranks (the same result on every rank)."""
        out = value.detach().to(self.device, torch.float64).clone()
        dist.all_reduce(out)
        return out / self.world_size

    def reduce_metrics(self, metrics: Mapping[str, float]) -> dict[str, float]:
        """Average every metric over ranks, except throughputs (``charts/SPS``), which are summed.

        Keys are reduced in sorted order; all ranks produce the same keys
        because they run the same policies for the same iterations.
        """
        keys = sorted(metrics)
        values = torch.tensor([float(metrics[k]) for k in keys], dtype=torch.float64, device=self.device)
        dist.all_reduce(values)
        out = {}
        for key, total in zip(keys, values.tolist()):
            out[key] = total if key in SUMMED_METRICS else total / self.world_size
        return out

    def reduce_episode_metrics(self, metrics: Mapping[str, float]) -> dict[str, float]:
        """Aggregate ``Trainer.episode_metrics`` output: episode counts summed, returns episode-weighted.

        A rank that finished no episode reports NaN as its mean; it contributes
        zero to the sum and zero to the count.
        """
        tags = sorted(k.rsplit("/", 1)[-1] for k in metrics if k.startswith("charts/episodes/"))
        means = [name for name in EPISODE_MEANS if all(f"charts/{name}/{tag}" in metrics for tag in tags)]
        rows = []
        for tag in tags:
            count = float(metrics[f"charts/episodes/{tag}"])
            rows.append([*(float(metrics[f"charts/{m}/{tag}"]) * count if count else 0.0 for m in means), count])
        totals = torch.tensor(rows, dtype=torch.float64, device=self.device).reshape(-1, len(means) + 1)
        dist.all_reduce(totals)
        out = dict(metrics)
        for tag, row in zip(tags, totals.tolist()):
            count = row[-1]
            for name, total in zip(means, row):
                out[f"charts/{name}/{tag}"] = total / count if count else math.nan
            out[f"charts/episodes/{tag}"] = count
        return out

    def mean_dict(self, values: Mapping[str, float]) -> dict[str, float]:
        """Plain per-key mean over ranks (e.g. the mean return of an evaluation episode; ranks have equal envs)."""
        keys = sorted(values)
        tensor = torch.tensor([float(values[k]) for k in keys], dtype=torch.float64, device=self.device)
        dist.all_reduce(tensor)
        return {k: v / self.world_size for k, v in zip(keys, tensor.tolist())}

    # ------------------------------------------------------------------ python objects
    def broadcast_object(self, obj: Any, src: int = 0) -> Any:
        """Rank ``src``'s ``obj`` on every rank (e.g. the run directory only rank 0 created)."""
        box = [obj]
        dist.broadcast_object_list(box, src=src, device=self.device)
        return box[0]

    def gather_objects(self, obj: Any) -> list[Any]:
        """Every rank's ``obj``, in rank order, on every rank."""
        out: list[Any] = [None] * self.world_size
        dist.all_gather_object(out, obj)
        return out

    def barrier(self) -> None:
        dist.barrier()


def init(backend: "str | Backend | None") -> Distributed:
    """Join the process group torchrun set up, for the executor ``backend`` (a
    name, ``auto`` included, or a backend).

    The executor's capabilities decide, not its name: the ``torch.distributed``
    backend is ``capabilities.collective_backend`` (NCCL for the GPU executor,
    gloo for the cpu one in either shape), and where arrays live in CUDA
    memory (``capabilities.memory == "cuda"``) the worker first binds to GPU
    ``LOCAL_RANK`` (the executor uses torch's current device), so call this
    before building the env.
    """
    capabilities = backend_class(backend).capabilities
    rank, world_size = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    local_rank = int(os.environ["LOCAL_RANK"])
    timeout = timedelta(seconds=env_vars.read(TIMEOUT_ENV) or 300.0)
    if capabilities.memory == "cuda":
        torch.cuda.set_device(local_rank)
        device = torch.device("cuda", local_rank)
    else:
        device = torch.device("cpu")
    pg_backend = capabilities.collective_backend
    if not dist.is_initialized():
        kwargs = {"device_id": device} if pg_backend == "nccl" else {}
        dist.init_process_group(pg_backend, rank=rank, world_size=world_size, timeout=timeout, **kwargs)
    return Distributed(rank, world_size, local_rank, device)


def shutdown() -> None:
    """Leave the group once every rank is done with it (after a successful run only).

    The barrier keeps a rank that finished first from tearing down its
    connections while a peer is still in a collective with it: seen once as
    an abort ("terminate called without an active exception") of rank 0 at
    exit in a 2-process gloo run.
    """
    if dist.is_available() and dist.is_initialized():
        dist.barrier()
        dist.destroy_process_group()


def rank_state(trainer_state: Mapping[str, Any]) -> dict[str, Any]:
    """The part of a trainer's state that differs between ranks: its envs, sampler, RNGs, episode tallies.

    Models and optimizers are identical on every rank and are saved once.
    """
    keys = ("accumulators", "sampler", "reset", "env_arrays", "torch_rng", "generator")
    return {k: trainer_state[k] for k in keys}
