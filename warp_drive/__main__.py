"""``python -m warp_drive``: the same command line as ``warp-drive`` (see warp_drive/cli.py)."""

import sys

from warp_drive.cli import main

sys.exit(main())
