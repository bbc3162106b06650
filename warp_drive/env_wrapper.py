"""WarpDrive 2.7's import path ``warp_drive.env_wrapper``: its ``EnvWrapper`` (keywords ``env_obj``,
``env_name``, ``env_backend``, ... and names ``cuda_data_manager``, ...), written in
:mod:`warp_drive.compat.env_wrapper` over this project's :class:`warp_drive.env.wrapper.EnvWrapper`."""

from warp_drive.compat.env_wrapper import EnvWrapper, make_env
from warp_drive.env.wrapper import FLAT_BLOCK, POOL_SUFFIX, REQUIRED_ARRAYS

__all__ = ["EnvWrapper", "make_env", "FLAT_BLOCK", "POOL_SUFFIX", "REQUIRED_ARRAYS"]
