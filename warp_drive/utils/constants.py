"""WarpDrive's ``warp_drive.utils.constants.Constants``: its reserved names, as this project spells them."""

from warp_drive.compat.utils import Constants

__all__ = ["Constants"]
