"""``CUDAEnvironmentContext``: the mixin a WarpDrive-style env class inherits.

A WarpDrive env is a gym-style Python class whose ``step()`` launches its CUDA
step kernel itself::

    self.cuda_step(*self.cuda_step_function_feed([...names...]),
                   block=self.cuda_function_manager.block, grid=self.cuda_function_manager.grid)

``EnvWrapper`` (through :mod:`warp_drive.compat.envs`) fills in the four
attributes that call needs -- this project's ``DataManager``,
``FunctionManager``, ``FunctionFeed`` and the loaded ``Cuda<Name>Step`` kernel
-- by calling :meth:`CUDAEnvironmentContext.initialize_step_function_context`.
The three ``get_*_dictionary`` methods return empty feeds so an env overrides
only those it needs.

Unlike WarpDrive's, ``initialize_step_function_context`` lets a failure
propagate (a kernel that is not in the built module names the kernels that
are): WarpDrive logged the error and returned False, and the wrapper then
failed with an assertion that no longer said why.
"""

from __future__ import annotations

from warp_drive.runtime.data_feed import DataFeed


class CUDAEnvironmentContext:
    """The attributes and hooks through which ``EnvWrapper`` gives an env its kernel."""

    def __init__(self):
        self.cuda_data_manager = None
        self.cuda_function_manager = None
        self.cuda_step = None
        self.cuda_step_function_feed = None

    def initialize_step_function_context(
        self,
        cuda_data_manager,
        cuda_function_manager,
        cuda_step_function_feed,
        step_function_name: str,
    ) -> bool:
        """Attach the managers and look up the step kernel ``step_function_name``.

        Returns True (WarpDrive's wrapper asserted on the result); a kernel
        missing from the loaded modules raises ``KeyError`` naming the kernels
        that were built.
        """
        self.cuda_data_manager = cuda_data_manager
        self.cuda_function_manager = cuda_function_manager
        self.cuda_step = cuda_function_manager.get_function(step_function_name)
        self.cuda_step_function_feed = cuda_step_function_feed
        return True

    def get_data_dictionary(self) -> DataFeed:
        """One env's arrays and scalars (no env dimension; the wrapper adds it where a reset needs it)."""
        return DataFeed()

    def get_tensor_dictionary(self) -> DataFeed:
        """Arrays WarpDrive pushed as torch-accessible (every array here is a torch tensor anyway)."""
        return DataFeed()

    def get_reset_pool_dictionary(self) -> DataFeed:
        """Pools of start states (``DataFeed.add_pool_for_reset``); a reset draws one row per done env."""
        return DataFeed()
