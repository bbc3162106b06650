"""WarpDrive 2.7's import path ``warp_drive.training.utils.vertical_scaler``: ``perform_auto_vertical_scaling``,
written in :mod:`warp_drive.compat.vertical_scaler` over this project's auto-scaler."""

from warp_drive.compat.vertical_scaler import perform_auto_vertical_scaling

__all__ = ["perform_auto_vertical_scaling"]
