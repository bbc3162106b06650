"""The trainer: one :class:`~warp_drive.training.rollout.Rollout` and one algorithm, iterated.

:class:`OnDeviceTrainer` composes them. Its iteration is begin (timers),
``rollout.collect(algorithm)``, ``algorithm.update()``, end (SPS and phase
times). Around that it owns what no algorithm should repeat: the policies'
agents (the env's agent groups), the sampler and the RNGs of one seed, the
NaN/inf policy (``on_nonfinite``), the iteration clock and phase timers, the
checkpoint state, and evaluation episodes on envs of its own.

One seed makes a run reproducible on the cpu executor, and checkpoints continue
it with the same metrics. Given a ``Distributed``, a trainer is one
data-parallel rank: it starts from rank 0's parameters and its algorithm
averages gradients; rollouts, metrics and ``state_dict`` stay local.
"""

from __future__ import annotations

import time
import warnings
from contextlib import contextmanager
from typing import Any, Callable, Iterator

import torch

from warp_drive.runtime import env_vars
from warp_drive.services.sampler import Sampler
from warp_drive.training.algorithm import Algorithm, algorithm_class, algorithms_of
from warp_drive.training.distributed import Distributed
from warp_drive.training.guards import NonFiniteError, describe_nonfinite_rollout
from warp_drive.training.policies import Policy, default_policy_map
from warp_drive.training.rollout import Rollout
from warp_drive.training.runs.env_arrays import restore_env_arrays
from warp_drive.env.wrapper import EnvWrapper

# What to do with a rollout or an update that holds a NaN or inf (the trainer's
# ``on_nonfinite``, or the config key ``trainer.on_nonfinite``).
ON_NONFINITE = ("raise", "skip")
PHASES = ("inference", "sampling", "env_step", "reset", "update")


class OnDeviceTrainer:
    """A rollout and an algorithm on one :class:`~warp_drive.env.wrapper.EnvWrapper` (module docstring).

    ``algorithm``: the :class:`~warp_drive.training.algorithm.Algorithm` subclass (default: the one the
    config's policies name, ``training/algorithm.py``'s table; a subclass may set ``algorithm_type``).
    """

    algorithm_type: type[Algorithm] | None = None

    def __init__(self, env: EnvWrapper, config: Any, policy_agents: dict | None = None,
                 distributed: Distributed | None = None, on_nonfinite: str | None = None,
                 algorithm: type[Algorithm] | None = None):
        """``config``: a :class:`~warp_drive.training.config.RunConfig`. ``policy_agents``: {policy tag:
        agent ids} (default: the env's agent groups, or all agents for one policy). ``on_nonfinite``:
        ``"raise"`` (default) stops ``iterate()`` with a :class:`NonFiniteError` before the update when a
        rollout or a loss holds a NaN or inf; ``"skip"`` drops that iteration's update and counts it in the
        metric ``nonfinite/skipped_updates``. Defaults to the config's ``trainer.on_nonfinite``.
        """
        self.env = env
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
        self.timers = dict.fromkeys(PHASES, 0.0)
        policy_map = policy_agents or default_policy_map(env, list(config.policy))
        self._check_policy_map(policy_map)
        # Plain ints: ids from NumPy arrays (env.taggers) would make an int32 index tensor, which index_copy_ refuses.
        self.policy_agents = {tag: sorted(int(a) for a in ids) for tag, ids in policy_map.items()}
        named = algorithm_class(config)  # the config's policies name one algorithm (a mix is refused there)
        chosen = algorithm or self.algorithm_type or named
        if not issubclass(named, chosen):
            raise ValueError(f"this trainer trains {chosen.__name__}, but the config's policies use "
                             f"{sorted(set(algorithms_of(config).values()))}; build the trainer of their algorithm "
                             f"(warp_drive.training.run.build does)")
        self.algorithm = chosen(self)
        self.policies: dict[str, Policy] = {tag: self.algorithm.make_policy(tag, ids)
                                            for tag, ids in self.policy_agents.items()}
        self.rollout = Rollout(env, self.policies, self.rollout_length, self.timed)
        self.rollout.allocate(self.algorithm)
        if distributed is not None:
            for p in self.policies.values():
                distributed.broadcast_module(p.model)
        self._iteration_started = time.perf_counter()

    def _check_policy_map(self, policy_map: dict) -> None:
        seen = [a for ids in policy_map.values() for a in ids]
        if sorted(seen) != list(range(self.env.num_agents)):
            raise ValueError(f"every agent 0..{self.env.num_agents - 1} must belong to exactly one policy; "
                             f"got {policy_map}")
        missing = set(policy_map) - set(self.config.policy)
        if missing:
            raise ValueError(f"policies {sorted(missing)} have no section under 'policy' in the config")

    # ------------------------------------------------------------------ the iteration
    def iterate(self) -> dict[str, float]:
        """One rollout and one update; returns the iteration's metrics."""
        self.begin_iteration()
        self.collect_rollout()
        return self.end_iteration(self.update())

    def begin_iteration(self) -> None:
        """Zero the phase timers and start the iteration clock. ``iterate`` is begin, rollout, update, end;
        the Lightning module runs the same four steps with the rollout in its data loader."""
        for key in self.timers:
            self.timers[key] = 0.0
        self._iteration_started = time.perf_counter()

    def collect_rollout(self) -> None:
        """``rollout_length`` steps of every env into the rollout's buffers."""
        self.rollout.collect(self.algorithm)
        self.env_steps += self.batch_env_steps

    def update(self, optimizers: Any = None, backward: Callable[[torch.Tensor], None] | None = None) -> dict:
        """The algorithm's update on the last rollout, timed as the phase ``update``. ``optimizers`` (tag ->
        optimizer) and ``backward`` (replaces ``loss.backward()``) let the Lightning module run the same
        update through its wrapped optimizers and ``manual_backward``."""
        with self.timed("update"), self.torch_threads_for_update():
            return self.algorithm.update(optimizers, backward)

    def end_iteration(self, metrics: dict[str, float]) -> dict[str, float]:
        """Wait for the device, count the iteration, and add SPS and the phase times to ``metrics``."""
        self.env.backend.synchronize()
        elapsed = time.perf_counter() - self._iteration_started
        self.iteration += 1
        metrics["charts/SPS"] = self.batch_env_steps / elapsed
        metrics.update({f"time/{k}": v for k, v in self.timers.items()})
        metrics["time/iteration"] = elapsed
        return metrics

    def episode_metrics(self, reset: bool = True) -> dict[str, float]:
        """The episodes ended since the last call, per policy (:meth:`Rollout.episode_metrics`)."""
        return self.rollout.episode_metrics(reset)

    @contextmanager
    def timed(self, phase: str) -> Iterator[None]:
        """Add the block's wall time to ``timers[phase]`` (reported as ``time/<phase>``): one call per phase."""
        started = time.perf_counter()
        try:
            yield
        finally:
            self.timers[phase] += time.perf_counter() - started

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

    def nonfinite(self, problem: str, restore=()) -> None:
        """A NaN or inf was found (``problem`` says where): put the policies' ``(policy, (model state, optimizer
        state))`` pairs in ``restore`` back, then raise (``on_nonfinite="raise"``) or count a skipped update."""
        for p, (model_state, optimizer_state) in restore:
            p.model.load_state_dict(model_state)
            p.optimizer.load_state_dict(optimizer_state)
        message = (f"iteration {self.iteration + 1} (after {self.env_steps} env steps): {problem}. The parameters were "
                   "not updated and nothing was saved by this iteration")
        if self.on_nonfinite == "raise":
            raise NonFiniteError(message + "; to drop such iterations instead, use trainer.on_nonfinite=skip")
        self.skipped_updates += 1
        warnings.warn(message + "; update skipped (trainer.on_nonfinite=skip)", RuntimeWarning, stacklevel=3)

    def rollout_is_finite(self) -> bool:
        """Check the last rollout for NaN/inf (one host sync); when it holds one, handle it as
        :meth:`nonfinite` does (raise, or count the skip) and clear the episode tallies of it."""
        problem = describe_nonfinite_rollout(self.policies.values(), self.rollout.buffers)
        if problem is None:
            return True
        self.nonfinite(problem)
        self.rollout.discard_nonfinite_returns()
        return False

    # ------------------------------------------------------------------ state
    def state_dict(self) -> dict:
        dm = self.env.data_manager
        return {
            "iteration": self.iteration,
            "env_steps": self.env_steps,
            "models": {t: p.model.state_dict() for t, p in self.policies.items()},
            "optimizers": {t: p.optimizer.state_dict() for t, p in self.policies.items()},
            "accumulators": self.rollout.tally_state(),
            "sampler": self.sampler.state_dict(),
            "reset": self.env.env_resetter.state_dict(),
            "env_arrays": {n: dm.data_on_device_via_torch(n).cpu().clone() for n in dm.array_names},
            "torch_rng": torch.get_rng_state(),
            "generator": self.generator.get_state(),
            **self.algorithm.state_dict(),
        }

    def load_state_dict(self, state: dict) -> None:
        self.iteration, self.env_steps = int(state["iteration"]), int(state["env_steps"])
        for tag, p in self.policies.items():
            p.model.load_state_dict(state["models"][tag])
            p.optimizer.load_state_dict(state["optimizers"][tag])
        self.rollout.load_tally_state(state["accumulators"])
        self.sampler.load_state_dict(state["sampler"])
        self.env.env_resetter.load_state_dict(state["reset"])
        restore_env_arrays(self.env, state["env_arrays"])  # state only, every array checked (runs/checkpoint.py)
        torch.set_rng_state(state["torch_rng"])
        self.generator.set_state(state["generator"])
        self.algorithm.load_state_dict(state)

    # ------------------------------------------------------------------ evaluation
    def run_episodes(self, greedy: bool = True, record: tuple[str, ...] = (), env_id: int = 0,
                     on_step: Callable[[int, dict], None] | None = None, uniform: bool = False) -> dict[str, Any]:
        """One episode in every env from a fresh reset (:meth:`Rollout.run_episodes`). ``uniform``: every agent
        takes uniformly random legal actions drawn from the config's seed, the baseline a policy is compared with."""
        generator = torch.Generator(device=self.device).manual_seed(int(self.config.trainer.seed)) if uniform else None
        return self.rollout.run_episodes(self.algorithm, greedy, record, env_id, on_step, generator)

    def evaluation_twin(self, num_envs: int, seed: int) -> "OnDeviceTrainer":
        """A trainer of this class on ``num_envs`` envs of its own, seeded ``seed``, acting with this trainer's
        models (the same modules): evaluation episodes mid-run that leave the training envs, tallies and
        random streams as they were (building it reseeds torch: the global state is put back)."""
        trainer = self.config.trainer.model_copy(update=dict(
            num_envs=int(num_envs), seed=int(seed),
            total_steps=max(self.config.trainer.total_steps, int(num_envs) * self.rollout_length)))
        config = self.config.model_copy(update={"trainer": trainer})
        devices = [self.device] if torch.device(self.device).type == "cuda" else []
        with torch.random.fork_rng(devices=devices):
            env = EnvWrapper(config.env.name, int(num_envs), backend=self.env.backend.name, seed=int(seed),
                             env_config=dict(config.env.config), reset_pool_size=config.env.reset_pool_size)
            twin = type(self)(env, config, policy_agents=self.policy_agents, algorithm=type(self.algorithm))
        for tag, p in twin.policies.items():
            p.model = self.policies[tag].model
        return twin
