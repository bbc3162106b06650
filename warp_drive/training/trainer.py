"""``Trainer``: on-device rollouts and A2C / PPO updates for every policy of an env.

Each policy (e.g. ``tagger`` and ``runner``, or one ``shared``) owns a model, an
optimizer and a set of agents. One iteration:

1. rollout, ``rollout_length`` steps: each policy runs its model on its agents'
   observation tensors, the on-device sampler writes the env's action array in
   place (Box actions are drawn by torch on the device), one launch steps all
   envs, rewards and done flags are recorded into ``(T, E, N_policy)`` device
   buffers, and done envs are reset by kernels — nothing is copied to the host;
2. update: GAE(λ) with the truncation/termination distinction (the value of a
   truncated episode's final observation is the bootstrap), then the A2C or
   PPO update of ``algorithms.policy_update``.

A NaN or inf never stays in the parameters: once per iteration, before the
update, one device reduction checks the rollout's observations, rewards and
values, and every minibatch's loss and gradient norm are checked when the
update's metrics come to the host, in one read at its end (one read per
minibatch would keep the GPU idle while the host queues the next one; with
``target_kl`` each minibatch is read, and checked, before its step).
``iterate()`` then raises :class:`NonFiniteError` naming the array, env, agent,
step and iteration, with the parameters and optimizer state put back as they
were before the update, so nothing bad is saved; ``on_nonfinite="skip"`` (or the config key
``trainer.on_nonfinite``) drops the update instead.

A single seed makes a run reproducible on the cpu executor; checkpoints hold
everything needed to continue with the same metrics (models, optimizers, env
arrays, sampler/reset counters, RNG states, episode accumulators).

Given a ``Distributed`` (``training/distributed.py``), the same Trainer is one
data-parallel rank: it starts from rank 0's parameters, averages gradients
and observation statistics over ranks, and takes the PPO KL early stop on the
all-reduced KL, so all ranks hold identical models. Its rollouts, metrics and
``state_dict`` stay local; ``run.train`` aggregates them.

WarpDrive 2.7's methods (``train()``, ``fetch_episode_states``,
``evaluate_episodes``, model checkpoints, ``perf_stats``) come from the base
class in ``warpdrive_methods.py``, written over this file's rollout, update and
``run_episodes``.
"""

from __future__ import annotations

import copy
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping

import numpy as np
import torch
from gymnasium import spaces

from warp_drive.data_feed import DataFeed
from warp_drive.env_wrapper import EnvWrapper
from warp_drive.environment import TERMINATED, TRUNCATED
from warp_drive.sampler import Sampler
from warp_drive.training.algorithms import Batch, NonFiniteError, compute_gae, policy_update
from warp_drive.training.distributed import Distributed
from warp_drive.training.models import create_model
from warp_drive.training.schedules import Schedule
from warp_drive.training.warpdrive_methods import (PerfStats, WarpDriveTrainerMethods, as_run_config,
                                                  check_warpdrive_keywords)

ENV_ACTIONS = "sampled_actions"
# What to do with a rollout or an update that holds a NaN or inf (Trainer's
# ``on_nonfinite``, or the config key ``trainer.on_nonfinite``).
ON_NONFINITE = ("raise", "skip")


@dataclass
class Policy:
    """A policy's model, optimizer, agents and rollout buffers."""

    tag: str
    config: Any
    agent_ids: list[int]
    index: torch.Tensor
    obs_dim: int
    action_space: spaces.Space
    model: torch.nn.Module
    optimizer: torch.optim.Optimizer
    lr: Schedule
    entropy_coef: Schedule
    action_name: str  # the DataManager array the sampler writes (discrete)
    buffers: dict[str, torch.Tensor] = field(default_factory=dict)
    running_return: torch.Tensor | None = None
    finished_return_sum: torch.Tensor | None = None
    finished_count: torch.Tensor | None = None

    @property
    def discrete(self) -> bool:
        return not isinstance(self.action_space, spaces.Box)

    @property
    def covers_all_agents(self) -> bool:
        return self.agent_ids == list(range(len(self.agent_ids))) and self.action_name == ENV_ACTIONS


def _space_signature(space: spaces.Space) -> tuple:
    if isinstance(space, spaces.Box):
        return ("Box", space.shape, tuple(np.ravel(space.low)), tuple(np.ravel(space.high)))
    if isinstance(space, spaces.MultiDiscrete):
        return ("MultiDiscrete", tuple(space.nvec))
    return ("Discrete", int(space.n))


def default_policy_map(env_wrapper: EnvWrapper, policy_tags: list[str]) -> dict[str, list[int]]:
    """One tag: all agents. Several: they must be the env's agent groups."""
    if len(policy_tags) == 1:
        return {policy_tags[0]: list(range(env_wrapper.num_agents))}
    groups = env_wrapper.env.agent_groups()
    if set(groups) != set(policy_tags):
        raise ValueError(
            f"the config defines policies {sorted(policy_tags)}, but {env_wrapper.name} groups its agents as "
            f"{sorted(groups)}; name the policies after the groups, or use one policy for all agents"
        )
    return {tag: list(groups[tag]) for tag in policy_tags}


class Trainer(WarpDriveTrainerMethods):
    """Trains every policy of one :class:`~warp_drive.env_wrapper.EnvWrapper` with A2C or PPO.

    ``iterate()`` runs one rollout and update (the module docstring has the
    details); ``run.train`` drives it for a whole run, and WarpDrive's
    ``train()`` is here too.
    """

    def __new__(cls, *args, **kwargs):
        """A config whose policies use DDPG builds :class:`~warp_drive.training.ddpg.DDPGTrainer` (WarpDrive's
        ``Trainer(env_wrapper, config=...)`` and ``TrainerDDPG`` alike); ``ddpg.trainer_class`` decides."""
        if cls is Trainer:
            from warp_drive.training.ddpg import trainer_class  # debt (structure issue): ddpg imports this module

            cls = trainer_class(kwargs.get("config", args[1] if len(args) > 1 else None))
        return super().__new__(cls)

    def __init__(self, env_wrapper: EnvWrapper, config, policy_tag_to_agent_id_map: dict | None = None,
                 distributed: Distributed | None = None, on_nonfinite: str | None = None, *,
                 create_separate_placeholders_for_each_policy: bool = False,
                 obs_dim_corresponding_to_num_agents: str = "first", num_devices: int = 1, device_id: int = 0,
                 results_dir: str | None = None, verbose: bool = True):
        """``config``: a :class:`~warp_drive.training.config.RunConfig`, our config
        dict, or a WarpDrive 2.7 run-config dict (tutorial 5's), translated by
        :mod:`warp_drive.compat.run_config` against this ``env_wrapper`` (its
        env, number of envs, episode length and backend); the translation is
        ``self.translation`` (printed when ``verbose``) and saved in the results
        directory by :meth:`train`.

        ``on_nonfinite``: ``"raise"`` (default) stops ``iterate()`` with a
        :class:`NonFiniteError` before the update when a rollout or a loss holds
        a NaN or inf; ``"skip"`` drops that iteration's update and counts it in
        the metric ``nonfinite/skipped_updates``. Defaults to the config's
        ``trainer.on_nonfinite`` when it has one.

        WarpDrive's keywords: ``results_dir`` (the results directory's name under
        ``saving.basedir/name/tag``, default a timestamp) and ``verbose``
        (:meth:`train` prints metrics, the other WarpDrive methods what they do).
        ``create_separate_placeholders_for_each_policy=False`` and
        ``obs_dim_corresponding_to_num_agents="first"`` change nothing: each
        policy reads its agents' rows of the env's ``(E, N, ...)`` arrays, and
        gets its own action array when it drives only some agents. The other
        values are refused: an env whose kernel reads per-policy arrays, or
        observations with the agent dimension last, would be fed wrongly.
        ``num_devices``/``device_id``: one Trainer is one process; a
        data-parallel run is ``warp-drive train --nproc N`` (or torchrun), which
        passes ``distributed``, so ``num_devices > 1`` or ``device_id != 0``
        without it is refused.
        """
        check_warpdrive_keywords(distributed, create_separate_placeholders_for_each_policy,
                                 obs_dim_corresponding_to_num_agents, num_devices, device_id)
        self.verbose = bool(verbose)
        self.results_dir = results_dir
        self.num_devices = 1 if distributed is None else distributed.world_size
        self.device_id = 0 if distributed is None else distributed.rank
        config, self.translation = as_run_config(config, env_wrapper)
        if self.translation is not None and self.verbose:
            print(self.translation.text())
        self.env = env_wrapper
        self.distributed = distributed
        self.config = config
        self.device = env_wrapper.data_manager.device
        trainer = config.trainer
        self.on_nonfinite = str(on_nonfinite or getattr(trainer, "on_nonfinite", None) or "raise")
        if self.on_nonfinite not in ON_NONFINITE:
            raise ValueError(f"on_nonfinite={self.on_nonfinite!r}; choose one of {', '.join(ON_NONFINITE)}")
        self.skipped_updates = 0
        # The sampler writes in-range discrete actions and Box actions are
        # clipped, so the wrapper's per-step range check (a host sync) is not needed.
        env_wrapper.validate_actions = False
        self.num_envs = env_wrapper.num_envs
        self.rollout_length = trainer.rollout_length
        self.batch_env_steps = self.num_envs * self.rollout_length
        self.num_iterations = trainer.total_steps // self.batch_env_steps
        self.iteration = 0
        self.env_steps = 0
        torch.manual_seed(trainer.seed)
        self.generator = torch.Generator().manual_seed(trainer.seed)
        self.sampler = Sampler(env_wrapper.function_manager, seed=trainer.seed)
        policy_map = policy_tag_to_agent_id_map or default_policy_map(env_wrapper, list(config.policy))
        self._check_policy_map(policy_map)
        self.policy_tag_to_agent_id_map = {tag: sorted(int(a) for a in ids) for tag, ids in policy_map.items()}
        # Plain ints: ids from NumPy arrays (env.taggers) would make an int32 index tensor, which index_copy_ refuses.
        self.policies = {tag: self._make_policy(tag, ids) for tag, ids in self.policy_tag_to_agent_id_map.items()}
        self._allocate_buffers()
        if distributed is not None:
            for p in self.policies.values():
                distributed.broadcast_module(p.model)
        self.timers = dict.fromkeys(("inference", "sampling", "env_step", "reset", "update"), 0.0)
        self._iteration_started = time.perf_counter()
        self.perf_stats = PerfStats()
        self._save_dir: Path | None = None
        self._closed = False
        if self.translation is not None and self.translation.checkpoints:
            self.load_model_checkpoint()  # WarpDrive's model_ckpt_filepath: loaded at start

    # ------------------------------------------------------------------ setup
    def _check_policy_map(self, policy_map: dict) -> None:
        seen = [a for ids in policy_map.values() for a in ids]
        if sorted(seen) != list(range(self.env.num_agents)):
            raise ValueError(f"every agent 0..{self.env.num_agents - 1} must belong to exactly one policy; "
                             f"got {policy_map}")
        missing = set(policy_map) - set(self.config.policy)
        if missing:
            raise ValueError(f"policies {sorted(missing)} have no section under 'policy' in the config")

    def _make_policy(self, tag: str, agent_ids: list[int]) -> Policy:
        env = self.env.env
        obs_spaces = {_space_signature(env.observation_space(a)) for a in agent_ids}
        act_spaces = {_space_signature(env.action_space(a)) for a in agent_ids}
        if len(obs_spaces) != 1 or len(act_spaces) != 1:
            raise ValueError(f"policy {tag!r}: its agents must share one observation and one action space")
        obs_dim = int(np.prod(env.observation_space(agent_ids[0]).shape))
        action_space = env.action_space(agent_ids[0])
        cfg = self.config.policy[tag]
        model = create_model(cfg.model, obs_dim, action_space).to(self.device)
        total = self.config.trainer.total_steps
        lr = Schedule.parse(cfg.lr, total)
        optimizer = torch.optim.Adam(model.parameters(), lr=lr.value(0), eps=1e-5)
        policy = Policy(tag, cfg, agent_ids, torch.tensor(agent_ids, device=self.device), obs_dim, action_space,
                        model, optimizer, lr, Schedule.parse(cfg.entropy_coef, total), ENV_ACTIONS)
        if policy.discrete:
            self._register_discrete_actions(policy)
        return policy

    def _register_discrete_actions(self, policy: Policy) -> None:
        dm = self.env.data_manager
        sizes = [int(policy.action_space.n)] if isinstance(policy.action_space, spaces.Discrete) \
            else [int(n) for n in policy.action_space.nvec]
        if policy.agent_ids != list(range(self.env.num_agents)):
            # The sampler writes this policy's own array; the trainer scatters it into the env's.
            policy.action_name = f"{ENV_ACTIONS}_{policy.tag}"
            shape = (self.num_envs, len(policy.agent_ids)) + ((len(sizes),) if len(sizes) > 1 else ())
            if dm.is_data_on_device(policy.action_name):  # a second trainer on the same env wrapper
                if dm.get_shape(policy.action_name) != shape:
                    raise ValueError(f"policy {policy.tag!r}: the env wrapper already holds "
                                     f"{policy.action_name!r} of shape {dm.get_shape(policy.action_name)}, not {shape}")
            else:
                feed = DataFeed()
                feed.add_data(policy.action_name, np.zeros(shape, np.int32))
                dm.push_data_to_device(feed)
        self.sampler.register_actions(dm, policy.action_name, sizes if len(sizes) > 1 else sizes[0])

    def _allocate_buffers(self) -> None:
        T, E = self.rollout_length, self.num_envs
        self.done_buffer = torch.zeros((T, E), dtype=torch.int32, device=self.device)
        for p in self.policies.values():
            B = E * len(p.agent_ids)
            heads = 1 if isinstance(p.action_space, spaces.Discrete) else (
                len(p.action_space.nvec) if p.discrete else int(np.prod(p.action_space.shape)))
            p.buffers = {
                "obs": torch.zeros((T, B, p.obs_dim), device=self.device),
                "final_obs": torch.zeros((T, B, p.obs_dim), device=self.device),
                "actions": torch.zeros((T, B, heads), dtype=torch.int64 if p.discrete else torch.float32,
                                       device=self.device),
                "logprobs": torch.zeros((T, B), device=self.device),
                "values": torch.zeros((T, B), device=self.device),
                "rewards": torch.zeros((T, B), device=self.device),
            }
            p.running_return = torch.zeros((E, len(p.agent_ids)), device=self.device)
            p.finished_return_sum = torch.zeros((), device=self.device)
            p.finished_count = torch.zeros((), device=self.device)

    # ------------------------------------------------------------------ rollout
    def _policy_obs(self, p: Policy) -> torch.Tensor:
        obs = self.env.obs
        selected = obs if p.covers_all_agents else obs.index_select(1, p.index)
        return selected.reshape(self.num_envs * len(p.agent_ids), p.obs_dim)

    def _act(self, p: Policy, obs: torch.Tensor, greedy: bool = False) -> tuple[torch.Tensor, Any, torch.Tensor]:
        """Choose actions for ``obs``, write them into the env's action array; return (actions, dist, value)."""
        started = time.perf_counter()
        dist, value = p.model(obs)
        self.timers["inference"] += time.perf_counter() - started
        started = time.perf_counter()
        dm = self.env.data_manager
        E, n = self.num_envs, len(p.agent_ids)
        env_actions = self.env.actions
        if p.discrete:
            probs = [h.reshape(E, n, -1) for h in dist.probs_per_head()]
            self.sampler.sample(dm, probs if len(probs) > 1 else probs[0], p.action_name, argmax=greedy)
            written = dm.data_on_device_via_torch(p.action_name)
            if not p.covers_all_agents:
                env_actions.index_copy_(1, p.index, written)
            actions = written.reshape(E * n, -1).long()
        else:
            actions = dist.mode() if greedy else dist.sample()
            low = torch.as_tensor(p.action_space.low, device=self.device).reshape(1, -1)
            high = torch.as_tensor(p.action_space.high, device=self.device).reshape(1, -1)
            clipped = torch.maximum(torch.minimum(actions, high), low).reshape(E, n, *env_actions.shape[2:])
            env_actions.index_copy_(1, p.index, clipped.to(env_actions.dtype))
        self.timers["sampling"] += time.perf_counter() - started
        return actions, dist, value

    @torch.no_grad()
    def collect_rollout(self) -> None:
        for t in range(self.rollout_length):
            for p in self.policies.values():
                obs = self._policy_obs(p)
                update_stats = getattr(p.model, "update_obs_normalization", None)  # optional for user models
                if update_stats is not None:
                    update_stats(obs)
                actions, dist, value = self._act(p, obs)
                buf = p.buffers
                buf["obs"][t] = obs
                buf["actions"][t] = actions.reshape(buf["actions"].shape[1:]).to(buf["actions"].dtype)
                buf["logprobs"][t] = dist.log_prob(actions)
                buf["values"][t] = value
            self._step_envs_and_record(t)
        self.env_steps += self.batch_env_steps

    def _step_envs_and_record(self, t: int) -> None:
        """Step every env once; record step ``t``'s rewards, done flags and final observations
        (before the reset: they bootstrap truncated episodes) in every policy's buffers, count
        the episodes that ended, then reset the done envs. Shared by every algorithm's rollout."""
        started = time.perf_counter()
        self.env.step_all_envs()
        self.timers["env_step"] += time.perf_counter() - started
        done = self.env.done
        self.done_buffer[t] = done
        ended = (done > 0).unsqueeze(1)
        for p in self.policies.values():
            rewards = self.env.rewards if p.covers_all_agents else self.env.rewards.index_select(1, p.index)
            p.buffers["rewards"][t] = rewards.reshape(-1)
            p.buffers["final_obs"][t] = self._policy_obs(p)  # before the reset: bootstraps truncations
            p.running_return += rewards
            per_env = p.running_return.mean(dim=1, keepdim=True)
            p.finished_return_sum += (per_env * ended).sum()
            p.finished_count += ended.sum()
            p.running_return *= ~ended
        started = time.perf_counter()
        self.env.reset_only_done_envs()
        self.timers["reset"] += time.perf_counter() - started

    # ------------------------------------------------------------------ update
    def _advantages(self, p: Policy) -> tuple[torch.Tensor, torch.Tensor]:
        buf = p.buffers
        n = len(p.agent_ids)
        done = self.done_buffer.repeat_interleave(n, dim=1)  # (T, E * n): agents of an env in a row
        with torch.no_grad():
            last_value = p.model.value(self._policy_obs(p))
            next_values = torch.cat([buf["values"][1:], last_value.unsqueeze(0)])
            truncated = done == TRUNCATED
            if bool(truncated.any()):  # one host sync per iteration
                next_values[truncated] = p.model.value(buf["final_obs"][truncated])
        cfg = p.config
        return compute_gae(buf["rewards"], buf["values"], next_values, done == TERMINATED, done > 0, cfg.gamma,
                           cfg.gae_lambda)

    def update(self, optimizers: Mapping[str, Any] | None = None,
               backward: Callable[[torch.Tensor], None] | None = None) -> dict[str, float]:
        """The A2C / PPO update of every trained policy on the last rollout.

        ``optimizers`` (policy tag -> optimizer; default: each policy's own)
        and ``backward`` (default ``loss.backward()``) let the Lightning module
        run this same update through Lightning's wrapped optimizers and
        ``manual_backward``.
        """
        started = time.perf_counter()
        metrics: dict[str, float] = {}
        dist = self.distributed
        problem = self._nonfinite_rollout()
        if problem is not None:
            self._on_nonfinite(problem, restore=())
            self._discard_nonfinite_returns()
            metrics["nonfinite/skipped_updates"] = float(self.skipped_updates)
            self.timers["update"] += time.perf_counter() - started
            return metrics
        for p in self.policies.values():
            cfg = p.config
            if dist is not None:
                dist.average_buffers(p.model)  # one rank's obs statistics must not steer the others' forward
            if not cfg.to_train:
                continue
            optimizer = p.optimizer if optimizers is None else optimizers[p.tag]
            # The state before this update, on the device (no host sync), to
            # return to if a later minibatch's loss or gradient is non-finite.
            saved = ({k: v.clone() for k, v in p.model.state_dict().items()},
                     copy.deepcopy(p.optimizer.state_dict()))
            for group in optimizer.param_groups:
                group["lr"] = p.lr.value(self.env_steps)
            advantages, returns = self._advantages(p)
            buf = p.buffers
            batch = Batch(
                obs=buf["obs"].reshape(-1, p.obs_dim),
                actions=buf["actions"].reshape(-1, buf["actions"].shape[-1]),
                logprobs=buf["logprobs"].reshape(-1),
                values=buf["values"].reshape(-1),
                advantages=advantages.reshape(-1),
                returns=returns.reshape(-1),
            )
            try:
                result = policy_update(
                    p.model, optimizer, batch, algorithm=cfg.algorithm, clip_param=cfg.clip_param,
                    clip_value_loss=cfg.clip_value_loss, entropy_coef=p.entropy_coef.value(self.env_steps),
                    vf_coef=cfg.vf_coef, max_grad_norm=cfg.max_grad_norm, normalize_advantage=cfg.normalize_advantage,
                    num_epochs=cfg.num_epochs, num_minibatches=cfg.num_minibatches, target_kl=cfg.target_kl,
                    generator=self.generator,
                    reduce_gradients=None if dist is None else dist.average_gradients,
                    reduce_mean=None if dist is None else dist.mean,
                    backward=backward,
                )
            except NonFiniteError as exc:
                self._on_nonfinite(f"policy {p.tag!r}: {exc}", restore=[(p, saved)])
                metrics["nonfinite/skipped_updates"] = float(self.skipped_updates)
                continue
            for key, value in result.items():
                metrics[f"losses/{key}/{p.tag}"] = value
            metrics[f"charts/learning_rate/{p.tag}"] = optimizer.param_groups[0]["lr"]
        self.timers["update"] += time.perf_counter() - started
        return metrics

    # ------------------------------------------------------------------ non-finite values
    def _nonfinite_rollout(self) -> str | None:
        """None when every observation, reward and value of the last rollout is
        finite, else a description of the first non-finite one.

        One reduction per buffer and one host sync per iteration, before the
        update (nothing is checked per step: the rollout buffers hold every step).
        """
        checks = []
        for p in self.policies.values():
            buf = p.buffers
            for key in ("rewards", "obs", "final_obs", "values"):
                checks.append((p, key, torch.isfinite(buf[key]).all()))
        if bool(torch.stack([flag for _, _, flag in checks]).all()):
            return None
        for p, key, flag in checks:
            if bool(flag):
                continue
            data = p.buffers[key]
            bad = ~torch.isfinite(data)
            where = [int(i) for i in torch.nonzero(bad)[0]]
            step, row = where[0], where[1]
            n = len(p.agent_ids)
            env, agent = row // n, p.agent_ids[row % n]
            value = float(data[tuple(where)])
            count = int(bad.sum())
            array = {"rewards": "rewards", "obs": "observations", "final_obs": "observations",
                     "values": "value predictions"}[key]
            index = f"[env {env}, agent {agent}" + (f", element {where[2]}" if len(where) > 2 else "") + "]"
            when = (f"after rollout step {step} (before the reset)" if key == "final_obs"
                    else f"at rollout step {step}")
            cause = ("the model's parameters are non-finite" if key == "values" else
                     "the env produced it: look for a division by zero, a log or sqrt of a bad value, or an "
                     "overflow in the step kernel (warp_drive.consistency compares the kernel with its NumPy "
                     "reference)")
            return (f"non-finite {array}: {array}{index} = {value} {when} (policy {p.tag!r}; {count} non-finite "
                    f"value(s) in this rollout's {array}). Cause: {cause}")
        return "non-finite values in the rollout"  # pragma: no cover - a flag was False above

    def _on_nonfinite(self, problem: str, restore) -> None:
        """Restore the policies in ``restore`` to their state before this update;
        then raise (``on_nonfinite="raise"``) or count a skipped update."""
        for p, (model_state, optimizer_state) in restore:
            p.model.load_state_dict(model_state)
            p.optimizer.load_state_dict(optimizer_state)
        message = (f"iteration {self.iteration + 1} (after {self.env_steps} env steps): {problem}. The parameters were "
                   "not updated and nothing was saved by this iteration")
        if self.on_nonfinite == "raise":
            raise NonFiniteError(message + "; to drop such iterations instead, use trainer.on_nonfinite=skip")
        self.skipped_updates += 1
        warnings.warn(message + "; update skipped (trainer.on_nonfinite=skip)", RuntimeWarning, stacklevel=3)

    def _discard_nonfinite_returns(self) -> None:
        """After a skipped rollout, the episode tallies must not carry its NaNs forward."""
        for p in self.policies.values():
            for tally in (p.running_return, p.finished_return_sum):
                tally.copy_(torch.where(torch.isfinite(tally), tally, torch.zeros_like(tally)))

    def episode_metrics(self, reset: bool = True) -> dict[str, float]:
        """Mean episodic return per policy since the last call (mean over the policy's agents)."""
        out = {}
        for p in self.policies.values():
            count = float(p.finished_count)
            out[f"charts/episodic_return/{p.tag}"] = float(p.finished_return_sum) / count if count else float("nan")
            out[f"charts/episodes/{p.tag}"] = count
            if reset:
                p.finished_return_sum.zero_()
                p.finished_count.zero_()
        return out

    def iterate(self) -> dict[str, float]:
        """One rollout and one update; returns the iteration's metrics."""
        self.begin_iteration()
        self.collect_rollout()
        return self.end_iteration(self.update())

    def begin_iteration(self) -> None:
        """Zero the phase timers and start the iteration clock.

        ``iterate`` is begin, rollout, update, end; the Lightning module runs
        the same four steps with the rollout in its data loader.
        """
        for key in self.timers:
            self.timers[key] = 0.0
        self._iteration_started = time.perf_counter()

    def end_iteration(self, metrics: dict[str, float]) -> dict[str, float]:
        """Wait for the device, count the iteration, and add SPS and the phase times to ``metrics``."""
        self.env.backend.synchronize()
        elapsed = time.perf_counter() - self._iteration_started
        self.iteration += 1
        self.perf_stats.add(self.timers, elapsed, self.batch_env_steps)
        metrics["charts/SPS"] = self.batch_env_steps / elapsed
        metrics.update({f"time/{k}": v for k, v in self.timers.items()})
        metrics["time/iteration"] = elapsed
        return metrics

    # ------------------------------------------------------------------ state
    def state_dict(self) -> dict:
        dm = self.env.data_manager
        return {
            "iteration": self.iteration,
            "env_steps": self.env_steps,
            "models": {t: p.model.state_dict() for t, p in self.policies.items()},
            "optimizers": {t: p.optimizer.state_dict() for t, p in self.policies.items()},
            "accumulators": {t: (p.running_return.cpu(), p.finished_return_sum.cpu(), p.finished_count.cpu())
                             for t, p in self.policies.items()},
            "sampler": self.sampler.state_dict(),
            "reset": self.env.env_resetter.state_dict(),
            "env_arrays": {n: dm.data_on_device_via_torch(n).cpu().clone() for n in dm.array_names},
            "torch_rng": torch.get_rng_state(),
            "generator": self.generator.get_state(),
        }

    def load_state_dict(self, state: dict) -> None:
        self.iteration, self.env_steps = int(state["iteration"]), int(state["env_steps"])
        for tag, p in self.policies.items():
            p.model.load_state_dict(state["models"][tag])
            p.optimizer.load_state_dict(state["optimizers"][tag])
            running, total, count = state["accumulators"][tag]
            p.running_return.copy_(running)
            p.finished_return_sum.copy_(total)
            p.finished_count.copy_(count)
        self.sampler.load_state_dict(state["sampler"])
        self.env.env_resetter.load_state_dict(state["reset"])
        dm = self.env.data_manager
        for name, values in state["env_arrays"].items():
            dm.data_on_device_via_torch(name).copy_(values)
        torch.set_rng_state(state["torch_rng"])
        self.generator.set_state(state["generator"])

    # ------------------------------------------------------------------ evaluation
    @torch.no_grad()
    def run_episodes(self, greedy: bool = True, record: tuple[str, ...] = (), env_id: int = 0,
                     on_step: Callable[[int, dict], None] | None = None) -> dict[str, Any]:
        """Play one episode in every env (from a fresh reset) and return each policy's mean
        episodic return; optionally record arrays of env ``env_id`` at every step.

        Also returned: ``returns`` (policy -> (num_envs, policy agents) episode sums, the
        final step's reward included) and ``steps`` ((num_envs,) steps each env's
        episode took). ``on_step(step, dists)``, if given, runs after each env step
        while env ``env_id``'s episode goes on, before any reset (``dists``: policy ->
        the action distribution the step's actions came from).
        """
        self.env.reset_all_envs()
        E = self.num_envs
        if not 0 <= int(env_id) < E:
            raise ValueError(f"env_id {env_id} is not an env of this trainer (0..{E - 1})")
        returns = {t: torch.zeros((E, len(p.agent_ids)), device=self.device) for t, p in self.policies.items()}
        steps = torch.zeros(E, dtype=torch.int32, device=self.device)
        finished = torch.zeros(E, dtype=torch.bool, device=self.device)
        frames = {name: [self._env_row(name, env_id)] for name in record}
        for step in range(self.env.episode_length):
            dists = {}
            for p in self.policies.values():
                p.model.eval()
                dists[p.tag] = self._act(p, self._policy_obs(p), greedy=greedy)[1]
                p.model.train()
            self.env.step_all_envs()
            active = (~finished).unsqueeze(1)
            for t, p in self.policies.items():
                rewards = self.env.rewards if p.covers_all_agents else self.env.rewards.index_select(1, p.index)
                returns[t] += rewards * active
            steps += active.squeeze(1).to(steps.dtype)
            if (record or on_step is not None) and not bool(finished[env_id]):
                for name in record:
                    frames[name].append(self._env_row(name, env_id))
                if on_step is not None:
                    on_step(step, dists)
            finished |= self.env.done > 0
            if bool(finished.all()):
                break
            self.env.reset_only_done_envs()
        self.env.reset_all_envs()
        return {
            "mean_return": {t: float(r.mean()) for t, r in returns.items()},
            "returns": {t: r.cpu().numpy() for t, r in returns.items()},
            "steps": steps.cpu().numpy(),
            "frames": {name: np.stack(v) for name, v in frames.items()},
        }

    def _env_row(self, name: str, env_id: int) -> np.ndarray:
        """Env ``env_id``'s slice of array ``name``, on the host (one row copied, not the whole array)."""
        dm = self.env.data_manager
        if not dm.is_data_on_device(name):
            raise KeyError(f"{name!r} is not an array of {self.env.name} (arrays: {', '.join(dm.array_names)})")
        tensor = dm.data_on_device_via_torch(name)
        if tensor.dim() == 0 or tensor.shape[0] != self.num_envs:
            raise ValueError(f"{name!r} has shape {tuple(tensor.shape)}, not one row per env ({self.num_envs}); "
                             f"only per-env arrays can be fetched per episode")
        self.env.backend.synchronize()
        return tensor[env_id].detach().cpu().numpy().copy()
