"""The Lightning classes of WarpDrive's path ``warp_drive.training.pytorch_lightning``, of the package the
program fits with, chosen when this module is first imported (by that path) and kept for the process.

In Lightning 2 the standalone ``pytorch_lightning`` package and ``lightning.pytorch`` are separate copies,
and each ``Trainer`` refuses the other's modules. The program holds these classes from its import on, and a
Lightning ``Trainer`` checks ``isinstance`` before any of our code runs in ``fit``, so the choice cannot
wait for the trainer (:func:`~warp_drive.compat.lightning.program_lightning_package`):

* ``pytorch_lightning`` when the program has already imported it (WarpDrive's tutorial 7 does
  ``from pytorch_lightning import Trainer`` before importing the path; WarpDrive's own module was written
  over ``pytorch_lightning``);
* else ``lightning.pytorch`` (``from lightning import Trainer``).

When ``pytorch_lightning`` is imported but the classes are ``lightning.pytorch``'s (it came later), the
first import and building a module warn with the fix. The classes of either package are at
:func:`~warp_drive.compat.lightning.lightning_api`.
"""

from __future__ import annotations

from warp_drive.compat.lightning import lightning_api, program_lightning_package, warn_if_the_other_lightning_is_imported

LIGHTNING_PACKAGE = program_lightning_package()
_api = lightning_api(LIGHTNING_PACKAGE)
WarpDriveModule = _api.WarpDriveModule
CUDACallback = _api.CUDACallback
PerfStatsCallback = _api.PerfStatsCallback
RolloutDataModule = _api.RolloutDataModule


def warn_if_pytorch_lightning_is_imported() -> bool:
    """Warn (and return True) when this process has imported the separate ``pytorch_lightning`` but these
    classes are ``lightning.pytorch``'s (this module was imported first), so ``pytorch_lightning.Trainer``
    would refuse them."""
    return warn_if_the_other_lightning_is_imported(WarpDriveModule)


warn_if_pytorch_lightning_is_imported()

__all__ = ["CUDACallback", "LIGHTNING_PACKAGE", "PerfStatsCallback", "RolloutDataModule", "WarpDriveModule",
           "warn_if_pytorch_lightning_is_imported"]
