"""``warp_drive.env.neighbors`` (Python) against ``<warp_drive/neighbors.h>`` (C): the
scratch an env allocates is the scratch its kernel uses."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from warp_drive.runtime.backends import get_backend
from warp_drive.env.neighbors import GRID_MIN_AGENTS, MAX_NEIGHBORS, grid_scratch, grid_scratch_words

KERNELS = Path(__file__).parents[1] / "kernels"


def test_python_scratch_size_matches_the_header():
    backend = get_backend("cpu")
    probe = backend.build([KERNELS / "neighbors_probe.cu"]).get_function("NeighborsProbe")
    cases = [(n, k) for n in (1, 5, GRID_MIN_AGENTS - 1, GRID_MIN_AGENTS, 100, 1000, 1100, 5000, 20000)
             for k in (0, 1, 10, MAX_NEIGHBORS)]
    n = torch.tensor([c[0] for c in cases], dtype=torch.int32)
    k = torch.tensor([c[1] for c in cases], dtype=torch.int32)
    words = torch.zeros(len(cases), dtype=torch.int32)
    sides = torch.zeros(len(cases), dtype=torch.int32)
    probe(n, k, words, sides, len(cases), grid=1, block=len(cases))
    for (agents, neighbours), c_words, side in zip(cases, words.tolist(), sides.tolist()):
        expected = c_words if side > 0 else 0  # no grid: the kernel reads no scratch at all
        assert grid_scratch_words(agents, neighbours) == expected, (agents, neighbours)
        assert grid_scratch(3, agents, neighbours).shape == (3, max(1, expected))


def test_scratch_is_int32_and_zeroed():
    scratch = grid_scratch(2, 200, 10)
    assert scratch.dtype == np.int32 and not scratch.any()
