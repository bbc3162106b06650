"""PandemicEconomy: a synthetic pandemic-and-economy systems benchmark (S regions and a planner), class + CUDA C
step kernel (registered as a built-in env, ``warp_drive.env.registry.BUILTIN_ENVS``)."""

from .pandemic_economy import PandemicEconomy

__all__ = ["PandemicEconomy"]
