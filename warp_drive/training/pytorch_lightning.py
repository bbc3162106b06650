"""WarpDrive 2.7's module path ``warp_drive.training.pytorch_lightning``: its Lightning names, ours underneath.

``WarpDriveModule``, ``CUDACallback``, ``PerfStatsCallback`` (and this project's ``RolloutDataModule``) are
written in :mod:`warp_drive.compat.lightning` over :mod:`warp_drive.training.lightning`, as classes of the
Lightning package the program fits with (``pytorch_lightning`` when the program imported it before this
module, else ``lightning.pytorch``: :data:`LIGHTNING_PACKAGE`), chosen in :mod:`warp_drive.compat.program_lightning`.
"""

from warp_drive.compat.program_lightning import (
    LIGHTNING_PACKAGE,
    CUDACallback,
    PerfStatsCallback,
    RolloutDataModule,
    WarpDriveModule,
    warn_if_pytorch_lightning_is_imported,
)

__all__ = ["CUDACallback", "LIGHTNING_PACKAGE", "PerfStatsCallback", "RolloutDataModule", "WarpDriveModule",
           "warn_if_pytorch_lightning_is_imported"]
