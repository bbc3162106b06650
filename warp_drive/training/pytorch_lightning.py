"""WarpDrive 2.7's module path ``warp_drive.training.pytorch_lightning``: its Lightning names, ours underneath.

``WarpDriveModule``, ``CUDACallback`` and ``PerfStatsCallback`` are written in
:mod:`warp_drive.compat.lightning` over :mod:`warp_drive.training.lightning`, so tutorial 7
runs with one change besides the backend name: the Lightning ``Trainer``
comes from ``lightning`` (``from lightning import Trainer``) or
``lightning.pytorch``. These classes are ``lightning.pytorch`` classes; in
Lightning 2 the ``pytorch_lightning`` package is a separate copy whose
``Trainer.fit`` refuses them ("`model` must be a `LightningModule`"), and
one module cannot be a ``LightningModule`` of both copies. So when this
module is imported after ``pytorch_lightning`` (as tutorial 7 does), a
warning says at once which import to change.
"""

from __future__ import annotations

import sys
import warnings

import lightning.pytorch

from warp_drive.compat.lightning import CUDACallback, PerfStatsCallback, WarpDriveModule
from warp_drive.training.lightning import RolloutDataModule

MIXED_IMPORT_HINT = (
    "WarpDriveModule, CUDACallback and PerfStatsCallback are lightning.pytorch classes, and a "
    "pytorch_lightning.Trainer refuses them (TypeError: `model` must be a `LightningModule`): use "
    "`from lightning import Trainer` (or `from lightning.pytorch import Trainer`) instead of "
    "`from pytorch_lightning import Trainer`")


def warn_if_pytorch_lightning_is_imported() -> bool:
    """Warn (and return True) when the separate ``pytorch_lightning`` package is imported in this process."""
    standalone = sys.modules.get("pytorch_lightning")
    if standalone is None or getattr(standalone, "LightningModule", None) is lightning.pytorch.LightningModule:
        return False
    warnings.warn(MIXED_IMPORT_HINT, UserWarning, stacklevel=2)
    return True


warn_if_pytorch_lightning_is_imported()

__all__ = ["CUDACallback", "PerfStatsCallback", "RolloutDataModule", "WarpDriveModule"]
