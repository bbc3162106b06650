"""Training layer: typed YAML run configs, A2C/PPO/V-trace/DDPG on the device rollouts, logging, checkpoints.

Entry points are ``warp_drive.training.run.train`` / ``evaluate`` and the
``warp-drive`` command line (``warp_drive/cli.py``). Submodules are imported
explicitly (``from warp_drive.training.config import load_config``) so that
reading a config or listing shipped configs does not import torch.

Training is a composition: ``OnDeviceTrainer`` (``loop``) runs a ``Rollout``
(``rollout``: device buffers, env steps, episode tallies) of ``Policy`` objects
(``policies``) with one ``Algorithm`` (``algorithm``: the contract, and
``ALGORITHMS``, the table from a config's ``algorithm`` to its class). One PPO
iteration reads top to bottom in ``loop`` and ``ppo/algorithm``.

* ``algorithm``, ``rollout``, ``policies``, ``loop``: the shared parts every algorithm is built on
* ``ppo/``: A2C/PPO (``losses``: GAE and the update as pure functions; ``critic``, ``recurrent``,
  ``value_norm``: the parts PPO is built with for MAPPO and GRU policies)
* ``vtrace``: PPO with a V-trace correction for a one-update-stale behaviour policy
* ``ddpg/``: DDPG, its networks and replay buffer
* ``models/``: actor-critic networks and the model registry (``models.factory``: WarpDrive's ``ModelFactory``)
* ``config/``: the run config schema (pydantic), YAML loading, ``--set`` overrides; ``configs/``: shipped run configs
* ``schedules``, ``optim``, ``guards``, ``distributed``, ``evaluation``: hyper-parameter schedules, the
  optimizer's helpers, NaN/inf checks around an update, ``torch.distributed``, evaluation episodes
* ``run``: ``train()`` and ``evaluate()``, ``build()`` and the training loop (``run_loop``)
* ``runs/``: what a run writes and reads around the loop: its directory and ``config.yaml``, checkpoints,
  ``metrics.csv``/TensorBoard/W&B, the callbacks, the up-front memory check
* ``autoscale/``: ``auto_scale()``, the ``num_envs`` that trains fastest within a memory budget, by probing
* ``lightning/``: ``WarpDriveModule`` / ``RolloutDataModule`` for ``lightning.Trainer`` (extra ``lightning``)
* ``trainer``, ``trainers``, ``utils``, ``pytorch_lightning``: WarpDrive 2.7's import paths, re-exports of
  ``warp_drive.compat`` (see ``docs/migrating_from_warpdrive.md``)
"""
