"""One set of example-environment modules under two import names.

The example environments live in the repository's top-level ``example_envs/``
folder, but an installed wheel puts them at ``warp_drive/example_envs/`` (a
top-level ``example_envs`` package in site-packages would claim a generic name
for the whole interpreter). Their canonical import name is therefore
``warp_drive.example_envs``. The old name ``example_envs`` (used by WarpDrive
programs, the docs and the tests, and by the example modules' own imports)
keeps working as an *alias*: ``example_envs.x`` is the very module object
``warp_drive.example_envs.x``. Loading the files twice under two names would
create two copies of every class, so ``isinstance`` checks and registries
would disagree depending on which name a caller used.

:func:`install` (called by ``warp_drive/__init__.py``) puts one finder at the
front of ``sys.meta_path``. It

* maps every ``example_envs[.sub]`` import to ``warp_drive.example_envs[.sub]``
  and registers the same module object under both names, and
* in a source checkout, where ``warp_drive/example_envs/`` does not exist,
  loads ``warp_drive.example_envs`` from the ``example_envs/`` folder next to
  the ``warp_drive/`` folder (its submodules then follow through the package's
  ``__path__``).

``import example_envs`` before ``warp_drive`` is imported finds
``example_envs/__init__.py`` -- the checkout's folder through ``sys.path``, or
in an installed wheel the one-file top-level package it ships for WarpDrive
programs (which import ``example_envs`` first) -- and that file hands over to
``warp_drive.example_envs`` (see there).

A package of the user's own named ``example_envs`` that ``sys.path`` finds
first is left alone: the alias steps aside for every ``example_envs[.sub]``
import, before or after ``warp_drive`` is imported (the project's envs stay
importable as ``warp_drive.example_envs``).
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import sys
from pathlib import Path

ALIAS = "example_envs"
CANONICAL = "warp_drive.example_envs"

_PACKAGE_DIR = Path(__file__).resolve().parent


def example_envs_dir() -> Path:
    """The folder holding the example environments: inside the installed
    package, else the checkout's top-level ``example_envs/``."""
    for folder in (_PACKAGE_DIR / "example_envs", _PACKAGE_DIR.parent / "example_envs"):
        if (folder / "__init__.py").is_file():
            return folder
    raise ModuleNotFoundError(
        f"no example environments next to {_PACKAGE_DIR}: expected warp_drive/example_envs/ "
        "(installed wheel) or example_envs/ beside warp_drive/ (source checkout); reinstall warp_drive",
        name=CANONICAL,
    )


class _AliasLoader(importlib.abc.Loader):
    """Returns the module already imported under the canonical name."""

    def __init__(self, canonical: str):
        self.canonical = canonical

    def create_module(self, spec):
        module = importlib.import_module(self.canonical)
        self.canonical_spec = module.__spec__
        return module

    def exec_module(self, module):
        # The import system has just set module.__spec__ to the alias spec;
        # the module keeps describing its one real name and location.
        module.__spec__ = self.canonical_spec


def _users_own_package() -> bool:
    """True when ``example_envs`` on ``sys.path`` is another package than ours (a
    user's own, which must win whether imported before or after warp_drive)."""
    loaded = sys.modules.get(ALIAS)
    if loaded is not None:
        return getattr(loaded, "__name__", None) != CANONICAL
    spec = importlib.machinery.PathFinder.find_spec(ALIAS)
    if spec is None or spec.origin is None:
        return False
    try:
        return Path(spec.origin).resolve().parent != example_envs_dir().resolve()
    except ModuleNotFoundError:
        return True


class _ExampleEnvsFinder(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name == ALIAS or name.startswith(ALIAS + "."):
            if _users_own_package():
                return None  # the normal path-based import finds the user's package
            canonical = "warp_drive." + name
            # No is_package: the spec must not give a plain module a __path__;
            # a package keeps the __path__ it already has.
            return importlib.util.spec_from_loader(name, _AliasLoader(canonical))
        if name == CANONICAL:
            folder = example_envs_dir()
            return importlib.util.spec_from_file_location(
                CANONICAL, folder / "__init__.py", submodule_search_locations=[str(folder)]
            )
        return None


def install() -> None:
    """Put the finder first on ``sys.meta_path`` (once)."""
    if not any(isinstance(finder, _ExampleEnvsFinder) for finder in sys.meta_path):
        sys.meta_path.insert(0, _ExampleEnvsFinder())
