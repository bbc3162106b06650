"""WarpDrive 2.7's import path ``warp_drive.env_cpu_gpu_consistency_checker``: its ``EnvironmentCPUvsGPU``,
written in :mod:`warp_drive.compat.consistency_checker` (``warp_drive.env.consistency`` checks native envs)."""

from warp_drive.compat.consistency_checker import EnvironmentCPUvsGPU, generate_random_actions

__all__ = ["EnvironmentCPUvsGPU", "generate_random_actions"]
