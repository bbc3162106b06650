"""WarpDrive's consistency checker: a WarpDrive-style env's Python step against its kernel.

``EnvironmentCPUvsGPU(dual_mode_env_class=..., env_configs={"name": {...}},
num_envs=3, num_episodes=2).test_env_reset_and_step()`` builds, per named
config, ``num_envs`` Python envs (the class with ``env_backend="cpu"``, stepped
by its own ``step(actions)``) and one ``EnvWrapper`` running the env's kernel
on ``gpu_env_backend`` ("pycuda" on a GPU, "cpu" for this project's cpu
executor, which runs the same kernel). Both sides get the same random actions;
observations, rewards and done flags are compared after the first reset, after
every step, and after done envs are reset on both sides. A value passes when
its absolute difference is below ``consistency_threshold_pct / 100`` or its
relative difference below ``consistency_threshold_pct`` percent (WarpDrive's
rule). The first mismatch raises :class:`~warp_drive.env.consistency.ConsistencyError`
(an ``AssertionError``) naming the config, step, array, env, agent, feature and
both values.

Actions, as in WarpDrive: ``test_env_reset_and_step(seed=S)`` calls
``generate_random_actions(env, num_envs, S)`` at every step, and WarpDrive's
reseeded on every call, so every step of every config gets *the same* actions
(the same values WarpDrive drew: NumPy's legacy ``RandomState(S)`` stream,
without touching the global ``np.random`` as WarpDrive did). A WarpDrive test
suite therefore steps exactly as it did under WarpDrive. With ``seed=None``
each step draws fresh actions. This project's own checker,
:func:`warp_drive.env.consistency.check`, always draws fresh actions every step
from one generator seeded once (its ``seed``): repeating one action vector
leaves most of a step function unexercised, so use it for new envs.

Our own envs (``warp_drive.env.environment.Environment``) are checked against
their NumPy reference by :func:`warp_drive.env.consistency.check`, which compares
every array, not only what the agents see.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from gymnasium import spaces

from warp_drive.compat.envs import to_gymnasium_space
from warp_drive.env.consistency import ConsistencyError
from warp_drive.runtime.data_manager import DONE
from warp_drive.compat.env_wrapper import EnvWrapper, check_testing_mode
from warp_drive.env.environment import Environment
from warp_drive.env.wrapper import POOL_SUFFIX

_OBSERVATIONS, _ACTIONS, _REWARDS = "observations", "sampled_actions", "rewards"
_EPSILON = 1e-10  # keeps the relative difference finite where the Python value is 0


def _agent_action_spaces(env: Any) -> dict[int, spaces.Space]:
    spaces_of = env.action_space
    if callable(spaces_of) and not hasattr(spaces_of, "keys"):  # one of our envs: action_space(agent)
        return {a: spaces_of(a) for a in range(int(env.num_agents))}
    # In the dict's own order, as WarpDrive drew them.
    return {a: to_gymnasium_space(spaces_of[a], f"action_space[{a}]") for a in spaces_of.keys()}


def _random_action(space: spaces.Space, rng: np.random.Generator | np.random.RandomState):
    legacy = isinstance(rng, np.random.RandomState)  # WarpDrive's draws: randint(..., dtype=int32), uniform
    if isinstance(space, spaces.Discrete):
        start, n = int(space.start), int(space.n)
        if legacy:
            return np.int32(rng.randint(low=0, high=n, dtype=np.int32) + start)
        return np.int32(rng.integers(start, start + n))
    if isinstance(space, spaces.MultiDiscrete):
        if legacy:
            draw = rng.randint(low=[0] * len(space.nvec), high=space.nvec, dtype=np.int32)
        else:
            draw = rng.integers(0, space.nvec)
        return (draw + np.asarray(space.start)).astype(np.int32)
    if isinstance(space, spaces.Box):
        return rng.uniform(low=space.low, high=space.high).astype(np.float32)
    raise NotImplementedError(f"random actions for {type(space).__name__} spaces: only Discrete, MultiDiscrete "
                              "and Box are supported")


def generate_random_actions(env: Any, num_envs: int, seed: int | np.random.Generator | None = None) -> list[dict]:
    """One ``{agent id: action}`` dict per env, drawn from each agent's action space.

    ``seed``: an int draws what WarpDrive's ``generate_random_actions(env,
    num_envs, seed)`` drew, NumPy's legacy ``RandomState(seed)`` stream in
    agent order, so every call with the same seed returns the same actions (as
    WarpDrive's, which reseeded on every call); unlike WarpDrive's, the global
    ``np.random`` state is left alone. A ``np.random.Generator``: draws
    continue from it (fresh actions at every call). None: fresh actions.
    Box actions are float32, the dtype the kernel reads.
    """
    if isinstance(seed, np.random.Generator):
        rng: np.random.Generator | np.random.RandomState = seed
    elif seed is None:
        rng = np.random.default_rng()
    else:
        if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)):
            raise TypeError(f"generate_random_actions: seed must be an int, a np.random.Generator or None, "
                            f"got {seed!r}")
        rng = np.random.RandomState(int(seed))
    agent_spaces = _agent_action_spaces(env)
    return [{a: _random_action(space, rng) for a, space in agent_spaces.items()} for _ in range(int(num_envs))]


class EnvironmentCPUvsGPU:
    """Compare a WarpDrive-style env's Python step with its kernel (see the module docstring).

    ``dual_mode_env_class`` (one class for both), or ``cpu_env_class`` and
    ``cuda_env_class``; ``env_configs`` maps a config name to constructor
    keywords; ``env_wrapper`` builds the kernel side (any callable taking
    WarpDrive's EnvWrapper keywords). ``assert_equal_num_agents_per_block`` is
    accepted and unused, as in WarpDrive. ``gpu_env_backend`` names the executor of
    the kernel side; left out, it is ``"auto"`` (PyCUDA where a GPU is present, as
    WarpDrive's default ``"pycuda"`` was, else the cpu executor), so a WarpDrive
    test that relies on the default runs on either machine. The Python side may be
    a WarpDrive-style class or one of this project's envs, stepped by its
    single-env NumPy reference (``Environment.reset``/``step``); for the latter,
    where the kernel side draws its start states from reset pools, each Python
    env starts its episodes from its kernel env's start state (see
    :meth:`_reset_python_env`). ``use_gpu_testing_mode=True`` (with
    an optional ``testing_bin_filename``) is passed to the wrapper as
    WarpDrive's ``testing_mode`` keywords, meaning what
    :func:`warp_drive.compat.env_wrapper.check_testing_mode` says: the kernels
    come from the build cache, built there from their source, on either
    executor. Separate per-policy placeholders
    (``create_separate_placeholders_for_each_policy=True``) and observations
    whose agent dimension is last are refused with a message.
    """

    def __init__(
        self,
        cpu_env_class=None,
        cuda_env_class=None,
        dual_mode_env_class=None,
        env_configs=None,
        num_envs=3,
        blocks_per_env=None,
        assert_equal_num_agents_per_block=False,
        num_episodes=2,
        gpu_env_backend=None,
        use_gpu_testing_mode=False,
        testing_bin_filename=None,
        env_registrar=None,
        env_wrapper=EnvWrapper,
        policy_tag_to_agent_id_map=None,
        create_separate_placeholders_for_each_policy=False,
        obs_dim_corresponding_to_num_agents="first",
    ):
        if dual_mode_env_class is not None:
            self.cpu_env_class = self.cuda_env_class = dual_mode_env_class
        elif cpu_env_class is not None and cuda_env_class is not None:
            self.cpu_env_class, self.cuda_env_class = cpu_env_class, cuda_env_class
        else:
            raise ValueError("give dual_mode_env_class, or both cpu_env_class and cuda_env_class")
        if not isinstance(env_configs, dict) or not env_configs:
            raise ValueError('env_configs must map config names to constructor keywords, e.g. {"default": {}}')
        self.use_gpu_testing_mode = check_testing_mode(use_gpu_testing_mode, testing_bin_filename,
                                                       "use_gpu_testing_mode")
        self.testing_bin_filename = testing_bin_filename
        if create_separate_placeholders_for_each_policy:
            raise NotImplementedError("create_separate_placeholders_for_each_policy=True (observations_<policy> "
                                      "arrays) is not supported: the kernel side has one 'observations', "
                                      "'sampled_actions' and 'rewards' array for all agents")
        if obs_dim_corresponding_to_num_agents != "first":
            raise NotImplementedError(f"obs_dim_corresponding_to_num_agents={obs_dim_corresponding_to_num_agents!r}: "
                                      "only 'first' (observations shaped (agents, features)) is supported")
        self.env_configs = env_configs
        self.num_envs = int(num_envs)
        self.blocks_per_env = blocks_per_env
        self.assert_equal_num_agents_per_block = assert_equal_num_agents_per_block
        self.num_episodes = int(num_episodes)
        self.gpu_env_backend = gpu_env_backend
        self.env_registrar = env_registrar
        self.env_wrapper = env_wrapper
        self.policy_tag_to_agent_id_map = policy_tag_to_agent_id_map
        self.create_separate_placeholders_for_each_policy = False
        self.obs_dim_corresponding_to_num_agents = obs_dim_corresponding_to_num_agents

    # ------------------------------------------------------------ the check
    def test_env_reset_and_step(self, consistency_threshold_pct=1, seed=None) -> None:
        """Run every config for ``num_episodes * episode_length`` steps; raise on the first mismatch."""
        for scenario, env_config in self.env_configs.items():
            print(f"Performing the consistency checks for scenario: {scenario}...")
            cpu_envs = [self._cpu_env(env_config) for _ in range(self.num_envs)]
            env_gpu = self._gpu_env(env_config)
            env_gpu.reset_all_envs()
            obs_cpu = [self._reset_python_env(cpu_envs[e], env_gpu, e) for e in range(self.num_envs)]
            self._check_policy_map(env_gpu)
            self._upload_step_actions(env_gpu)
            check = _Comparison(scenario, env_gpu, consistency_threshold_pct)
            check.observations(obs_cpu, "after the first reset")

            # WarpDrive's semantics: with a seed, generate_random_actions reseeds at every call, so every step
            # gets the same actions; without one, fresh actions every step (see the module docstring).
            rng = np.random.default_rng() if seed is None else None
            for timestep in range(1, self.num_episodes * env_gpu.episode_length + 1):
                actions = generate_random_actions(env_gpu.env, self.num_envs, seed if seed is not None else rng)
                self._push_actions(actions, env_gpu)
                results = [env.step(actions[e]) for e, env in enumerate(cpu_envs)]
                env_gpu.step_all_envs()
                when = f"step {timestep}"
                check.observations([r[0] for r in results], when)
                check.rewards([r[1] for r in results], when)
                done_cpu = np.array([bool(r[2]["__all__"]) for r in results])
                check.done(done_cpu, when)

                env_gpu.reset_only_done_envs()
                if env_gpu.cuda_data_manager.pull_data_from_device(DONE).any():
                    raise ConsistencyError(f"{scenario}: {when}: reset_only_done_envs left done flags set")
                if done_cpu.any():
                    obs_after = [self._reset_python_env(cpu_envs[e], env_gpu, e) if done_cpu[e] else results[e][0]
                                 for e in range(self.num_envs)]
                    check.observations(obs_after, f"{when}, after resetting envs {np.flatnonzero(done_cpu).tolist()}")
            print(f"The CPU and the GPU environment outputs are consistent within {consistency_threshold_pct} percent.")

    # ------------------------------------------------------------ the two sides
    def _cpu_env(self, env_config: dict):
        """A Python-stepped env (the reference): never wrapped, since the wrapper runs kernels.

        The class given to the checker is the class checked; the registrar is
        consulted for kernel sources only (its class registry is process-wide,
        so a name registered elsewhere must not replace the class under test).
        """
        env = self.cpu_env_class(**env_config)
        if hasattr(env, "env_backend"):
            env.env_backend = "cpu"
        return env

    def _gpu_env(self, env_config: dict):
        kwargs = dict(env_obj=self.cuda_env_class(**env_config), num_envs=self.num_envs,
                      blocks_per_env=self.blocks_per_env, env_backend=self.gpu_env_backend,
                      env_registrar=self.env_registrar)
        if self.use_gpu_testing_mode:  # as WarpDrive: the wrapper gets its testing keywords only in testing mode
            kwargs.update(testing_mode=True, testing_bin_filename=self.testing_bin_filename)
        return self.env_wrapper(**kwargs)

    def _check_policy_map(self, env_gpu) -> None:
        policy_map = self.policy_tag_to_agent_id_map
        if policy_map is None:
            return
        agents = sorted(a for ids in policy_map.values() for a in ids)
        if agents != list(range(env_gpu.n_agents)):
            raise ValueError(f"policy_tag_to_agent_id_map must put each agent 0..{env_gpu.n_agents - 1} in exactly "
                             f"one policy; got {policy_map}")

    @staticmethod
    def _upload_step_actions(env_gpu) -> None:
        """WarpDrive's ``kIndexToActionArr``: an env's ``step_actions`` table, uploaded as WarpDrive's checker
        did -- into the kernel's ``__constant__`` symbol, or checked against the table a kernel holds built in
        (:meth:`warp_drive.compat.managers.CUDAFunctionManager.initialize_shared_constants`)."""
        table = getattr(env_gpu.env, "step_actions", None)
        if table is None:
            return
        fm = env_gpu.cuda_function_manager
        declared = any("kIndexToActionArr" in (getattr(m, "constants", None) or ()) for m in fm.modules)
        builtin = getattr(fm, "_builtin_constant", lambda name: None)("kIndexToActionArr") is not None
        if not (declared or builtin):
            return  # the kernel has no such table
        env_gpu.cuda_data_manager.add_shared_constants({"kIndexToActionArr": np.asarray(table, np.int32).ravel()})
        fm.initialize_shared_constants(env_gpu.cuda_data_manager, ["kIndexToActionArr"])

    @staticmethod
    def _reset_python_env(env, env_gpu, env_id: int) -> dict:
        """``env.reset()``; for one of this project's envs whose kernel side draws its start states from reset
        pools on the device, the Python env then starts from kernel env ``env_id``'s start state (the two
        cannot draw the same random starts), so what is compared is the step."""
        obs = env.reset()
        if not isinstance(env, Environment):
            return obs
        dm = env_gpu.cuda_data_manager
        if not any(name.endswith(POOL_SUFFIX) for name in dm.array_names):
            return obs  # fixed starts: the Python reset's state is compared with the kernel's
        arrays = env.single_env_arrays
        for name, value in arrays.items():
            if isinstance(value, np.ndarray) and dm.is_data_on_device(name):
                device = dm.pull_data_from_device(name)
                if value.shape[:1] == (1,) and device.shape == (env_gpu.n_envs, *value.shape[1:]):
                    value[...] = device[env_id:env_id + 1]
        return env.single_env_observations()

    @staticmethod
    def _push_actions(actions: list[dict], env_gpu) -> None:
        device = env_gpu.cuda_data_manager.data_on_device_via_torch(_ACTIONS)
        stacked = np.stack([np.stack([np.asarray(a[agent]) for agent in range(env_gpu.n_agents)]) for a in actions])
        if stacked.size != device.numel():
            raise ValueError(f"{env_gpu.name}: the actions have shape {stacked.shape}, sampled_actions "
                             f"{tuple(device.shape)}: the action spaces do not fit the action array")
        device.copy_(torch.from_numpy(np.ascontiguousarray(stacked.reshape(tuple(device.shape)))))


class _Comparison:
    """WarpDrive's tolerance rule, and messages that say where and what."""

    def __init__(self, scenario: str, env_gpu, threshold_pct: float):
        self.scenario, self.env_gpu, self.threshold_pct = scenario, env_gpu, float(threshold_pct)
        self.backend = env_gpu.env_backend

    def observations(self, obs: list[dict], when: str) -> None:
        cpu = np.stack([np.stack([np.asarray(o[a]) for a in range(self.env_gpu.n_agents)]) for o in obs])
        self._compare(_OBSERVATIONS, cpu, when)

    def rewards(self, rew: list[dict], when: str) -> None:
        cpu = np.array([[r[a] for a in range(self.env_gpu.n_agents)] for r in rew], dtype=np.float64)
        self._compare(_REWARDS, cpu, when)

    def done(self, done_cpu: np.ndarray, when: str) -> None:
        done_gpu = self.env_gpu.cuda_data_manager.pull_data_from_device(DONE) > 0
        if not np.array_equal(done_cpu, done_gpu):
            env = int(np.flatnonzero(done_cpu != done_gpu)[0])
            raise ConsistencyError(
                f"{self.scenario}: {when}: array '_done_', env {env}: Python step done={bool(done_cpu[env])} vs "
                f"kernel ({self.backend}) done={bool(done_gpu[env])}"
            )

    def _compare(self, name: str, cpu: np.ndarray, when: str) -> None:
        gpu = self.env_gpu.cuda_data_manager.pull_data_from_device(name)
        if cpu.shape != gpu.shape:
            raise ConsistencyError(f"{self.scenario}: {when}: array {name!r}: the Python step gives shape {cpu.shape}, "
                                   f"the kernel's array is {gpu.shape}")
        cpu64, gpu64 = cpu.astype(np.float64), gpu.astype(np.float64)
        diff = np.abs(cpu64 - gpu64)
        relative_pct = np.abs((cpu64 - gpu64) / (_EPSILON + cpu64)) * 100.0
        ok = (diff < self.threshold_pct / 100.0) | (relative_pct < self.threshold_pct)
        if ok.all():
            return
        index = tuple(int(i) for i in np.argwhere(~ok)[0])
        feature = f", feature {index[2:]}" if len(index) > 2 else ""
        raise ConsistencyError(
            f"{self.scenario}: {when}: array {name!r}, env {index[0]}, agent {index[1]}{feature}: Python step "
            f"{cpu[index]!r} vs kernel ({self.backend}) {gpu[index]!r}; {int((~ok).sum())} of {ok.size} values "
            f"differ by more than {self.threshold_pct}%"
        )
