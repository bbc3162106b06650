"""WarpDrive's ``warp_drive.utils.constants.Constants``: its reserved names, as this project spells them."""

from warp_drive.data_manager import DONE, TIMESTEP
from warp_drive.environment import ACTION_MASK


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
