"""Sphinx configuration for the warp_drive documentation.

Build from the repository root (warnings are errors, as in ``tests/project/test_docs.py``)::

    python -m sphinx -W --keep-going -b html docs docs/_build/html

Pages are Markdown (MyST). The tutorial notebooks are rendered with the outputs
they were committed with, never executed here (``tests/project/test_tutorials.py``
executes them). The API reference is autodoc over the checked-out ``warp_drive``.
"""

import shutil
import sys
from pathlib import Path

DOCS = Path(__file__).resolve().parent
ROOT = DOCS.parent


def sync_tutorials(src=ROOT / "tutorials", dest=DOCS / "tutorials"):
    """Copy ``tutorials/*.ipynb`` and its README into ``docs/tutorials/`` (git-ignored).

    Sphinx only reads sources under ``docs/``, and a symlink is not enough: MyST
    resolves the README's links (``01_basics.ipynb``) through the symlink to a
    path outside ``docs/`` and reports them as unknown documents. Files are
    copied only when their bytes differ, so incremental builds stay incremental.
    """
    dest.mkdir(exist_ok=True)
    wanted = {p.name: p for p in [*src.glob("*.ipynb"), src / "README.md"]}
    for name, path in wanted.items():
        target = dest / name
        if not target.exists() or target.read_bytes() != path.read_bytes():
            shutil.copy2(path, target)
    for stale in dest.iterdir():  # a notebook renamed or removed in tutorials/
        if stale.is_file() and stale.name not in wanted:
            stale.unlink()


sync_tutorials()

# Import the checked-out package even when it is not installed.
sys.path.insert(0, str(ROOT))
import warp_drive  # noqa: E402

project = "warp_drive"
author = "warp_drive contributors"
release = version = warp_drive.__version__

extensions = [
    "myst_nb",  # Markdown pages and notebooks (it loads myst_parser itself)
    "sphinx.ext.autodoc",  # docstrings are reST (``code``, :class:); no napoleon sections
    "sphinx.ext.viewcode",
]

exclude_patterns = ["_build", "**/.ipynb_checkpoints", "Thumbs.db", ".DS_Store"]

# MyST: ids for headings down to ###, so pages can link "#section"; ``$...$`` math
# stays off on purpose (the README uses ``$`` for shell variables).
myst_heading_anchors = 3
myst_enable_extensions = ["colon_fence", "deflist"]

# Notebooks: shown as committed, never executed by the docs build.
nb_execution_mode = "off"

# autodoc: public, documented members only, in source order; type hints in the
# description rather than in long signatures.
autodoc_default_options = {
    "members": True,
    "show-inheritance": True,
    "member-order": "bysource",
}
autodoc_typehints = "description"
# Our classes override Lightning's and Gymnasium's hooks (``training_step``,
# ``step``, ...); without this their undocumented overrides would show those
# libraries' docstrings, which are written for their own Sphinx setups.
autodoc_inherit_docstrings = False
# Constructor arguments are documented in ``__init__`` docstrings.
autoclass_content = "both"

html_theme = "furo"
html_title = f"warp_drive {release}"
