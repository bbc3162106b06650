"""Training layer: typed YAML run configs, A2C/PPO on the device rollouts, logging, checkpoints.

Entry points are ``warp_drive.training.run.train`` / ``evaluate`` and the
``warp-drive`` command line (``warp_drive/cli.py``). Submodules are imported
explicitly (``from warp_drive.training.config import load_config``) so that
reading a config or listing shipped configs does not import torch.

* ``config``: run config dataclasses, YAML loading, ``--set`` overrides, validation
* ``configs/``: shipped run configs, one per example environment
* ``schedules``: constant / linear / piecewise-linear hyper-parameter schedules
* ``models``: actor-critic networks and the model registry (``models.factory``: WarpDrive's ``ModelFactory``)
* ``policies``, ``rollout``: a policy's parts; ``OnDeviceTrainer``, the rollout every algorithm shares
  (device buffers, env steps, episode tallies, evaluation episodes)
* ``ppo``, ``ppo_trainer``: GAE and the A2C / PPO update as pure functions, and ``PPOTrainer`` over the rollout
* ``ddpg``, ``ddpg_networks``: ``DDPGTrainer`` over the same rollout, and its networks, replay buffer and losses
* ``guards``: NaN/inf checks around an update; ``algorithm_table``: the trainer class of each algorithm
* ``run``: ``train()`` and ``evaluate()``, ``build()`` and the training loop (``run_loop``)
* ``runs/``: what a run writes and reads around the loop: its directory and ``config.yaml``, checkpoints,
  ``metrics.csv``/TensorBoard/W&B, the callbacks, the up-front memory check (episode GIFs: ``warp_drive.rendering``)
* ``autoscale/``: ``auto_scale()``, the ``num_envs`` that trains fastest within a memory budget, by probing
* ``lightning/``: ``WarpDriveModule`` / ``RolloutDataModule`` for ``lightning.Trainer`` (extra ``lightning``)
* ``trainer``, ``trainers``, ``utils``, ``pytorch_lightning``: WarpDrive 2.7's import paths, re-exports of
  ``warp_drive.compat`` (see ``docs/migrating_from_warpdrive.md``)
"""
