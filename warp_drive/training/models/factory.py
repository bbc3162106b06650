"""WarpDrive 2.7's import path ``warp_drive.training.models.factory``: its ``ModelFactory``, written in
:mod:`warp_drive.compat.model_factory` over this project's model registry."""

from warp_drive.compat.model_factory import WARPDRIVE_BUILTIN_MODELS, ModelFactory

__all__ = ["ModelFactory", "WARPDRIVE_BUILTIN_MODELS"]
