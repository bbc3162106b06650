"""WarpDrive 2.7's ``perform_distributed_training`` (at its import paths
``warp_drive.training.utils.distributed_train`` and ``...distributed_train.distributed_trainer_pycuda``),
over torch's launcher and :mod:`warp_drive.training.distributed` (what ``warp-drive train --nproc N`` runs on).

``perform_distributed_training(setup_trainer_and_train, config, results_dir=None)``
starts ``config["trainer"]["num_gpus"]`` workers with torch's elastic launcher
(the launcher under ``torchrun`` and ``--nproc``, on a free local port) and
calls, in worker ``i`` of ``n``, ``setup_trainer_and_train(run_configuration=config,
device_id=i, num_devices=n, event_messenger=None, results_directory=results_dir,
verbose=(i == 0))``, as WarpDrive did. The WarpDrive ``Trainer`` the function
builds with those ``device_id``/``num_devices`` joins the workers' group
(:func:`warp_drive.training.distributed.init`: NCCL on GPUs, gloo for the cpu
executor) and averages gradients over the workers. Each worker binds GPU
``LOCAL_RANK`` before the function runs, where there is one. Unlike WarpDrive,
which printed a worker's exception and returned, a failing worker stops the
others and raises (torch's ``ChildFailedError``). ``event_messenger`` is None:
builds go through a process-safe cache, so no worker waits for another's compile.

The function must be importable by the workers (defined at a module's top
level; a script's under ``if __name__ == "__main__":``), since they are
started with ``spawn``. A program started by ``torchrun`` itself needs none of
this: a Trainer given ``num_devices=WORLD_SIZE, device_id=RANK`` joins the group.
``distributed_trainer_numba`` (WarpDrive's Numba variant) is not kept: Numba
kernels have no executor here.
"""

from __future__ import annotations

import os
import time
import uuid
from typing import Any, Callable, Mapping

import torch

from warp_drive.training import distributed


def _num_workers(config: Mapping) -> int:
    trainer = config.get("trainer") if isinstance(config, Mapping) else None
    value = trainer.get("num_gpus") if isinstance(trainer, Mapping) else None
    if isinstance(value, bool) or not isinstance(value, int) or value < 2:
        raise ValueError(f"perform_distributed_training: config['trainer']['num_gpus'] is {value!r}; it is the "
                         f"number of worker processes and must be an integer >= 2 (with one, call "
                         f"setup_trainer_and_train(config) directly, as WarpDrive's example script does)")
    return value


def _worker(setup_trainer_and_train: Callable, config: dict, results_dir: str) -> Any:
    """One worker: bind its GPU, run the user's function with WarpDrive's keywords, leave the group;
    returns the function's return value."""
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    local_rank = int(os.environ.get("LOCAL_RANK", rank))
    if torch.cuda.is_available() and local_rank < torch.cuda.device_count():
        torch.cuda.set_device(local_rank)  # before the function builds its env on the current device
    value = setup_trainer_and_train(run_configuration=config, device_id=rank, num_devices=world,
                                    event_messenger=None, results_directory=results_dir, verbose=(rank == 0))
    distributed.shutdown()
    return value


def perform_distributed_training(setup_trainer_and_train: Callable, config: dict,
                                 results_dir: str | None = None) -> Any:
    """Run ``setup_trainer_and_train`` in ``config["trainer"]["num_gpus"]`` workers (see the module docstring);
    returns ``{rank: the function's return value}`` (WarpDrive's returned nothing)."""
    from torch.distributed.launcher.api import LaunchConfig, elastic_launch

    if not callable(setup_trainer_and_train):
        raise TypeError(f"perform_distributed_training: setup_trainer_and_train must be a function, got "
                        f"{setup_trainer_and_train!r}")
    num_workers = _num_workers(config)
    if results_dir is None:
        results_dir = f"{time.time():10.0f}"  # WarpDrive's default: one directory name shared by the workers
    launch = LaunchConfig(min_nodes=1, max_nodes=1, nproc_per_node=num_workers, run_id=f"warpdrive-{uuid.uuid4()}",
                          rdzv_backend="c10d", rdzv_endpoint="localhost:0", max_restarts=0, start_method="spawn")
    return elastic_launch(launch, _worker)(setup_trainer_and_train, config, results_dir)


__all__ = ["perform_distributed_training"]
