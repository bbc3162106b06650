"""WarpDrive 2.7's ``warp_drive.utils`` names that carry code: ``Constants`` (its reserved array names) and
``DataFeed`` (WarpDrive's keyword ``data=`` for a reset pool), over this project's runtime and env layers.
The kept paths ``warp_drive.utils.constants`` and ``warp_drive.utils.data_feed`` re-export them."""

from warp_drive.env.environment import ACTION_MASK
from warp_drive.runtime.data_feed import DataFeed as _DataFeed
from warp_drive.runtime.data_manager import DONE, TIMESTEP


class Constants:
    """Names of the arrays WarpDrive's programs address by constant.

    ``OBSERVATIONS``, ``ACTIONS`` and ``REWARDS`` are the same names here.
    ``DONE_FLAGS`` is the per-env done array that kernels set and resets read,
    ``_done_`` (WarpDrive's ``"done_flags"`` only named its trainer's batch of
    those flags). ``PROCESSED_OBSERVATIONS`` and ``ACTION_MASK`` keep
    WarpDrive's strings; ``DONE`` and ``TIMESTEP`` are added for completeness.
    """

    OBSERVATIONS = "observations"
    ACTIONS = "sampled_actions"
    REWARDS = "rewards"
    DONE_FLAGS = DONE
    PROCESSED_OBSERVATIONS = "processed_observations"
    ACTION_MASK = ACTION_MASK
    DONE = DONE
    TIMESTEP = TIMESTEP


class DataFeed(_DataFeed):
    """:class:`warp_drive.runtime.data_feed.DataFeed`, whose ``add_pool_for_reset`` also
    takes WarpDrive's keyword ``data=`` for the pool (ours calls it ``pool``)."""

    def add_pool_for_reset(self, name: str, data, reset_target: str, dtype=None) -> None:
        super().add_pool_for_reset(name, data, reset_target, dtype=dtype)


__all__ = ["Constants", "DataFeed"]
