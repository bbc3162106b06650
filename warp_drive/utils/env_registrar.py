"""WarpDrive 2.7's import path ``warp_drive.utils.env_registrar``: its ``EnvironmentRegistrar``, written in
:mod:`warp_drive.compat.env_registrar` over this project's registry."""

from warp_drive.compat.env_registrar import EnvironmentRegistrar, env_registrar

__all__ = ["EnvironmentRegistrar", "env_registrar"]
