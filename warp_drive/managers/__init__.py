"""WarpDrive 2.7's ``warp_drive.managers`` package: its manager names over this
project's one implementation (see :mod:`warp_drive.compat.managers`)."""
