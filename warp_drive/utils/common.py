"""WarpDrive 2.7's import path ``warp_drive.utils.common``: ``get_project_root()``, a directory laid out as
WarpDrive's repository with the files this project ships for WarpDrive programs (its run configs), written
in :mod:`warp_drive.compat.project_root`."""

from warp_drive.compat.project_root import get_project_root

__all__ = ["get_project_root"]
