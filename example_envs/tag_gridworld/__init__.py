"""Discrete Tag: taggers chase a runner on a grid (class + CUDA C step kernel)."""

from .tag_gridworld import TagGridWorld

__all__ = ["TagGridWorld"]
