"""WarpDrive's ``warp_drive.utils.data_feed``: this project's ``DataFeed`` (a dict of
``{name: {"data": ..., "attributes": {...}}}``) with WarpDrive's keyword names."""

from warp_drive.compat.utils import DataFeed

__all__ = ["DataFeed"]
