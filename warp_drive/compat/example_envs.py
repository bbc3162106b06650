"""WarpDrive 2.7's kernel-stepped example env class ``CUDATagGridWorld``.

In WarpDrive each example env came twice: a Python class stepped by its own
``step(actions)`` (``TagGridWorld``) and a subclass whose ``step()`` launched
the CUDA kernel (``CUDATagGridWorld``). Here one class is both: this project's
:class:`~example_envs.tag_gridworld.tag_gridworld.TagGridWorld`
declares its kernel for ``EnvWrapper`` and carries the NumPy reference that its
single-env ``reset()``/``step(actions)`` run
(:class:`~warp_drive.env.environment.Environment`). WarpDrive's ``CUDATagGridWorld`` is
therefore a thin subclass that adds only what WarpDrive programs read from it:

* ``env_backend=`` is accepted (WarpDrive's constructors took it) and recorded;
  the wrapper's backend decides what runs the kernel;
* ``CUDATagGridWorld.step_actions``: WarpDrive's action table (action index ->
  (dx, dy)), which its example training script and consistency checker upload
  as the ``__constant__`` symbol ``kIndexToActionArr``. This project's
  ``TagGridWorldStep`` holds that table built in (no symbol to forget to
  upload), and so does ``CudaTagGridWorldStep``, WarpDrive's test-build name
  for the same step; :data:`KERNEL_BUILTIN_CONSTANTS` records it, so that
  :meth:`warp_drive.compat.managers.CUDAFunctionManager.initialize_shared_constants`
  accepts the upload when it equals the built-in table and refuses a
  different one (the kernel could not use it).

``from example_envs.tag_gridworld.tag_gridworld import CUDATagGridWorld`` works
as written: pyproject.toml declares this class as an entry point in the group
named after that module, whose ``__getattr__`` loads it when asked for
(:func:`warp_drive.env.registry.module_extension`), so the example env module
stays free of WarpDrive code and never imports compat.

WarpDrive 2.7.1 has no ``CUDATagContinuous``: its ``TagContinuous`` was one
dual-mode class (Python step or kernel by ``env_backend``), and WarpDrive
programs use ``TagContinuous`` itself, which is this project's class.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from example_envs.tag_gridworld.tag_gridworld import MOVES, TagGridWorld

__all__ = ["CUDATagGridWorld", "KERNEL_BUILTIN_CONSTANTS"]

# WarpDrive's __constant__ symbols that this project's kernels hold built in:
# symbol -> (the kernels that hold it, the only value it can take). Uploading
# that value is a no-op; any other value is refused (the kernel cannot read it).
# CudaTagGridWorldStep is WarpDrive's test-build name of the same step
# (<warp_drive/compat/tag_gridworld_step.cu>, in get_project_root()'s
# test_build.cu); WarpDrive's test uploads the table for it.
KERNEL_BUILTIN_CONSTANTS: dict[str, tuple[tuple[str, ...], np.ndarray]] = {
    "kIndexToActionArr": ((TagGridWorld.step_kernel, "CudaTagGridWorldStep"), MOVES),
}


class CUDATagGridWorld(TagGridWorld):
    """WarpDrive's name for TagGridWorld run by its kernel: the same env, plus ``step_actions``."""

    def __init__(self, *args: Any, env_backend: Any = None, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.env_backend = env_backend
        # WarpDrive's table, in the kernel's own dtype (the data manager takes 32-bit values).
        self.step_actions = MOVES.copy()

