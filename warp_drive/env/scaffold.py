"""``warp-drive new NAME``: a folder a user owns with a working env in it.

The folder holds the env class and its kernel (a small cooperative task that trains in seconds, to be
replaced by the user's own rules), a run config that names the env as ``package.module:Class`` (so the CLI
finds it from the folder without installing anything), a ``pyproject.toml`` with the entry point and the
``.cu`` as package data (for when the env is installed and shared), and a test that runs ``warp-drive check``.
As generated, ``warp-drive check`` passes and ``warp-drive train`` improves its return.

The files are ``string.Template`` texts under ``warp_drive/env/templates/new_env/`` (``$class_name``,
``$package``, ``$kernel`` are filled in); nothing existing is overwritten.
"""

from __future__ import annotations

import keyword
import re
import string
from pathlib import Path

TEMPLATES = Path(__file__).resolve().parent / "templates" / "new_env"

# template file -> path in the new folder ({package} is the package's name)
LAYOUT = {
    "env.py.tmpl": "{package}/{package}.py",
    "env.cu.tmpl": "{package}/{package}.cu",
    "init.py.tmpl": "{package}/__init__.py",
    "config.yaml.tmpl": "{package}.yaml",
    "pyproject.toml.tmpl": "pyproject.toml",
    "test_env.py.tmpl": "tests/test_{package}.py",
    "README.md.tmpl": "README.md",
}


class ScaffoldError(ValueError):
    """The name is not usable or the target folder is taken."""


def names_for(name: str) -> dict[str, str]:
    """``Foraging`` / ``level_based_foraging`` / ``my-env`` -> the class name (CamelCase) and the package
    name (snake_case), both valid Python identifiers."""
    if "/" in name or "\\" in name:
        folder, _, leaf = name.replace("\\", "/").rstrip("/").rpartition("/")
        raise ScaffoldError(f"warp-drive new {name!r}: NAME is the env's name, not a path; to create it in "
                            f"{folder or '/'}, run: warp-drive new {leaf or 'NAME'} --dir {folder or '/'}")
    words = [w for w in re.split(r"[^0-9A-Za-z]+|(?<=[a-z0-9])(?=[A-Z])", name) if w]
    if not words or not words[0][0].isalpha():
        raise ScaffoldError(f"warp-drive new {name!r}: the name must start with a letter (e.g. Foraging or "
                            f"level_based_foraging)")
    class_name = "".join(w[0].upper() + w[1:] for w in words)
    package = "_".join(w.lower() for w in words)
    if keyword.iskeyword(package) or package in {"warp_drive", "example_envs", "tests", "test"}:
        raise ScaffoldError(f"warp-drive new {name!r}: {package!r} would shadow a Python or warp_drive module; "
                            f"choose another name")
    return {"class_name": class_name, "package": package, "kernel": f"{class_name}Step"}


def scaffold(name: str, parent: str | Path = ".") -> Path:
    """Write the new env's folder ``parent/<package>`` and return it (see the module docstring)."""
    names = names_for(name)
    root = Path(parent) / names["package"]
    if root.exists():
        raise ScaffoldError(f"warp-drive new {name}: {root} exists already; choose another name or folder "
                            f"(nothing was written)")
    texts = {LAYOUT[t].format(**names): string.Template((TEMPLATES / t).read_text()).substitute(names)
             for t in LAYOUT}
    for relative, text in texts.items():
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root
