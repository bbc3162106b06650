"""WarpDrive 2.7's ``warp_drive.utils`` module paths (``data_feed``, ``constants``,
``env_registrar``, ...), each a thin re-export or translator over this project."""
