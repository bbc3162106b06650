"""Discrete Tag: taggers chase a runner on a grid (class + CUDA C step kernel)."""

from example_envs.tag_gridworld.tag_gridworld import TagGridWorld

__all__ = ["TagGridWorld"]
