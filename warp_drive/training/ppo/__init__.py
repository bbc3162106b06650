"""A2C and PPO: the algorithm (``algorithm.py``), its pure update (``losses.py``) and its components.

* ``algorithm``: :class:`PPO` -- one iteration: acting, what a rollout records for PPO, GAE and the
  update per policy; ``state``: how a PPO policy is set up (model, optimizer, state, buffers);
* ``losses``: GAE(λ), the A2C / PPO loss and the epoch/minibatch update, pure functions of tensors;
  ``settings``: what they read (the batch, a policy's settings, the update's hooks);
* ``critic``: what a critic reads (``critic_input``: local for IPPO, the env's state or the agents'
  observations side by side for MAPPO); ``value_norm``: MAPPO's value normalisation;
* ``recurrent``: a recurrent model's state and the units (sequences) PPO replays.

What WarpDrive 2.7 got wrong and this does right (§4.4 and §9 of the reference):
its "PPO" reused the current log-probabilities as the old ones, so the ratio
was always 1 and PPO was A2C; its returns dropped the last reward and never
bootstrapped from the state after the batch; and a time-limit truncation was
treated as a termination. Here GAE(λ) bootstraps from ``V(s_{t+1})`` at every
step except where the episode *terminated* (at a truncation from the value of
the final observation, before the reset), the trace is cut at every episode
end; PPO keeps the behaviour log-probabilities, clips the ratio, runs several
epochs over shuffled minibatches, optionally clips the value loss, normalises
advantages per minibatch, adds an entropy bonus, clips the global gradient
norm and can stop early on an approximate-KL threshold; A2C is the same update
with one full-batch step and the plain policy-gradient loss.
"""

from warp_drive.training.loop import OnDeviceTrainer
from warp_drive.training.ppo.algorithm import PPO
from warp_drive.training.ppo.losses import compute_gae, explained_variance, ppo_loss, ppo_update
from warp_drive.training.ppo.settings import Batch, PPOSettings, UpdateHooks
from warp_drive.training.ppo.state import PPOState
from warp_drive.training.ppo.value_norm import ValueNormalizer


class PPOTrainer(OnDeviceTrainer):
    """The trainer of A2C / PPO policies: the shared rollout with :class:`PPO`."""

    algorithm_type = PPO


__all__ = ["PPO", "PPOState", "PPOTrainer", "Batch", "PPOSettings", "UpdateHooks", "ValueNormalizer", "compute_gae",
           "explained_variance", "ppo_loss", "ppo_update"]
