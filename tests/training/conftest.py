"""Fixtures of the training tests: one finished run, trained once per session, that the resume, CLI and
checkpoint-safety tests copy (each used to train its own)."""

from __future__ import annotations

import pytest
from shared_runs import tiny_cartpole

from warp_drive.training.run import train


@pytest.fixture(scope="session")
def finished_cartpole_run(tmp_path_factory):
    """A real, finished 2-iteration CartPole run with a checkpoint after each iteration; copy it to change it."""
    return train(tiny_cartpole(tmp_path_factory.mktemp("shared_runs")), progress=False)
