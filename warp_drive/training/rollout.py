"""The rollout every algorithm shares: policies over agent groups, device buffers, stepping, episode tallies.

:class:`OnDeviceTrainer`, the base of ``PPOTrainer`` (A2C / PPO) and ``DDPGTrainer``, owns what does
not depend on the algorithm: the policies (each a model, an optimizer and a set of agents, read from
the env's agent groups and their arrays); the rollout buffers ``(T, E * N_policy, ...)`` on the device
(observations, final observations before a reset, which bootstrap truncated episodes, actions,
rewards, done flags); one env step for all envs, the kernels' resets of done envs and the episode
tallies, without a host copy; the iteration clock and phase timers, the NaN/inf policy
(``on_nonfinite``), the state a checkpoint needs, and evaluation episodes (:meth:`run_episodes`).
A subclass makes the policies (``_make_policy``), acts (``_act``), collects a rollout
(``collect_rollout``) and learns (``learn``).

One seed makes a run reproducible on the cpu executor, and checkpoints continue it with the same
metrics. Given a ``Distributed``, a trainer is one data-parallel rank: it starts from rank 0's
parameters and its subclass averages gradients; rollouts, metrics and ``state_dict`` stay local.
"""

from __future__ import annotations

import time
import warnings
from contextlib import contextmanager
from dataclasses import replace
from typing import Any, Callable, Iterator

import numpy as np
import torch
from gymnasium import spaces

from warp_drive import env_vars
from warp_drive.data_feed import DataFeed
from warp_drive.sampler import Sampler
from warp_drive.training.checkpoint import restore_env_arrays
from warp_drive.training.distributed import Distributed
from warp_drive.training.guards import NonFiniteError
from warp_drive.training.policies import (ENV_ACTIONS, Policy, default_policy_map, policy_active, policy_obs,
                                          policy_rewards, write_env_actions)
from warp_drive.wrapper import EnvWrapper

# What to do with a rollout or an update that holds a NaN or inf (the trainer's
# ``on_nonfinite``, or the config key ``trainer.on_nonfinite``).
ON_NONFINITE = ("raise", "skip")


class OnDeviceTrainer:
    """Policies, device rollout buffers and env stepping shared by every algorithm (module docstring)."""

    def __init__(self, env: EnvWrapper, config: Any, policy_agents: dict | None = None,
                 distributed: Distributed | None = None, on_nonfinite: str | None = None):
        """``config``: a :class:`~warp_drive.training.config.RunConfig`.
        ``policy_agents``: {policy tag: agent ids} (default: the
        env's agent groups, or all agents for one policy). ``on_nonfinite``:
        ``"raise"`` (default) stops ``iterate()`` with a :class:`NonFiniteError`
        before the update when a rollout or a loss holds a NaN or inf;
        ``"skip"`` drops that iteration's update and counts it in the metric
        ``nonfinite/skipped_updates``. Defaults to the config's ``trainer.on_nonfinite``.
        """
        self.env = env  # the EnvWrapper
        self.distributed = distributed
        self.config = config
        self.device = env.data_manager.device
        trainer = config.trainer
        self.on_nonfinite = str(on_nonfinite or getattr(trainer, "on_nonfinite", None) or "raise")
        if self.on_nonfinite not in ON_NONFINITE:
            raise ValueError(f"on_nonfinite={self.on_nonfinite!r}; choose one of {', '.join(ON_NONFINITE)}")
        self.skipped_updates = 0
        # The sampler writes in-range discrete actions and Box actions are
        # clipped, so the wrapper's per-step range check (a host sync) is not needed.
        env.validate_actions = False
        self.num_envs = env.num_envs
        self.rollout_length = trainer.rollout_length
        self.batch_env_steps = self.num_envs * self.rollout_length
        self.num_iterations = trainer.total_steps // self.batch_env_steps
        self.iteration = 0
        self.env_steps = 0
        torch.manual_seed(trainer.seed)
        self.generator = torch.Generator().manual_seed(trainer.seed)
        self.sampler = Sampler(env.function_manager, seed=trainer.seed)
        policy_map = policy_agents or default_policy_map(env, list(config.policy))
        self._check_policy_map(policy_map)
        # Plain ints: ids from NumPy arrays (env.taggers) would make an int32 index tensor, which index_copy_ refuses.
        self.policy_agents = {tag: sorted(int(a) for a in ids) for tag, ids in policy_map.items()}
        self.policies = {tag: self._make_policy(tag, ids) for tag, ids in self.policy_agents.items()}
        self._allocate_buffers()
        if distributed is not None:
            for p in self.policies.values():
                distributed.broadcast_module(p.model)
        self.timers = dict.fromkeys(("inference", "sampling", "env_step", "reset", "update"), 0.0)
        self._iteration_started = time.perf_counter()

    # ------------------------------------------------------------------ what an algorithm defines
    def _make_policy(self, tag: str, agent_ids: list[int]) -> Policy:
        """The policy ``tag`` of ``agent_ids``: its model, optimizer and action array."""
        raise NotImplementedError

    def _act(self, p: Policy, obs: torch.Tensor, greedy: bool = False) -> tuple[torch.Tensor, Any, Any]:
        """Choose actions for ``obs`` and write them into the env's action array; return (actions, dist, value)."""
        raise NotImplementedError

    def collect_rollout(self) -> None:
        """``rollout_length`` steps of every env into the buffers."""
        raise NotImplementedError

    def _critic_input(self, p: Policy) -> torch.Tensor | None:
        """A centralised critic's input for the policy's agents now (recorded before each reset as
        ``final_critic_obs`` when the policy has that buffer); None: the critic reads the observations."""
        return None

    def learn(self, optimizers: Any = None, backward: Callable[[torch.Tensor], None] | None = None) -> dict:
        """Learn from the last rollout; return the update's metrics (:meth:`update` times it)."""
        raise NotImplementedError

    def _restart_agents(self, ended: torch.Tensor | None = None) -> None:
        """The envs ``ended (E,)`` (None: all) start new episodes: forget what a policy remembers of them."""

    # ------------------------------------------------------------------ the iteration
    def update(self, optimizers: Any = None, backward: Callable[[torch.Tensor], None] | None = None) -> dict:
        """The algorithm's update on the last rollout (:meth:`learn`), timed as the phase ``update``.
        ``optimizers`` (tag -> optimizer) and ``backward`` (replaces ``loss.backward()``) let the Lightning
        module run the same update through its wrapped optimizers and ``manual_backward``."""
        with self.timed("update"), self.torch_threads_for_update():
            return self.learn(optimizers, backward)

    @contextmanager
    def torch_threads_for_update(self) -> Iterator[None]:
        """``$WARP_DRIVE_TORCH_UPDATE_THREADS=n``: torch gets ``n`` threads during the update, on an executor
        whose kernel pool uses the host's cores (the cpu executor), where torch otherwise keeps the one
        thread ``run.limit_torch_threads`` gives it. The kernels are idle during the update, so a process
        that has the machine to itself gains (TagContinuous, 800 envs, 2 cores: 35k -> 48k env steps/s);
        processes that share the cores lose badly (two pytest workers ran a small CartPole update ~4x
        slower), which is why it is not the default."""
        threads = env_vars.read("WARP_DRIVE_TORCH_UPDATE_THREADS") or 0
        if threads < 1 or not self.env.backend.capabilities.shares_host_cores:
            yield
            return
        before = torch.get_num_threads()
        torch.set_num_threads(threads)
        try:
            yield
        finally:
            torch.set_num_threads(before)

    @contextmanager
    def timed(self, phase: str) -> Iterator[None]:
        """Add the block's wall time to ``timers[phase]`` (reported as ``time/<phase>``): one call per phase."""
        started = time.perf_counter()
        try:
            yield
        finally:
            self.timers[phase] += time.perf_counter() - started

    # ------------------------------------------------------------------ setup
    def _check_policy_map(self, policy_map: dict) -> None:
        seen = [a for ids in policy_map.values() for a in ids]
        if sorted(seen) != list(range(self.env.num_agents)):
            raise ValueError(f"every agent 0..{self.env.num_agents - 1} must belong to exactly one policy; "
                             f"got {policy_map}")
        missing = set(policy_map) - set(self.config.policy)
        if missing:
            raise ValueError(f"policies {sorted(missing)} have no section under 'policy' in the config")

    def _register_discrete_actions(self, policy: Policy) -> None:
        dm = self.env.data_manager
        if "sampled_actions" in policy.owned:  # the env's own array for this group: the sampler writes it
            policy.action_name = policy.owned["sampled_actions"]
            sizes = [int(policy.action_space.n)] if isinstance(policy.action_space, spaces.Discrete) \
                else [int(n) for n in policy.action_space.nvec]
            self.sampler.register_actions(dm, policy.action_name, sizes if len(sizes) > 1 else sizes[0])
            return
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
        """The buffers every algorithm records: observations, final observations, actions, rewards, done flags."""
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
                "rewards": torch.zeros((T, B), device=self.device),
            }
            p.running_return = torch.zeros((E, len(p.agent_ids)), device=self.device)
            p.finished_return_sum = torch.zeros((), device=self.device)
            p.finished_count = torch.zeros((), device=self.device)
            p.finished_team_sum = torch.zeros((), device=self.device)

    # ------------------------------------------------------------------ rollout
    def _step_envs_and_record(self, t: int) -> None:
        """Step every env once; record step ``t``'s rewards, done flags and final observations
        (before the reset: they bootstrap truncated episodes) in every policy's buffers, count
        the episodes that ended, then reset the done envs. Shared by every algorithm's rollout."""
        with self.timed("env_step"):
            self.env.step_all_envs()
        done = self.env.done
        self.done_buffer[t] = done
        ended = (done > 0).unsqueeze(1)
        for p in self.policies.values():
            rewards = policy_rewards(self.env, p)
            p.buffers["rewards"][t] = rewards.reshape(-1)
            p.buffers["final_obs"][t] = policy_obs(self.env, p)  # before the reset: bootstraps truncations
            if "active_after" in p.buffers:  # before the reset: who left the game in this step
                p.buffers["active_after"][t] = policy_active(self.env, p)
            if "final_critic_obs" in p.buffers:
                p.buffers["final_critic_obs"][t] = self._critic_input(p)
            p.running_return += rewards
            per_env = p.running_return.mean(dim=1, keepdim=True)
            p.finished_return_sum += (per_env * ended).sum()
            p.finished_team_sum += (p.running_return.sum(dim=1, keepdim=True) * ended).sum()
            p.finished_count += ended.sum()
            p.running_return *= ~ended
        with self.timed("reset"):
            self.env.reset_only_done_envs()

    # ------------------------------------------------------------------ non-finite values
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

    def episode_metrics(self, reset: bool = True) -> dict[str, float]:
        """Per policy, over the episodes ended since the last call: the mean episodic return of an agent
        (``charts/episodic_return``) and of the policy's agents together (``charts/team_return``: their sum,
        what cooperative-MARL papers and JaxMARL report), and the episodes counted."""
        out = {}
        for p in self.policies.values():
            count = float(p.finished_count)
            out[f"charts/episodic_return/{p.tag}"] = float(p.finished_return_sum) / count if count else float("nan")
            out[f"charts/team_return/{p.tag}"] = float(p.finished_team_sum) / count if count else float("nan")
            out[f"charts/episodes/{p.tag}"] = count
            if reset:
                for tally in (p.finished_return_sum, p.finished_team_sum, p.finished_count):
                    tally.zero_()
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
            "accumulators": {t: (p.running_return.cpu(), p.finished_return_sum.cpu(), p.finished_count.cpu(),
                                 p.finished_team_sum.cpu())
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
            running, total, count, *team = state["accumulators"][tag]  # no team sum in earlier checkpoints
            p.running_return.copy_(running)
            p.finished_return_sum.copy_(total)
            p.finished_count.copy_(count)
            p.finished_team_sum.copy_(team[0] if team else total * running.shape[1])
        self.sampler.load_state_dict(state["sampler"])
        self.env.env_resetter.load_state_dict(state["reset"])
        restore_env_arrays(self.env, state["env_arrays"])  # state only, every array checked (checkpoint.py)
        torch.set_rng_state(state["torch_rng"])
        self.generator.set_state(state["generator"])

    # ------------------------------------------------------------------ evaluation
    @torch.no_grad()
    def run_episodes(self, greedy: bool = True, record: tuple[str, ...] = (), env_id: int = 0,
                     on_step: Callable[[int, dict], None] | None = None, uniform: bool = False) -> dict[str, Any]:
        """Play one episode in every env (from a fresh reset) and return each policy's mean
        episodic return; optionally record arrays of env ``env_id`` at every step.

        Also returned: ``returns`` (policy -> (num_envs, policy agents) episode sums, the
        final step's reward included) and ``steps`` ((num_envs,) steps each env's
        episode took). ``on_step(step, dists)``, if given, runs after each env step
        while env ``env_id``'s episode goes on, before any reset (``dists``: policy ->
        the action distribution the step's actions came from; empty with ``uniform``).
        ``uniform``: the policies are not asked; every agent takes a uniformly random legal action
        (:meth:`_act_uniform`, drawn from the config's seed): the baseline a trained policy is compared with.
        """
        self.env.reset_all_envs()
        self._restart_agents()
        E = self.num_envs
        if not 0 <= int(env_id) < E:
            raise ValueError(f"env_id {env_id} is not an env of this trainer (0..{E - 1})")
        generator = torch.Generator(device=self.device).manual_seed(int(self.config.trainer.seed)) if uniform else None
        returns = {t: torch.zeros((E, len(p.agent_ids)), device=self.device) for t, p in self.policies.items()}
        steps = torch.zeros(E, dtype=torch.int32, device=self.device)
        finished = torch.zeros(E, dtype=torch.bool, device=self.device)
        frames = {name: [self._env_row(name, env_id)] for name in record}
        for step in range(self.env.episode_length):
            dists = {}
            for p in self.policies.values():
                if uniform:
                    self._act_uniform(p, generator)
                    continue
                p.model.eval()
                dists[p.tag] = self._act(p, policy_obs(self.env, p), greedy=greedy)[1]
                p.model.train()
            self.env.step_all_envs()
            active = (~finished).unsqueeze(1)
            for t, p in self.policies.items():
                returns[t] += policy_rewards(self.env, p) * active
            steps += active.squeeze(1).to(steps.dtype)
            if (record or on_step is not None) and not bool(finished[env_id]):
                for name in record:
                    frames[name].append(self._env_row(name, env_id))
                if on_step is not None:
                    on_step(step, dists)
            finished |= self.env.done > 0
            if bool(finished.all()):
                break
            self._restart_agents(self.env.done > 0)
            self.env.reset_only_done_envs()
        self.env.reset_all_envs()
        self._restart_agents()
        return {
            "mean_return": {t: float(r.mean()) for t, r in returns.items()},
            "returns": {t: r.cpu().numpy() for t, r in returns.items()},
            "steps": steps.cpu().numpy(),
            "frames": {name: np.stack(v) for name, v in frames.items()},
        }

    def _act_uniform(self, p: Policy, generator: torch.Generator) -> None:
        """Uniformly random legal actions of the policy's agents into the env's action array: each discrete head
        uniform over the actions the env's action mask allows (all, without a mask), a Box uniform within its
        bounds (refused when a bound is infinite: there is no uniform distribution to draw from)."""
        rows = self.num_envs * len(p.agent_ids)
        space = p.action_space
        if isinstance(space, spaces.Box):
            low = torch.as_tensor(np.asarray(space.low, np.float32).reshape(-1), device=self.device)
            high = torch.as_tensor(np.asarray(space.high, np.float32).reshape(-1), device=self.device)
            if not bool(torch.isfinite(low).all() and torch.isfinite(high).all()):
                raise ValueError(f"policy {p.tag!r}: a uniform random baseline needs finite action bounds, but "
                                 f"its action space is {space}")
            draw = torch.rand((rows, low.numel()), generator=generator, device=self.device)
            write_env_actions(self.env, p, low + (high - low) * draw)
            return
        sizes = [int(space.n)] if isinstance(space, spaces.Discrete) else [int(n) for n in space.nvec]
        mask = self._policy_mask(p)
        weights = torch.ones((rows, sum(sizes)), device=self.device) if mask is None else mask.float()
        heads = []
        for head in weights.split(sizes, dim=1):
            head = torch.where(head.sum(dim=1, keepdim=True) > 0, head, torch.ones_like(head))  # a row masked out
            heads.append(torch.multinomial(head, 1, generator=generator))
        write_env_actions(self.env, p, torch.cat(heads, dim=1))

    def _policy_mask(self, p: Policy) -> torch.Tensor | None:
        """The env's ``action_mask`` rows of this policy's agents ``(E * n, A)`` (or its group's own mask), or
        None (no mask)."""
        if "action_mask" in p.owned:
            own = self.env.data_manager.data_on_device_via_torch(p.owned["action_mask"])
            return own.reshape(self.num_envs * len(p.agent_ids), own.shape[-1])
        mask = self.env.action_mask
        if mask is None:
            return None
        selected = mask if p.covers_all_agents else mask.index_select(1, p.index)
        return selected.reshape(self.num_envs * len(p.agent_ids), mask.shape[-1])

    def evaluation_twin(self, num_envs: int, seed: int) -> "OnDeviceTrainer":
        """A trainer of this class on ``num_envs`` envs of its own, seeded ``seed``, acting with this trainer's
        models (the same modules): evaluation episodes mid-run that leave the training envs, tallies and
        random streams as they were (building it reseeds torch: the global state is put back)."""
        config = replace(self.config, trainer=replace(self.config.trainer, num_envs=int(num_envs), seed=int(seed),
                         total_steps=max(self.config.trainer.total_steps, int(num_envs) * self.rollout_length)))
        devices = [self.device] if torch.device(self.device).type == "cuda" else []
        with torch.random.fork_rng(devices=devices):
            env = EnvWrapper(config.env.name, int(num_envs), backend=self.env.backend.name, seed=int(seed),
                             env_config=dict(config.env.config), reset_pool_size=config.env.reset_pool_size)
            twin = type(self)(env, config, policy_agents=self.policy_agents)
        for tag, p in twin.policies.items():
            p.model = self.policies[tag].model
        return twin

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
