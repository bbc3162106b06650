"""WarpDrive-style env objects as this project's :class:`~warp_drive.env.environment.Environment`.

A WarpDrive 2.7 env is a gym-style class (usually a
:class:`~warp_drive.utils.gpu_environment_context.CUDAEnvironmentContext`):
``name``, ``num_agents``, ``episode_length``, ``action_space`` (a dict agent id
-> space), ``reset()`` -> an obs dict, ``get_data_dictionary()`` /
``get_tensor_dictionary()`` / ``get_reset_pool_dictionary()`` holding *one*
env's values, and a ``step()`` that launches ``Cuda<Name>Step`` itself through
``self.cuda_step(*self.cuda_step_function_feed(names), block=..., grid=...)``.

:class:`WarpDriveEnv` translates such an object to our contract, so that
``EnvWrapper`` runs it with its one implementation (data manager, resets,
pools, validation) and only dispatches:

* arrays: WarpDrive's convention -- reset-copied arrays and reset-pool targets
  get the env dimension (``np.stack`` of E copies), everything else is shared
  by every env -- then WarpDrive's 64 -> 32-bit cast, with a warning
  (:func:`warp_drive.compat.managers.warpdrive_cast`);
* placeholders WarpDrive's data loader made and the env did not declare:
  ``observations`` ``(E, N, *obs)`` reset-copied, from ``reset()``;
  ``sampled_actions`` from ``action_space`` (Discrete -> (E, N, 1) int32,
  MultiDiscrete -> (E, N, H) int32, Box -> ``(E, N, *shape)`` float32);
  ``rewards`` (E, N) float32;
* spaces: old ``gym`` spaces become Gymnasium's; observation spaces are
  unbounded float32 Boxes shaped like the first reset's observations (WarpDrive
  set ``env.observation_space`` the same way, and does here too);
* the kernel: ``Cuda<Name>Step`` is built from the registrar's source path (or
  the class attribute ``cuda_source``) with WarpDrive's helper names
  (:func:`warp_drive.compat.cuda_build.build_warpdrive_source`), and handed to
  the env through ``initialize_step_function_context``; the wrapper's step is
  the env's own ``step()`` (:class:`WarpDriveStepBinding`, the step binding
  WarpDrive's ``EnvWrapper`` gives the core one for such an env, which also
  starts the first episode from the state of the env's ``reset()``).

Deliberate differences from WarpDrive (reference §9):

* the env's ``env_backend`` attribute is set to ``"pycuda"``, the value under
  which a WarpDrive env's ``step()`` launches its kernel, whichever executor
  runs that kernel (WarpDrive's ``env_backend="cpu"`` meant "run the Python
  step"; here ``"cpu"`` is the cpu executor, which runs the same kernel);
* ``reset()`` runs once, and the state arrays are read right after it, so the
  first observations always describe the pushed state (WarpDrive called
  ``reset()`` once per env for the observations but kept the first state, so a
  random ``reset()`` gave observations of another state);
* ``_done_ = 1`` written by a WarpDrive kernel at the time limit counts as a
  termination, as in WarpDrive (it had no truncation flag).
"""

from __future__ import annotations

import inspect
from pathlib import Path
from typing import Any, Mapping

import numpy as np
from gymnasium import spaces

from warp_drive.compat.cuda_build import build_warpdrive_source
from warp_drive.compat.managers import warpdrive_cast
from warp_drive.runtime.data_feed import DataFeed
from warp_drive.env.environment import THREADS_PER_AGENT, Environment
from warp_drive.runtime.function_manager import FunctionFeed
from warp_drive.env.wrapper import StepBinding

OBSERVATIONS, ACTIONS, REWARDS = "observations", "sampled_actions", "rewards"
# The value of a WarpDrive env's env_backend under which its step() launches the kernel.
KERNEL_STEP_BACKEND = "pycuda"
_REQUIRED = ("name", "num_agents", "episode_length", "action_space", "reset", "step", "get_data_dictionary")


def is_warpdrive_env(obj: Any) -> bool:
    """True for an object (not a class) shaped like a WarpDrive env class instance."""
    return not isinstance(obj, (type, Environment)) and all(hasattr(obj, a) for a in _REQUIRED)


def to_gymnasium_space(space: Any, what: str) -> spaces.Space:
    """A Gymnasium space for ``space``; old ``gym`` spaces are converted field by field."""
    if isinstance(space, spaces.Space):
        return space
    kind = type(space).__name__
    module = type(space).__module__ or ""
    if not module.startswith("gym."):
        raise TypeError(f"{what} is a {module}.{kind}; expected a gymnasium (or gym) space")
    if kind == "Discrete":
        return spaces.Discrete(int(space.n), start=int(getattr(space, "start", 0)))
    if kind == "MultiDiscrete":
        return spaces.MultiDiscrete(np.asarray(space.nvec), dtype=space.dtype)
    if kind == "MultiBinary":
        return spaces.MultiBinary(space.n)
    if kind == "Box":
        return spaces.Box(low=np.asarray(space.low), high=np.asarray(space.high), shape=space.shape, dtype=space.dtype)
    raise TypeError(f"{what} is a gym {kind} space; only Discrete, MultiDiscrete, MultiBinary and Box convert")


class AgentSpaces(dict):
    """``{agent id: space}`` that can also be called: ``spaces[a]`` (WarpDrive) and ``spaces(a)`` (ours)."""

    def __call__(self, agent_id: int) -> spaces.Space:
        return self[agent_id]


def _class_file_dir(obj: Any) -> Path:
    owner = next((c for c in type(obj).__mro__ if "cuda_source" in vars(c)), type(obj))
    return Path(inspect.getfile(owner)).resolve().parent


def resolve_cuda_source(env: Any, env_registrar: Any = None) -> Path:
    """The ``.cu`` of a WarpDrive env: the registrar's path for its name, else its ``cuda_source``."""
    name = env.name
    path = None
    if env_registrar is not None:
        path = env_registrar.get_cuda_env_src_path(name, env_backend="pycuda")
    if path is None and getattr(env, "cuda_source", None):
        path = Path(env.cuda_source)
        if not path.is_absolute():
            path = _class_file_dir(env) / path
    if path is None:
        raise ValueError(
            f"{name}: no CUDA source for its step kernel Cuda{name}Step. Fix: register it with "
            f"EnvironmentRegistrar().add_cuda_env_src_path({name!r}, '/abs/path/{name.lower()}_step.cu') and pass "
            "env_registrar= to EnvWrapper, or set the class attribute cuda_source to the .cu path"
        )
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{name}: CUDA source {path} does not exist")
    return path


class WarpDriveEnv(Environment):
    """One WarpDrive-style env object, seen through this project's Environment contract.

    Attributes the contract does not define are looked up on the wrapped env,
    so WarpDrive code reading ``env_wrapper.env.<attribute>`` keeps working.
    """

    thread_layout = THREADS_PER_AGENT

    def __init__(self, env: Any, env_registrar: Any = None):
        missing = [a for a in _REQUIRED if not hasattr(env, a)]
        if missing:
            raise TypeError(
                f"{type(env).__name__} is neither a warp_drive Environment nor a WarpDrive-style env: it lacks "
                f"{', '.join(missing)}. A WarpDrive env class defines name, num_agents, episode_length, "
                "action_space (dict agent -> space), reset(), step() and get_data_dictionary()"
            )
        self.warpdrive_env = env
        if not env.name:
            raise ValueError(f"{type(env).__name__}.name is empty; its kernels are named Cuda<name>Step")
        self.name = str(env.name)
        self.num_agents = int(env.num_agents)
        self.episode_length = int(env.episode_length)
        self.step_kernel = f"Cuda{self.name}Step"
        # WarpDrive's own reset kernel, launched by hand (EnvWrapper.custom_reset_all_envs), never by the
        # framework's resets: not Environment.reset_kernel, which the framework launches at every reset.
        self.custom_reset_kernel = f"Cuda{self.name}Reset"
        self.env_registrar = env_registrar
        self._actions = self._action_spaces(env.action_space)
        # One reset; the state arrays are read after it (get_data_dictionary), so
        # the observations pushed below describe that very state. What WarpDrive's
        # EnvWrapper.reset_all_envs() returns the first time.
        self.first_observations = env.reset()
        self._obs = self._observation_array(self.first_observations)
        self._observations = AgentSpaces(
            {a: spaces.Box(-np.inf, np.inf, self._obs.shape[1:], np.float32) for a in range(self.num_agents)}
        )
        env.observation_space = self._observations  # as WarpDrive's wrapper did
        self._source = resolve_cuda_source(env, env_registrar)

    @property
    def cuda_defines(self) -> Mapping[str, str]:  # type: ignore[override]
        """The WarpDrive env's own compile-time defines, if it declares any."""
        return getattr(self.warpdrive_env, "cuda_defines", None) or {}

    def __getattr__(self, attribute: str) -> Any:
        env = self.__dict__.get("warpdrive_env")
        if env is None or attribute.startswith("__"):
            raise AttributeError(attribute)
        return getattr(env, attribute)

    # ------------------------------------------------------------ the env's own Python API
    def reset(self, *args: Any, **kwargs: Any) -> Any:
        """The WarpDrive env's own ``reset()`` (not Environment's single-env reference)."""
        return self.warpdrive_env.reset(*args, **kwargs)

    def step(self, *args: Any, **kwargs: Any) -> Any:
        """The WarpDrive env's own ``step()`` (with its ``env_backend``: the kernel or its Python step)."""
        return self.warpdrive_env.step(*args, **kwargs)

    # ------------------------------------------------------------ spaces
    def _action_spaces(self, action_space: Any) -> AgentSpaces:
        if not hasattr(action_space, "keys"):
            raise TypeError(
                f"{self.name}.action_space must map each agent id 0..{self.num_agents - 1} to a space; "
                f"got {type(action_space).__name__}"
            )
        if sorted(action_space.keys()) != list(range(self.num_agents)):
            raise ValueError(
                f"{self.name}.action_space has keys {sorted(action_space.keys())}; expected the agent ids "
                f"0..{self.num_agents - 1}"
            )
        return AgentSpaces(
            {a: to_gymnasium_space(action_space[a], f"{self.name}.action_space[{a}]") for a in range(self.num_agents)}
        )

    @property
    def observation_space(self) -> AgentSpaces:  # type: ignore[override]
        return self._observations

    @property
    def action_space(self) -> AgentSpaces:  # type: ignore[override]
        return self._actions

    def _observation_array(self, obs: Any) -> np.ndarray:
        """(N, *obs shape) from the obs dict of ``reset()``."""
        if not isinstance(obs, dict) or sorted(obs.keys()) != list(range(self.num_agents)):
            keys = sorted(obs.keys()) if isinstance(obs, dict) else type(obs).__name__
            raise ValueError(
                f"{self.name}.reset() returned {keys}; expected a dict with one observation per agent id "
                f"0..{self.num_agents - 1}"
            )
        if any(isinstance(o, dict) for o in obs.values()):
            raise NotImplementedError(
                f"{self.name}.reset() returns dict observations (WarpDrive's observations_<key> arrays); only "
                "array observations are supported: concatenate the keys into one array per agent, or declare "
                "'observations' in get_data_dictionary()"
            )
        shapes = {np.shape(o) for o in obs.values()}
        if len(shapes) != 1:
            raise ValueError(f"{self.name}.reset(): the agents' observations have different shapes {sorted(shapes)}; "
                             "one 'observations' array needs one shape")
        return np.stack([np.asarray(obs[a]) for a in range(self.num_agents)])

    # ------------------------------------------------------------ data
    def get_data_dictionary(self, num_envs: int) -> DataFeed:
        """The env's arrays with WarpDrive's env-dimension convention, its pools and the
        placeholders it did not declare, cast to 32 bits as WarpDrive did (with a warning).
        The pools are the env's own (``get_reset_pool_dictionary``), pushed here: ``EnvWrapper.reseed``
        re-seeds their draws and leaves them as they are."""
        env = self.warpdrive_env
        declared: dict[str, dict] = {}
        for method in ("get_data_dictionary", "get_tensor_dictionary", "get_reset_pool_dictionary"):
            part = getattr(env, method, None)
            for name, spec in (part() if part is not None else {}).items():
                if name in declared:
                    raise ValueError(f"{self.name}: {name!r} is declared twice (in {method} and before it)")
                declared[name] = {"data": spec["data"], "attributes": dict(spec.get("attributes") or {})}
        pools = {name: spec["attributes"]["reset_target"] for name, spec in declared.items()
                 if spec["attributes"].get("is_reset_pool")}
        for pool, target in pools.items():
            if target not in declared:
                raise ValueError(f"{self.name}: reset pool {pool!r} targets {target!r}, which neither "
                                 "get_data_dictionary() nor get_tensor_dictionary() declares")
            if declared[target]["attributes"].get("save_copy_and_apply_at_reset"):
                raise ValueError(f"{self.name}: {target!r} has the reset pool {pool!r} and is also "
                                 "save_copy_and_apply_at_reset; a reset takes one or the other (drop the flag)")
        targets = set(pools.values())
        for name, spec in declared.items():
            if spec["attributes"].get("save_copy_and_apply_at_reset") or name in targets:
                spec["data"] = np.stack([np.asarray(spec["data"])] * int(num_envs))
        feed = DataFeed()
        feed.update(declared)
        self._add_placeholders(feed, int(num_envs))
        return warpdrive_cast(feed)

    def _add_placeholders(self, feed: DataFeed, num_envs: int) -> None:
        E, N = num_envs, self.num_agents
        if OBSERVATIONS not in feed:
            feed.add_data(OBSERVATIONS, np.stack([self._obs] * E), save_copy_and_apply_at_reset=True)
        if ACTIONS not in feed:
            feed.add_data(ACTIONS, self._action_placeholder(E))
        if REWARDS not in feed:
            feed.add_data(REWARDS, np.zeros((E, N), np.float32))

    def _action_placeholder(self, num_envs: int) -> np.ndarray:
        """WarpDrive's data-loader shapes: Discrete (E, N, 1), MultiDiscrete (E, N, H) int32; Box (E, N, *shape)."""
        layouts = set()
        for space in self._actions.values():
            if isinstance(space, spaces.Discrete):
                layouts.add(((1,), np.int32))
            elif isinstance(space, spaces.MultiDiscrete):
                layouts.add(((len(space.nvec),), np.int32))
            elif isinstance(space, spaces.Box):
                layouts.add((tuple(space.shape), np.float32))
            else:
                raise TypeError(f"{self.name}: action space {space} is not Discrete, MultiDiscrete or Box; "
                                f"declare {ACTIONS!r} in get_data_dictionary()")
        if len(layouts) != 1:
            raise ValueError(
                f"{self.name}: the agents' action spaces need different {ACTIONS!r} layouts ({sorted(map(str, layouts))});"
                f" declare {ACTIONS!r} in get_data_dictionary() with a layout the kernel reads"
            )
        (shape, dtype), = layouts
        return np.zeros((num_envs, self.num_agents, *shape), dtype)

    # ------------------------------------------------------------ kernel
    def cuda_source_path(self) -> Path:  # type: ignore[override]
        return self._source

    # ------------------------------------------------------------ reference
    def reference_step(self, arrays: dict[str, np.ndarray]) -> None:
        raise NotImplementedError(
            f"{self.name} is a WarpDrive-style env: its reference is its Python step(actions); compare it with "
            "warp_drive.env_cpu_gpu_consistency_checker.EnvironmentCPUvsGPU"
        )


class WarpDriveStepBinding(StepBinding):
    """How the core ``EnvWrapper`` steps and first starts a :class:`WarpDriveEnv` (given by WarpDrive's
    ``EnvWrapper`` as ``step_binding=``): the env's step is its own ``step()``, which launches its kernel.

    * ``bind``: the env's ``.cu`` built with WarpDrive's helper names
      (:func:`~warp_drive.compat.cuda_build.build_warpdrive_source`), its ``env_backend`` set to the kernel
      mode, its kernel handed over through ``initialize_step_function_context`` (or set as WarpDrive's
      context did), and ``step()`` returned as the step launch;
    * ``host_first_reset``: the pushed arrays are the state of the Python ``reset()`` that gave the first
      observations, so the first episode starts from them, as WarpDrive's did, rather than from a device
      reset (which would draw pool rows the first observations do not describe).
    """

    host_first_reset = True

    def bind(self, wrapper: Any) -> tuple[Any, list]:
        adapted: WarpDriveEnv = wrapper.env
        name, kernel, fm = adapted.name, adapted.step_kernel, wrapper.function_manager
        build_warpdrive_source(fm, adapted.cuda_source_path(), defines=wrapper.defines or None)
        env = adapted.warpdrive_env
        if hasattr(env, "env_backend"):
            env.env_backend = KERNEL_STEP_BACKEND
        feed = FunctionFeed(wrapper.data_manager)
        initialize = getattr(env, "initialize_step_function_context", None)
        if initialize is not None:
            ready = initialize(
                cuda_data_manager=wrapper.data_manager,
                cuda_function_manager=fm,
                cuda_step_function_feed=feed,
                step_function_name=kernel,
            )
            if ready is False:
                raise RuntimeError(f"{name}.initialize_step_function_context() failed for {kernel}")
        else:
            env.cuda_data_manager, env.cuda_function_manager = wrapper.data_manager, fm
            env.cuda_step_function_feed = feed
            env.cuda_step = fm.get_function(kernel)

        def step() -> None:
            result = env.step()
            if result is not None:
                raise RuntimeError(
                    f"{name}.step() returned {type(result).__name__}; in kernel mode it launches "
                    f"{kernel} and returns None. Is its step() keyed on env_backend == {KERNEL_STEP_BACKEND!r}?"
                )

        return step, []  # the env's step() picks its own arguments: no names of ours to check


def as_environment(env: Any, env_config: dict | None = None, env_registrar: Any = None) -> Environment:
    """``env`` (a WarpDrive-style instance, or its class with ``env_config``) as an Environment."""
    if isinstance(env, type):
        env = env(**(env_config or {}))
    elif env_config:
        raise ValueError("env_config applies when the environment is given as a class or a name, not an instance")
    return WarpDriveEnv(env, env_registrar=env_registrar)
