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
* ``metrics``, ``checkpoint``: CSV/TensorBoard logs, checkpoints (episode GIFs: ``warp_drive.rendering``)
* ``run``: ``train()`` and ``evaluate()``
* ``lightning``: ``WarpDriveModule`` / ``RolloutDataModule`` for ``lightning.Trainer`` (extra ``lightning``)
* ``trainer``, ``trainers``, ``utils``, ``pytorch_lightning``: WarpDrive 2.7's import paths, re-exports of
  ``warp_drive.compat`` (see ``docs/migrating_from_warpdrive.md``)
"""
