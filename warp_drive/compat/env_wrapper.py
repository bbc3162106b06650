"""WarpDrive 2.7's ``EnvWrapper``: its keywords and names over :class:`warp_drive.env.wrapper.EnvWrapper`.

``EnvWrapper(env_obj=... | env_name=..., env_config=, num_envs=, blocks_per_env=,
env_backend=, env_registrar=, process_id=)``, the attributes ``n_agents``,
``n_envs``, ``cuda_data_manager``, ``cuda_function_manager`` (a
:class:`~warp_drive.compat.managers.CUDAFunctionManager`), ``cuda_function_feed``,
``env_backend``, and WarpDrive's return values (the first ``reset()`` returns
the first observations; resets return ``{}``). As WarpDrive's wrapper did, it
also sets ``env.cuda_data_manager`` and ``env.cuda_function_manager`` on the
env object it wraps.

``env_backend="cpu"`` is the cpu executor, which runs the env's *kernel*
(WarpDrive's "cpu" meant its Python step; call ``env_obj.step(actions)``
directly for that). A WarpDrive-style env object (gym-style class whose
``step()`` launches ``Cuda<Name>Step``) is translated by
:mod:`warp_drive.compat.envs` (:class:`~warp_drive.compat.envs.WarpDriveEnv`), and
stepped through its step binding
(:class:`~warp_drive.compat.envs.WarpDriveStepBinding`, given to the core
wrapper as ``step_binding=``): its own ``step()`` launches its kernel, and its
first episode starts from the state of its Python ``reset()``.

Every core wrapper counts as an instance of this class
(``isinstance(build(config).env, warp_drive.env_wrapper.EnvWrapper)``): a
WarpDrive program handed a wrapper this project built (a run's ``trainer.env``)
accepts it, as WarpDrive's one class did.
"""

from __future__ import annotations

import warnings
from typing import Any

from warp_drive.env import wrapper
from warp_drive.compat.envs import WarpDriveEnv, WarpDriveStepBinding, as_environment, is_warpdrive_env
from warp_drive.compat.managers import CUDAFunctionManager
from warp_drive.runtime.data_manager import DataManager
from warp_drive.env.environment import Environment
from warp_drive.runtime.function_manager import FunctionFeed

# WarpDrive's env_backend values; "numba" has no counterpart here.
WARPDRIVE_BACKENDS = ("pycuda", "cpu", "numba")
# The binaries WarpDrive's build made from its warp_drive/cuda_includes/test_build*.cu for testing_mode.
WARPDRIVE_TEST_BINARIES = ("test_build.fatbin", "test_build.cubin", "test_build_multiblocks.fatbin",
                           "test_build_multiblocks.cubin")


def check_testing_mode(testing_mode: Any, testing_bin_filename: Any, keyword: str = "testing_mode") -> bool:
    """WarpDrive's ``testing_mode`` / ``testing_bin_filename`` (the checker's ``use_gpu_testing_mode``).

    What it meant: the kernels were not compiled at construction but loaded
    from the binary WarpDrive's build had made ahead of time from its
    ``test_build.cu`` (its core kernels plus the example envs' steps), a file
    of ``warp_drive/cuda_bin`` (``testing_bin_filename``, default
    ``test_build.fatbin``). The nearest meaning here, on both executors:
    kernels are built from their ``.cu`` source into the build cache once
    (pycuda: a cubin for the device; cpu: a shared library from the host
    compiler) and loaded from there while the source is unchanged, so a
    testing-mode wrapper loads the very kernels a normal one does, from the
    cache, with the sizes it is given (WarpDrive's test binary fixed 2 envs of
    5 agents). ``testing_bin_filename`` may name WarpDrive's test binaries
    (:data:`WARPDRIVE_TEST_BINARIES`), which held those same kernels; another
    file is refused, since a prebuilt binary is never loaded in its place.
    Returns whether testing mode was asked for.
    """
    if not isinstance(testing_mode, (bool, int)) and testing_mode is not None:
        raise TypeError(f"{keyword} must be True or False, got {testing_mode!r}")
    if testing_bin_filename is not None:
        if not testing_mode:
            raise ValueError(f"testing_bin_filename={testing_bin_filename!r} is only read with {keyword}=True "
                             f"(as in WarpDrive); drop it or set {keyword}=True")
        name = str(testing_bin_filename).replace("\\", "/").rsplit("/", 1)[-1]
        if name not in WARPDRIVE_TEST_BINARIES:
            raise ValueError(
                f"testing_bin_filename={testing_bin_filename!r}: only WarpDrive's own test binaries "
                f"({', '.join(WARPDRIVE_TEST_BINARIES)}) are understood, as the kernels built from source here; "
                f"a prebuilt binary is not loaded in place of the env's .cu source. Drop testing_bin_filename (or "
                f"register the env's kernel source: EnvironmentRegistrar().add_cuda_env_src_path(name, path))")
    return bool(testing_mode)


def make_env(env: Any, env_config: dict | None = None, env_registrar: Any = None) -> Environment:
    """An environment from an instance, a class or a registered name, or a WarpDrive-style env adapted
    by :func:`warp_drive.compat.envs.as_environment`."""
    if is_warpdrive_env(env) or (isinstance(env, type) and not issubclass(env, Environment)
                                 and hasattr(env, "get_data_dictionary")):
        return as_environment(env, env_config, env_registrar=env_registrar)
    return wrapper.make_env(env, env_config)


def _registrar_class(env_registrar: Any, env_name: str) -> type:
    """WarpDrive's ``env_registrar.get(name, backend)``: the class registered for a kernel
    backend ("pycuda") first, since every backend here runs the kernel; else the "cpu" one."""
    has_env = getattr(env_registrar, "has_env", None)
    for key in ("pycuda", "cpu"):
        if has_env is None or has_env(env_name, env_backend=key):
            return env_registrar.get(env_name, env_backend=key)
    raise KeyError(f"the EnvironmentRegistrar has no environment named {env_name!r} (for 'pycuda' or 'cpu'); "
                   "register the class with @EnvironmentRegistrar().add(env_backend='pycuda')")


def resolve_backend_name(backend: Any, env_backend: Any, use_cuda: Any) -> Any:
    """Our ``backend=`` or WarpDrive's ``env_backend=`` / ``use_cuda=`` as one backend name."""
    if use_cuda is not None:
        warnings.warn("EnvWrapper(use_cuda=) is deprecated (WarpDrive 1.8): pass env_backend='pycuda' or 'cpu'",
                      DeprecationWarning, stacklevel=3)
        if env_backend is not None:
            raise ValueError("pass env_backend= or the deprecated use_cuda=, not both")
        env_backend = bool(use_cuda)
    if isinstance(env_backend, bool):  # WarpDrive < 2.0: True -> its CUDA backend, False -> cpu
        env_backend = "pycuda" if env_backend else "cpu"
    if env_backend == "numba":
        raise ValueError(
            "env_backend='numba': WarpDrive's Numba kernels (Numba<Name>Step, Python @cuda.jit) have no executor here. "
            "Write the step as a CUDA C kernel (Cuda<Name>Step in a .cu) and use env_backend='pycuda' on a GPU or "
            "'cpu' (the same kernel compiled for the host)"
        )
    if env_backend is not None and backend is not None and env_backend != backend:
        raise ValueError(f"backend={backend!r} and env_backend={env_backend!r} disagree; pass one of them")
    if isinstance(backend, dict) or isinstance(env_backend, dict):
        raise TypeError("EnvWrapper's third positional argument is backend; WarpDrive's positional order "
                        "(env_obj, env_name, env_config, num_envs, ...) is not supported: pass env_config= by keyword")
    chosen = backend if backend is not None else env_backend
    return "auto" if chosen is None else chosen


def _choose_env(env, env_obj, env_name, env_config, env_registrar) -> Environment:
    """The env from our ``env`` or WarpDrive's ``env_obj`` / ``env_name`` keywords."""
    given = [k for k, v in (("env", env), ("env_obj", env_obj), ("env_name", env_name)) if v is not None]
    if env_obj is not None and env_name is not None:
        given.remove("env_name")  # WarpDrive: env_obj wins; env_name and env_config go unused
    if len(given) != 1:
        raise TypeError("EnvWrapper needs one environment: env (or WarpDrive's env_obj), or env_name with "
                        f"env_config; got {', '.join(given) or 'none'}")
    if env_obj is not None:
        return make_env(env_obj, None if env_name is not None else env_config, env_registrar)
    if env_name is not None:
        if env_registrar is not None:
            return make_env(_registrar_class(env_registrar, env_name), env_config, env_registrar)
        return make_env(env_name, env_config)
    return make_env(env, env_config, env_registrar)


class _AcceptsCoreWrappers(type):
    """``isinstance(core_wrapper, EnvWrapper)`` holds: see the module docstring."""

    def __instancecheck__(cls, instance: Any) -> bool:
        return isinstance(instance, wrapper.EnvWrapper)


class EnvWrapper(wrapper.EnvWrapper, metaclass=_AcceptsCoreWrappers):
    """WarpDrive's ``EnvWrapper``: our keywords (those of :class:`warp_drive.env.wrapper.EnvWrapper`) and WarpDrive's.

    WarpDrive's keywords: ``env_obj`` (as ``env``; ``env_name``/``env_config``
    are then ignored, as WarpDrive did), ``env_name`` with ``env_config`` (from
    ``env_registrar`` when given, else our registry), ``env_backend``
    ("pycuda", "cpu" = the cpu executor, "numba" refused; a bool as its
    deprecated ``use_cuda``; none given means "auto", not WarpDrive's Python
    mode), ``env_registrar`` (also the source of the env's ``.cu`` path),
    ``process_id`` (recorded). ``event_messenger`` is accepted and unused:
    builds go through a process-safe cache, so no process waits for another's
    compile. ``testing_mode`` (WarpDrive's prebuilt test fatbin) is accepted
    with its nearest meaning here (:func:`check_testing_mode`): the kernels
    are loaded from the build cache, where they were built from source.
    """

    def __init__(
        self,
        env: Any = None,
        num_envs: int | None = None,
        backend: Any = None,
        blocks_per_env: int | None = None,
        seed: int | None = None,
        env_config: dict | None = None,
        reset_pool_size: int = 1000,
        validate_actions: bool | None = None,
        *,
        defines: dict | None = None,
        env_obj: Any = None,
        env_name: str | None = None,
        env_backend: Any = None,
        env_registrar: Any = None,
        process_id: int = 0,
        use_cuda: bool | None = None,
        testing_mode: bool = False,
        testing_bin_filename: str | None = None,
        event_messenger: Any = None,
    ):
        if isinstance(num_envs, str):
            raise TypeError(f"EnvWrapper's second positional argument is num_envs, got {num_envs!r}; WarpDrive's "
                            "positional order (env_obj, env_name, ...) is not supported: pass env_name= by keyword")
        self.testing_mode = check_testing_mode(testing_mode, testing_bin_filename)
        backend_name = resolve_backend_name(backend, env_backend, use_cuda)  # bad names fail before any build
        chosen = _choose_env(env, env_obj, env_name, env_config, env_registrar)
        self.process_id = int(process_id)
        binding = WarpDriveStepBinding() if isinstance(chosen, WarpDriveEnv) else None  # None: the contract's
        super().__init__(chosen, 1 if num_envs is None else num_envs, backend_name, blocks_per_env, seed,
                         reset_pool_size=reset_pool_size, validate_actions=validate_actions, defines=defines,
                         step_binding=binding)
        self.cuda_function_feed = FunctionFeed(self.data_manager)
        # As WarpDrive's wrapper did: the env object holds the managers its kernel runs on
        # (WarpDrive programs write env_wrapper.env.cuda_data_manager, ...).
        self.env.cuda_data_manager = self.data_manager
        self.env.cuda_function_manager = self.function_manager

    def _make_function_manager(self, blocks_per_env: int | None) -> CUDAFunctionManager:
        """WarpDrive's function manager (its method names; shared constants a kernel holds built in)."""
        return CUDAFunctionManager(self.num_agents, self.num_envs, blocks_per_env, self.process_id,
                                   backend=self.backend)

    # ------------------------------------------------------------ WarpDrive's return values
    def step_all_envs(self, actions: Any = None) -> None:
        """As the core's; ``actions`` is refused: the kernel reads ``sampled_actions`` on the
        device. (WarpDrive's ``env_backend="cpu"`` took per-agent action dicts and ran the
        env's Python step; its GPU modes ignored the argument.)"""
        if actions is not None:
            raise TypeError(
                f"{self.name}: step_all_envs() takes no actions; write them into wrapper.actions (the device array "
                "'sampled_actions') and read wrapper.obs / rewards / done. WarpDrive's env_backend='cpu' ran the "
                "env's Python step(actions); here 'cpu' runs its kernel on the cpu executor. For the Python step, "
                "call the env object's own step(actions)"
            )
        super().step_all_envs()

    step = step_all_envs

    def reset_all_envs(self) -> dict:
        """As WarpDrive's: the first call returns the first observations, one env's
        ``{agent id: observation}`` (a WarpDrive-style env's own ``reset()`` result;
        for our envs env 0's row of ``observations``, which every env shares unless
        the env has reset pools); later calls return ``{}``, the arrays being updated
        in place on the device."""
        first_call = self._first_reset_pending
        super().reset_all_envs()
        if not first_call:
            return {}
        if isinstance(self.env, WarpDriveEnv):
            return self.env.first_observations
        obs = self.data_manager.pull_data_from_device("observations")
        return {agent: obs[0, agent] for agent in range(self.num_agents)}

    reset = reset_all_envs

    def reset_only_done_envs(self, undo_done_after_reset: bool = True) -> dict:
        """As the core's; returns ``{}`` (WarpDrive's return: the arrays change in place)."""
        super().reset_only_done_envs(undo_done_after_reset)
        return {}

    def custom_reset_all_envs(self, args: list | None = None, block=None, grid=None) -> dict:
        """As the core's; returns ``{}`` as WarpDrive's did."""
        super().custom_reset_all_envs(args, block, grid)
        return {}

    # ------------------------------------------------------------ WarpDrive's names
    @property
    def n_agents(self) -> int:
        return self.num_agents

    @property
    def n_envs(self) -> int:
        return self.num_envs

    @property
    def cuda_data_manager(self) -> DataManager:
        return self.data_manager

    @property
    def cuda_function_manager(self) -> CUDAFunctionManager:
        return self.function_manager

    @property
    def env_backend(self) -> str:
        """The executor's name: "cpu" (kernels built for the host) or "pycuda"."""
        return self.backend.name
