"""Everything around a training run's loop (``warp_drive.training.run``): its directory and files, its
checkpoints, its metrics and loggers, and the callbacks that write them.

Nothing is re-exported here; import each name from its module:

* ``layout``: the names of a run directory's files, its checkpoints oldest first and the newest, writing a
  run file without following a link
* ``dirs``: a new run directory, its lock (``RunLock``), ``--resume latest`` (``resolve_run_dir``); no torch,
  so the command line resolves runs before it imports the training stack
* ``config_file``: the run's ``config.yaml``, written at the start and read back to resume or evaluate
* ``checkpoint``: atomic checkpoint files, a ``latest`` pointer, ``weights_only`` loading, broken weights refused
* ``env_arrays``: a checkpoint's env arrays restored into the envs, every one checked first
* ``memory``: the up-front memory estimate of a config (refused when the machine lacks it), sizes in bytes
* ``metrics``, ``loggers``: ``metrics.csv``, the progress bar and summary table; TensorBoard, W&B, provenance
* ``callbacks``: the loop's callbacks (metrics, checkpoints, progress, the GIF, the summary; users' own)
* ``stop_at_return``: ``trainer.stop_at_return``, the callback that ends a solved run
"""
