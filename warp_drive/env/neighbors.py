"""Python side of ``<warp_drive/neighbors.h>``: the scratch an env allocates for
the neighbour grid.

An env that calls ``wd_grid_view``/``wd_grid_build`` passes one int32 array of
shape ``(num_envs, grid_scratch_words(num_agents, k))`` (see
:func:`grid_scratch`); its contents are the kernel's own business between two
steps (skip it in consistency checks). The constants and the formula mirror the
header; ``tests/env/test_neighbors.py`` checks them against it.
"""

from __future__ import annotations

import numpy as np

MAX_NEIGHBORS = 32  # WD_MAX_NEIGHBORS
GRID_MIN_AGENTS = 64  # WD_GRID_MIN_AGENTS
GRID_MAX_SIDE = 45  # WD_GRID_MAX_SIDE
GRID_RANK_LANES = 24  # WD_GRID_RANK_LANES


def uses_grid(num_agents: int, k: int) -> bool:
    """Whether the kernel builds a grid for ``num_agents`` agents observing ``k`` neighbours."""
    return k > 0 and num_agents >= GRID_MIN_AGENTS


def grid_scratch_words(num_agents: int, k: int) -> int:
    """Ints of one env's scratch row (0 where no grid is built)."""
    if not uses_grid(num_agents, k):
        return 0
    n = int(num_agents)
    return GRID_MAX_SIDE * GRID_MAX_SIDE + 2 + 4 * n + 4 * (n + GRID_RANK_LANES) + (n + 3) // 4


def grid_scratch(num_envs: int, num_agents: int, k: int) -> np.ndarray:
    """The zeroed scratch array for ``num_envs`` envs (one int where no grid is built)."""
    return np.zeros((int(num_envs), max(1, grid_scratch_words(num_agents, k))), np.int32)

