"""Small run configs the training tests share (``conftest.py`` trains one of them once per session)."""

from __future__ import annotations

from warp_drive.training.config import load_config

# 8 envs x 16 steps: an iteration takes a fraction of a second on the cpu executor.
TINY = ["trainer.backend=cpu", "trainer.num_envs=8", "trainer.rollout_length=16"]


def tiny_cartpole(basedir, iterations: int = 2, *extra: str):
    """CartPole for ``iterations`` iterations, a checkpoint after each."""
    return load_config("cartpole", [*TINY, f"trainer.total_steps={8 * 16 * iterations}",
                                    f"saving.basedir={basedir}", "saving.model_params_save_freq=1", *extra])
