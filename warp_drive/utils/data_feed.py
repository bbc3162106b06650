"""WarpDrive's ``warp_drive.utils.data_feed``: this project's ``DataFeed`` (a dict of
``{name: {"data": ..., "attributes": {...}}}``) with WarpDrive's keyword names."""

from warp_drive.data_feed import DataFeed as _DataFeed


class DataFeed(_DataFeed):
    """:class:`warp_drive.data_feed.DataFeed`, whose ``add_pool_for_reset`` also
    takes WarpDrive's keyword ``data=`` for the pool (ours calls it ``pool``)."""

    def add_pool_for_reset(self, name: str, data, reset_target: str, dtype=None) -> None:
        super().add_pool_for_reset(name, data, reset_target, dtype=dtype)


__all__ = ["DataFeed"]
