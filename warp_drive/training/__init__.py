"""Training layer: typed YAML run configs, A2C/PPO on the device rollouts, logging, checkpoints.

Entry points are ``warp_drive.training.run.train`` / ``evaluate`` and the
``warp-drive`` command line (``warp_drive/cli.py``). Submodules are imported
explicitly (``from warp_drive.training.config import load_config``) so that
reading a config or listing shipped configs does not import torch.

* ``config``: run config dataclasses, YAML loading, ``--set`` overrides, validation
* ``configs/``: shipped run configs, one per example environment
* ``schedules``: constant / linear / piecewise-linear hyper-parameter schedules
* ``models``: actor-critic networks and the model registry (``models.factory``: WarpDrive's ``ModelFactory``)
* ``algorithms``, ``trainer``: GAE, the A2C and PPO updates, the training loop
* ``ddpg``: DDPG for Box actions (device replay buffer, target networks with ``tau``, OU or Gaussian noise)
* ``warpdrive_methods``: WarpDrive 2.7's ``Trainer`` methods (``train()``, ``fetch_episode_states``, ...)
* ``metrics``, ``checkpoint``, ``render``: CSV/TensorBoard logs, checkpoints, episode GIFs
* ``run``: ``train()`` and ``evaluate()``
* ``lightning``: ``WarpDriveModule`` / ``RolloutDataModule`` for ``lightning.Trainer`` (extra ``lightning``)
* ``trainers``, ``utils``, ``pytorch_lightning``: WarpDrive 2.7's import paths, aliases of the above
  (see ``docs/migrating_from_warpdrive.md``)
"""
