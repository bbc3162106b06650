"""WarpDrive 2.7's module path ``warp_drive.training.pytorch_lightning``: its Lightning names, ours underneath.

``WarpDriveModule``, ``CUDACallback``, ``PerfStatsCallback`` (and this
project's ``RolloutDataModule``) are written in :mod:`warp_drive.compat.lightning`
over :mod:`warp_drive.training.lightning`. In Lightning 2 the standalone
``pytorch_lightning`` package and ``lightning.pytorch`` are separate copies,
and each ``Trainer`` refuses the other's modules; so the classes here belong
to the package the program fits with, decided when this module is first
imported in the process (:data:`LIGHTNING_PACKAGE`):

* ``pytorch_lightning`` when the program has already imported it (WarpDrive's
  tutorial 7 does ``from pytorch_lightning import Trainer`` before importing
  this module; WarpDrive's own module was written over ``pytorch_lightning``);
* else ``lightning.pytorch`` (``from lightning import Trainer``).

Why then: the program holds these classes from its import on, and a
Lightning ``Trainer`` checks ``isinstance`` before any of our code runs in
``fit``, so the module cannot wait for the trainer to choose. The choice is
kept for the process (a reload serves the same classes). When
``pytorch_lightning`` is imported but the classes are ``lightning.pytorch``'s
(it came later), importing this module again and building a module warn with
the fix. The classes of either package are also at
``warp_drive.compat.lightning.lightning_api(package)``.
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
    """Warn (and return True) when this process has imported the separate ``pytorch_lightning`` but this
    module's classes are ``lightning.pytorch``'s (it was imported first), so ``pytorch_lightning.Trainer``
    would refuse them."""
    return warn_if_the_other_lightning_is_imported(WarpDriveModule)


warn_if_pytorch_lightning_is_imported()

__all__ = ["CUDACallback", "LIGHTNING_PACKAGE", "PerfStatsCallback", "RolloutDataModule", "WarpDriveModule"]
