"""DDPG for Box actions: a replay buffer on the device, target networks; ``algorithm``, ``networks``, ``replay``.

A policy with ``algorithm: DDPG`` (every policy of the run: one trainer trains
one family) learns off-policy. One iteration:

1. rollout, ``rollout_length`` steps through the shared rollout
   (``training/rollout.py``): the actor's tanh output ``a`` in ``[-1, 1]^D`` gets
   exploration noise from the on-device sampler (``Sampler.sample`` on a
   policy-owned array ``ddpg_actions_<tag>`` registered with bounds -1..1:
   Gaussian, or Ornstein-Uhlenbeck with ``noise_damping``; its OU state
   restarts with each episode) and is scaled to the Box's bounds,
   ``low + (a + 1) (high - low) / 2``, before the env steps. Until
   ``warmup_steps`` env steps, actions are uniform in the Box instead.
2. update: the rollout is checked for NaN/inf (as PPO's), turned into n-step
   transitions ``(s, a, R, discount, s')`` and written into the policy's
   :class:`ReplayBuffer`; then ``updates_per_iteration`` gradient steps on
   minibatches of ``batch_size`` drawn uniformly from it:

   * critic: ``(Q(s, a) - (R + discount * Q'(s', mu'(s'))))^2`` with the target
     networks ``mu'``, ``Q'``; ``discount`` is ``gamma^k`` after ``k`` steps and
     0 when the episode *terminated* (``_done_ == 1``) inside the window, so a
     *truncated* episode (``_done_ == 2``, the time limit) bootstraps from the
     observation it was cut at (kept before the reset) and a terminated one
     does not;
   * actor: ``-Q(s, mu(s))`` with the critic's parameters frozen, so no
     actor-loss gradient reaches the critic (WarpDrive 2.7 let it leak into the
     critic's gradients, reference §9.16);
   * targets: ``target <- (1 - tau) target + tau online`` after every step.

Where WarpDrive 2.7 differed (reference §4.4, §9.16), this keeps its names and
config keys but not its behaviour: it had no replay buffer (a sliding window
of the last rollout, so it trained on-policy), leaked the actor's gradients
into the critic, and wrapped the target networks in DDP. Here the buffer
holds ``replay_buffer_size`` transitions on the data manager's device, and
in a data-parallel run only the actor's and the critic's gradients are
averaged (the targets follow them locally, identically on every rank).

Policy keys (DDPG's config section): ``tau`` (0.005), ``lr`` (the actor's) and
``critic_lr`` (None: ``lr``), ``replay_buffer_size`` (1,000,000 transitions; one
per agent per env step), ``batch_size`` (256), ``updates_per_iteration`` (None:
``rollout_length``, one gradient step per vectorised env step; off-policy
learning wants more when there are few envs, e.g. ``pendulum_ddpg``'s 32 for 8
steps of 16 envs), ``warmup_steps`` (10,000 env steps of uniform random
actions; no gradient step before them), ``noise_stddev`` (0.1, in units of
*half* the Box's range, i.e. of the actor's tanh output: WarpDrive's
``sampler.params.stddev`` was in action units, so 0.2 on Pendulum's [-2, 2]
is 0.1 here), ``noise_damping`` (None: Gaussian; a number: OU), ``n_step`` (1);
``model.fc_dims`` (actor), ``model.critic_fc_dims`` (None: ``fc_dims``),
``model.activation``, ``model.obs_normalization``; ``max_grad_norm`` clips
each network's gradient. PPO/A2C keys (entropy, GAE, epochs, ...) are refused
when the config loads (the DDPG policy section has none).

``n_step`` > 1 uses n-step returns without off-policy correction (as
WarpDrive): the last ``n_step - 1`` steps of a rollout wait for the next
rollout to complete their windows, so every env step becomes one transition
exactly once.

Checkpoints (``state_dict``) hold the actor, critic, both targets, both
optimizers, the replay buffer *with its contents* (the filled rows, so a
resumed run continues exactly as an uninterrupted one: a 1M-transition
Pendulum buffer is about 36 MB per checkpoint; keep ``replay_buffer_size``
in mind with ``saving.keep_checkpoints``), the n-step carry and the RNGs.
In a data-parallel run the checkpoint holds rank 0's buffer, which every
rank resumes from.
"""

from warp_drive.training.ddpg.algorithm import DDPG, DDPGState
from warp_drive.training.ddpg.networks import DDPGModel, actor_loss_of, critic_loss_of, soft_update
from warp_drive.training.ddpg.replay import ReplayBuffer, nstep_transitions
from warp_drive.training.loop import OnDeviceTrainer


class DDPGTrainer(OnDeviceTrainer):
    """The trainer of DDPG policies: the shared rollout with :class:`DDPG`."""

    algorithm_type = DDPG


__all__ = ["DDPG", "DDPGModel", "DDPGState", "DDPGTrainer", "ReplayBuffer", "actor_loss_of", "critic_loss_of",
           "nstep_transitions", "soft_update"]
