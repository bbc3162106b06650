"""Overhead of training through PyTorch Lightning vs the plain warp_drive Trainer.

    python -m benchmarks.lightning [--quick] [--backend auto] [--repeats N]

The same config, env count, seed and number of iterations run with
``Trainer.iterate()`` in a loop and with ``lightning.Trainer.fit`` on a
``WarpDriveModule``, in two pairs:

* **bare**: the plain loop logs nothing; Lightning runs with no logger,
  progress bar or checkpoints and its default ``log_every_n_steps=50``: the
  cost of the integration itself (data fetch, hooks, optimizer wrappers).
  Target: below 5% (the paper reported below 10%).
* **logging every iteration**: the plain loop writes metrics.csv through
  ``MetricsWriter`` (CSV only) every iteration; Lightning writes a CSVLogger
  every rollout (``log_every_n_steps=1``).

Each iteration after a warm-up one is timed on its own (for Lightning: from
one batch end to the next, so its start-up is left out and its per-batch work
is in); the variants alternate ``--repeats`` times and each keeps its fastest
iteration, the estimate least disturbed by other load on a shared machine.
``overhead %`` is the extra time per iteration of the Lightning run.
Writes ``benchmarks/results/lightning.csv``.
"""

from __future__ import annotations

import argparse
import tempfile
import time

from benchmarks.common import machine_description, print_table, write_csv
from warp_drive.runtime.backends import backend_class, resolve_backend_name
from warp_drive.training.config import load_config
from warp_drive.training.run import build

# (label, config, env counts on the cpu executor, env counts on a GPU, config overrides); quick runs the first.
WORKLOADS = [
    ("CartPole", "cartpole", [32, 256], [2048, 16_384], []),
    ("TagContinuous 2 taggers + 5 runners, both trained", "tag_continuous_small", [100, 200], [2000, 10_000],
     ["policy.runner.to_train=true"]),
]
TARGET_OVERHEAD_PCT = 5.0


def on_gpu(backend: str) -> bool:
    """Whether the executor keeps its arrays in CUDA memory (Lightning's ``accelerator="gpu"``, GPU env counts)."""
    return backend_class(backend).capabilities.memory == "cuda"


def _config(name: str, num_envs: int, backend: str, iterations: int, extra: list[str]):
    rollout = load_config(name).trainer.rollout_length
    return load_config(name, [f"trainer.num_envs={num_envs}", f"trainer.backend={backend}",
                              f"trainer.total_steps={num_envs * rollout * (iterations + 1)}", *extra])


def plain_iteration_seconds(config, log_every_iteration: bool) -> list[float]:
    """Wall time of each iteration after the warm-up one: ``iterate()`` plus, if asked, writing its metrics."""
    from warp_drive.training.runs.metrics import MetricsWriter

    trainer, seconds = build(config), []
    with tempfile.TemporaryDirectory() as run_dir:
        writer = MetricsWriter(run_dir) if log_every_iteration else None
        trainer.iterate()  # warm-up: first-touch allocations
        while trainer.iteration < trainer.num_iterations:
            started = time.perf_counter()
            metrics = trainer.iterate()
            if writer is not None:
                writer.write(trainer.env_steps, {**metrics, **trainer.episode_metrics()})
            seconds.append(time.perf_counter() - started)
        if writer is not None:
            writer.close()
    return seconds


def lightning_iteration_seconds(config, log_every_iteration: bool) -> list[float]:
    """Time between the ends of consecutive Lightning batches: fetch (rollout), hooks, update, logging."""
    import lightning
    from lightning.pytorch.callbacks import Callback
    from lightning.pytorch.loggers import CSVLogger

    from warp_drive.training.lightning import WarpDriveModule

    class BatchClock(Callback):
        def __init__(self):
            self.ends: list[float] = []

        def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
            self.ends.append(time.perf_counter())

    module, clock = WarpDriveModule(config), BatchClock()
    with tempfile.TemporaryDirectory() as logs:
        fit = lightning.Trainer(
            accelerator="gpu" if on_gpu(config.trainer.backend) else "cpu", devices=1, max_epochs=1,
            logger=CSVLogger(logs) if log_every_iteration else False,
            log_every_n_steps=1 if log_every_iteration else 50, callbacks=[clock],
            enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False,
            default_root_dir=logs)
        fit.fit(module)
    return [b - a for a, b in zip(clock.ends, clock.ends[1:])]


def compare(name: str, num_envs: int, backend: str, iterations: int, extra: list[str], repeats: int) -> list[dict]:
    config = _config(name, num_envs, backend, iterations, extra)
    batch = config.trainer.num_envs * config.trainer.rollout_length
    rows = []
    for logging in (False, True):
        plain, lightning = [], []
        for _ in range(repeats):  # alternate, so that a burst of load elsewhere hits both alike
            plain += plain_iteration_seconds(config, logging)
            lightning += lightning_iteration_seconds(config, logging)
        overhead = 100.0 * (min(lightning) / min(plain) - 1.0)
        row = {"backend": backend, "envs": num_envs, "timed iterations": len(plain),
               "variant": "logging every iteration" if logging else "bare",
               "plain env steps/s": batch / min(plain), "lightning env steps/s": batch / min(lightning),
               "overhead %": overhead}
        row["target"] = "" if logging else (
            f"< {TARGET_OVERHEAD_PCT:.0f}%: {'met' if overhead < TARGET_OVERHEAD_PCT else 'MISSED'}")
        rows.append(row)
    return rows


def main(argv=None) -> list[dict]:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="smallest env counts, fewer iterations")
    parser.add_argument("--backend", default="auto", help="cpu, cpu-gpu, pycuda or auto (pycuda with a GPU)")
    parser.add_argument("--repeats", type=int, default=None, help="runs per variant (default 3, quick 2)")
    args = parser.parse_args(argv)
    repeats = args.repeats or (2 if args.quick else 3)
    backend = resolve_backend_name(args.backend)
    iterations = 4 if args.quick else 8
    rows = []
    for label, name, cpu_counts, gpu_counts, extra in WORKLOADS:
        counts = gpu_counts if on_gpu(backend) else cpu_counts
        for num_envs in counts[:1] if args.quick else counts:
            rows += [{"workload": label, **row}
                     for row in compare(name, num_envs, backend, iterations, extra, repeats)]
    print_table(f"Lightning vs plain Trainer, env steps/s on {machine_description()}", rows)
    print(f"\nwrote {write_csv('lightning', rows)}")
    return rows


if __name__ == "__main__":
    main()
