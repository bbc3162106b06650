"""``EnvironmentReset``: restore done environments on the device.

One launch resets every registered array of every done env (WarpDrive launched
once per array, with a block as wide as the array, which failed past 1024
features). The kernel reads a table of ``{destination, source, words per env,
pool size}`` rows built from the DataManager and cached until its registry
changes. Arrays with a ``*_at_reset`` twin copy the twin's slice; arrays with a
reset pool copy one pool row drawn per env (one Philox draw per env and call,
shared by all its agents and by all pools of the same size, so paired pools
stay consistent). A second tiny launch clears ``_done_`` and ``_timestep_``.
No host round trip is needed: the kernels read ``_done_`` where it lies.

The three kinds of start an env may have, in the order a reset applies them:

* reset twins (``save_copy_and_apply_at_reset=True``): each done env's slice is
  copied back from its ``*_at_reset`` copy -- one fixed start per env;
* pools (``Environment.get_reset_pools``, ``reset_pool_size`` rows drawn on
  the host with the wrapper's seed): each done env copies one row drawn on the
  device -- a fixed set of starts;
* a reset kernel (``Environment.reset_kernel``, :mod:`warp_drive.services.reset_kernel`):
  the env's own kernel draws each start on the device with Philox from
  ``(seed, env, counter)`` and writes its derived arrays -- a new start every
  time. It runs after the twins and pools and may overwrite what they wrote.

``counter`` counts the reset calls that launched anything since construction
or the last reseed; both it and the seed are the :meth:`state_dict` that a
checkpoint saves, so a resumed run draws the starts an uninterrupted one would.

WarpDrive's ``Cuda<Name>Reset`` can be registered and launched on named
arguments (:meth:`EnvironmentReset.custom_reset`); it runs when called, beside
these resets, never as part of them.
"""

from __future__ import annotations

import torch

from warp_drive.runtime.data_manager import DONE, TIMESTEP
from warp_drive.runtime.function_manager import FunctionFeed, FunctionManager
from warp_drive.services.reset_kernel import ResetKernel
from warp_drive.services.sampler import random_seed

_MODES = ("if_done", "force_reset")
BLOCK = 256


def words_per_env(data_manager, name: str) -> int:
    shape = data_manager.get_shape(name)
    return int(torch.Size(shape[1:]).numel())


def pointer_table(rows: list[list[int]], device: torch.device) -> torch.Tensor:
    """Rows of addresses and sizes as the ``unsigned long long`` table the core kernels read."""
    table = torch.tensor(rows, dtype=torch.int64).reshape(len(rows), -1).view(torch.uint64)
    return table.to(device).contiguous()


class EnvironmentReset:
    def __init__(self, function_manager: FunctionManager, seed: int | None = None):
        self.function_manager = function_manager
        self.seed = random_seed() if seed is None else int(seed)
        self.counter = 0
        self._table: torch.Tensor | None = None
        self._table_key = None
        self._block = self._grid = self._threads_per_env = 1
        # Launches bound once per table (arguments checked and packed): a
        # reset is called every step, and checking eight arguments in Python
        # cost ~10x the launch itself for small envs. Only the scalars that
        # change (force, seed, counter) are rewritten before each launch.
        self._reset_launch = None
        self._clear_launch = None
        self._custom_reset = None
        self._custom_reset_feed = None
        self._mark_launch = None
        self._reset_kernel: ResetKernel | None = None
        self._reset_kernel_spec: tuple | None = None

    def init_reset_pool(self, data_manager=None, seed: int | None = None) -> None:
        """Seed the per-env pool draws (kept for WarpDrive compatibility)."""
        self.seed = random_seed() if seed is None else int(seed)
        self.counter = 0

    def _rows(self, data_manager) -> list[list[int]]:
        pools = data_manager.reset_target_to_pool
        rows = []
        for name in data_manager.reset_data_list:
            if name in pools:
                continue  # the pool decides this array's start state
            array = data_manager.data_on_device_via_torch(name)
            twin = data_manager.data_on_device_via_torch(name + "_at_reset")
            rows.append([array.data_ptr(), twin.data_ptr(), words_per_env(data_manager, name), 0])
        for target, pool_name in pools.items():
            array = data_manager.data_on_device_via_torch(target)
            pool = data_manager.data_on_device_via_torch(pool_name)
            rows.append([array.data_ptr(), pool.data_ptr(), words_per_env(data_manager, target), pool.shape[0]])
        return rows

    def _current_table(self, data_manager) -> tuple[torch.Tensor | None, int]:
        # The manager itself (not its id, which a new manager could reuse) and
        # its version: the table holds raw pointers into its tensors.
        key = (data_manager, data_manager.version)
        if self._table_key is None or key[0] is not self._table_key[0] or key[1] != self._table_key[1]:
            rows = self._rows(data_manager)
            self._table = pointer_table(rows, data_manager.device) if rows else None
            widest = max((r[2] for r in rows), default=1)
            # Threads per env: the power of two covering the widest env slice,
            # at most a block; small envs share a block (idle threads still
            # cost a call each on the cpu executor, and lanes on a GPU).
            self._threads_per_env = min(BLOCK, 1 << max(0, widest - 1).bit_length())
            envs_per_block = min(BLOCK // self._threads_per_env, data_manager.num_envs)
            self._block = self._threads_per_env * envs_per_block
            self._grid = -(-data_manager.num_envs // envs_per_block)
            self._bind(data_manager)
            if self._reset_kernel_spec is not None:  # its pointers may be stale too
                self._reset_kernel = ResetKernel(self.function_manager, data_manager, *self._reset_kernel_spec)
            self._table_key = key
        return self._table, 0 if self._table is None else self._table.shape[0]

    def _bind(self, data_manager) -> None:
        fm, n_envs = self.function_manager, data_manager.num_envs
        done = data_manager.data_on_device_via_torch(DONE)
        self._reset_launch = None if self._table is None else fm.bind(
            "wd_reset_arrays",
            [self._table, self._table.shape[0], done, 0, self.seed, self.counter, n_envs, self._threads_per_env],
            grid=(self._grid, 1, 1), block=(self._block, 1, 1))
        flat_block = min(BLOCK, n_envs)
        self._clear_launch = fm.bind(
            "wd_clear_done_flags", [done, data_manager.data_on_device_via_torch(TIMESTEP), n_envs, 0],
            grid=(-(-n_envs // flat_block), 1, 1), block=(flat_block, 1, 1))
        self._mark_launch = fm.bind("wd_mark_done_flags", [done, n_envs],
                                    grid=(-(-n_envs // flat_block), 1, 1), block=(flat_block, 1, 1))

    def use_reset_kernel(self, data_manager, name: str, layout: str, owner: str = "") -> ResetKernel:
        """Launch the env's reset kernel ``name`` (written in thread ``layout``) in every reset from now on,
        after the twins and pools, for the envs being reset (:mod:`warp_drive.services.reset_kernel`). Bound now, so a
        kernel that breaks the contract is refused at construction."""
        self._reset_kernel_spec = (name, layout, owner)
        self._table_key = None  # (re)bind every launch, this one included, to data_manager's arrays now
        self._current_table(data_manager)
        return self._reset_kernel

    @property
    def reset_kernel(self) -> ResetKernel | None:
        """The env's reset kernel (:meth:`use_reset_kernel`), or None."""
        return self._reset_kernel

    def reset_when_done(self, data_manager, mode: str = "if_done", undo_done_after_reset: bool = True,
                        before_reset_kernel=None) -> None:
        """Reset the envs whose ``_done_`` is set (``mode="if_done"``) or all of them (``"force_reset"``):
        twins and pools, then the env's reset kernel, then ``_done_`` and ``_timestep_`` cleared (unless
        ``undo_done_after_reset`` is False; on a forced reset of an env with a reset kernel the flags then stay
        marked). ``before_reset_kernel()``, if given, is called between the twins and pools and the reset
        kernel (the consistency checker reads the state the reset kernel starts from there)."""
        if mode not in _MODES:
            raise ValueError(f"reset mode {mode!r}; choose one of {_MODES}")
        force = int(mode == "force_reset")
        self._current_table(data_manager)
        kernel = self._reset_kernel
        if force and kernel is not None:
            self._mark_launch()  # done[env] != 0 for exactly the envs being reset: all of them
        launched = False
        if self._reset_launch is not None:
            launch = self._reset_launch
            launch.set_scalar(3, force)
            launch.set_scalar(4, self.seed)
            launch.set_scalar(5, self.counter)
            launch()
            launched = True
        if kernel is not None:
            if before_reset_kernel is not None:
                before_reset_kernel()
            kernel.launch(self.seed, self.counter)
            launched = True
        if launched:
            self.counter += 1
        if undo_done_after_reset:
            self._clear_launch.set_scalar(3, force)
            self._clear_launch()

    # ------------------------------------------------------------ custom reset kernels
    def register_custom_reset_function(self, data_manager, reset_function_name: str | None = None) -> bool:
        """Register an env's own reset kernel (WarpDrive's ``Cuda<Name>Reset``), if a loaded module defines it.

        A name that no module defines is skipped (WarpDrive's behaviour: the
        wrapper offers every env's ``Cuda<Name>Reset`` and most envs have none).
        Returns whether a kernel was registered.
        """
        fm = self.function_manager
        if reset_function_name is None or not any(reset_function_name in m.signatures for m in fm.modules):
            return False
        self._custom_reset = fm.get_function(reset_function_name)
        self._custom_reset_feed = FunctionFeed(data_manager)
        return True

    @property
    def custom_reset_function(self):
        """The registered custom reset kernel, or None."""
        return self._custom_reset

    def custom_reset(self, args: list | None = None, block=None, grid=None) -> None:
        """Launch the registered custom reset kernel on ``args`` (array or meta names, as a step's).

        ``block``/``grid`` default to the env geometry of the function manager
        (one block row per env). The kernel decides which envs it resets (it
        may read ``_done_``); this framework's pool and twin resets are
        :meth:`reset_when_done`.
        """
        if self._custom_reset is None:
            raise RuntimeError(
                "no custom reset kernel is registered: define extern \"C\" __global__ void Cuda<Name>Reset(...) "
                "in the env's .cu (the wrapper registers it), or call register_custom_reset_function(data_manager, "
                "name) with a kernel a loaded module defines"
            )
        if args is not None and not isinstance(args, (list, tuple)):
            raise TypeError(f"custom_reset args must be a list of array or meta names; got {type(args).__name__}")
        fm = self.function_manager
        self._custom_reset(*self._custom_reset_feed(args or []),
                           grid=fm.grid if grid is None else grid, block=fm.block if block is None else block)

    def state_dict(self) -> dict:
        return {"seed": self.seed, "counter": self.counter}

    def load_state_dict(self, state: dict) -> None:
        self.seed, self.counter = int(state["seed"]), int(state["counter"])
