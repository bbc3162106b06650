"""WarpDrive's ``warp_drive.managers.data_manager``: ``CUDADataManager`` (agents first)."""

from warp_drive.compat.managers import CUDADataManager

__all__ = ["CUDADataManager"]
