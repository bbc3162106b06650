"""An env's own reset kernel: random starts drawn on the device (``Environment.reset_kernel``).

Reset twins restore one fixed start, and pools hand out a fixed set of host-drawn starts (a procedurally
generated env trained on ``reset_pool_size`` maps). A reset kernel draws every start anew on the device and
writes what follows from it (first observation, action mask, state) there too: unbounded variety, no host
pools, and the same bits on every executor. The user writes, in the env's own ``.cu``::

    extern "C" __global__ void MyEnvReset(float* pos, float* observations, const int* done, int num_agents,
                                          unsigned long long reset_seed, unsigned long long reset_count) {
      const int env = wd_env_id();
      if (!done[env]) return;  // the framework resets exactly the envs whose done flag is set
      WD_FOR_EACH_AGENT(a, num_agents) { ... wd_reset_uniform(reset_seed, reset_count, env, k) ... }
    }

The contract, which :class:`ResetKernel` checks at construction:

* its parameters bind by name as the step's do (``function_manager.arguments_by_name``: the env's arrays and
  scalars, ``done``/``_done_`` & co.), plus two names the framework gives a reset kernel alone, both
  ``unsigned long long``: ``reset_seed`` (the wrapper's seed; ``EnvWrapper.reseed`` changes it) and
  ``reset_count`` (how many reset calls came before this one since construction or the last reseed; a
  checkpoint holds it). A ``(reset_count, env)`` pair names one start: each env is reset at most once a call;
* it takes ``const int* done`` and resets only the envs with ``done[env] != 0``: the framework guarantees
  that these are exactly the envs being reset (the done envs, or, on a forced reset, every env: the flags of
  the others are set to 1 first). A kernel without ``done`` would reset envs mid-episode, so it is refused;
* it runs after the twins and pools (so it may start from what they restored and overwrite any of it) and
  before ``_done_`` and ``_timestep_`` are cleared, on the same stream;
* geometry: the env's own thread layout, as the step -- one block per env with ``wd_env_id()`` /
  ``wd_agent_id()`` and ``WD_FOR_EACH_AGENT`` (``THREADS_PER_AGENT``, ``AGENT_PHASES``), sized from the reset
  kernel's own limits; for ``THREADS_PER_ENV`` a flat launch of one thread per env
  (``env = wd_global_thread_id()``, guarded by ``env < n_envs``);
* draws: ``wd_reset_bits / _uniform / _uniform_in / _int(reset_seed, reset_count, env, k, ...)``
  (``philox.h``), pure functions that every thread of an env may recompute; ``warp_drive.runtime.philox`` gives the
  same numbers in NumPy for a ``reference_reset``;
* the arrays it may write are those of its non-const pointer parameters (:attr:`ResetKernel.writes`): state
  for checkpoints, and the arrays the consistency checker compares with ``reference_reset``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from warp_drive.runtime.data_values import DONE, RESET_COUNT, RESET_SEED, TIMESTEP
from warp_drive.runtime.function_manager import FunctionFeed, FunctionManager, arguments_by_name

RESERVED = (RESET_SEED, RESET_COUNT)


class ResetKernel:
    """Kernel ``name`` of a loaded module bound by name to ``data_manager``'s arrays for ``layout``; call
    :meth:`launch` with the seed and the count of the reset call."""

    def __init__(self, function_manager: FunctionManager, data_manager: Any, name: str, layout: str,
                 owner: str = ""):
        self.name, who = name, f"{owner}: " if owner else ""
        if not any(name in m.signatures for m in function_manager.modules):
            raise ValueError(f"{who}reset_kernel {name!r} is not defined by the env's kernels. Fix: define "
                             f"extern \"C\" __global__ void {name}(...) in its cuda_source, or drop reset_kernel")
        signature = function_manager.get_function(name).signature
        params = signature.params
        clash = [n for n in RESERVED if n in (p.name for p in params)
                 and (data_manager.is_data_on_device(n) or data_manager.has_meta(n))]
        if clash:
            raise ValueError(f"{who}{clash[0]!r} is the framework's name in a reset kernel (the reset's "
                             f"{'seed' if clash[0] == RESET_SEED else 'call count'}), but the env defines it too. "
                             f"Fix: rename the env's {clash[0]!r}")
        for param in params:
            if param.name in RESERVED and (param.pointer or param.dtype != np.dtype(np.uint64)):
                raise ValueError(f"{who}reset kernel {name}'s parameter '{param.describe()}': the framework passes "
                                 f"{param.name!r} as a 64-bit count. Fix: declare it 'unsigned long long "
                                 f"{param.name}'")
        names = arguments_by_name(signature, data_manager, owner=owner, extra={n: 0 for n in RESERVED})
        bound = [n[0] if isinstance(n, tuple) else n for n in names]
        if DONE not in bound:
            raise ValueError(f"{who}reset kernel {name} takes no done flags, so it cannot tell the envs being reset "
                             f"from those mid-episode. Fix: add 'const int* done' and return where done[env] == 0")
        self._indices = {n: i for i, p in enumerate(params) for n in RESERVED if p.name == n}
        self.writes = tuple(dict.fromkeys(
            b for b, p in zip(bound, params)
            if p.pointer and not p.read_only and isinstance(b, str) and b not in (DONE, TIMESTEP)))
        self._launch = function_manager.bind_env_kernel(name, FunctionFeed(data_manager)(names), layout)

    def launch(self, seed: int, count: int) -> None:
        """One launch for the reset call ``count`` under ``seed`` (the kernel reads the done flags itself)."""
        for reserved, value in ((RESET_SEED, seed), (RESET_COUNT, count)):
            if reserved in self._indices:
                self._launch.set_scalar(self._indices[reserved], int(value))
        self._launch()
