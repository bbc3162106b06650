"""PandemicEconomy: a synthetic pandemic-and-economy systems benchmark (S regions and a planner), class + CUDA C
step kernel. Importing this package registers it as ``PandemicEconomy``."""

from example_envs.pandemic_economy.pandemic_economy import PandemicEconomy
from warp_drive.registry import BUILTIN_ENVS, register_env

if "PandemicEconomy" not in BUILTIN_ENVS:
    register_env("PandemicEconomy", PandemicEconomy, overwrite=True)

__all__ = ["PandemicEconomy"]
