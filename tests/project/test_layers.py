"""The layers are named one way everywhere: folders of the package, the import contract, the test folders,
the API reference pages and the README's table; and the package's top level holds the layers and nothing
else but WarpDrive 2.7's kept import paths, each a re-export of ``compat/``.

Why: a newcomer finds a module by its layer. When the README says "services" and the code says
``warp_drive/sampler.py`` beside ``warp_drive/wrapper.py``, the reader has to learn the map twice.
"""

from __future__ import annotations

import ast
import re
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "warp_drive"
# bottom to top; training and adapters share a layer and never import each other
LAYERS = ("runtime", "services", "env", "training | adapters", "cli")
LAYER_PACKAGES = ("runtime", "services", "env", "training", "adapters")
# WarpDrive 2.7's own import lines name these at the top of its package (reference §1.1), so they stay here
WARPDRIVE_KEPT_TOP_LEVEL = ("env_wrapper.py", "env_cpu_gpu_consistency_checker.py", "managers", "utils")
TOP_LEVEL = {"__init__.py", "__main__.py", "py.typed", "cli.py", "cuda", "compat", *LAYER_PACKAGES,
             *WARPDRIVE_KEPT_TOP_LEVEL}


def test_the_top_level_holds_the_layers_and_warpdrives_kept_paths_only():
    found = {p.name for p in PACKAGE.iterdir() if p.name != "__pycache__"}
    assert found - TOP_LEVEL == set(), f"put these in their layer's folder: {sorted(found - TOP_LEVEL)}"
    assert TOP_LEVEL - found == set(), f"missing at the top level: {sorted(TOP_LEVEL - found)}"


def kept_top_level_modules() -> list[Path]:
    modules = []
    for kept in WARPDRIVE_KEPT_TOP_LEVEL:
        path = PACKAGE / kept
        modules += sorted(path.rglob("*.py")) if path.is_dir() else [path]
    return modules


def is_reexport(statement: ast.stmt, imported: set[str]) -> bool:
    """A docstring, an import, ``__all__``, an alias of an imported name, or the ImportError of a removed path."""
    if isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Constant):
        return isinstance(statement.value.value, str)
    if isinstance(statement, (ast.Import, ast.ImportFrom)):
        return True
    if isinstance(statement, ast.Raise):
        return True
    if isinstance(statement, ast.Assign) and len(statement.targets) == 1:
        target = ast.unparse(statement.targets[0])
        if target == "__all__":
            return isinstance(statement.value, (ast.List, ast.Tuple))
        return isinstance(statement.value, ast.Name) and statement.value.id in imported
    return False


@pytest.mark.parametrize("module", kept_top_level_modules(), ids=lambda p: str(p.relative_to(PACKAGE)))
def test_a_kept_top_level_path_only_reexports(module):
    tree = ast.parse(module.read_text(encoding="utf-8"))
    imported = {a.asname or a.name for node in tree.body if isinstance(node, (ast.Import, ast.ImportFrom))
                for a in node.names}
    logic = [f"line {s.lineno}: {ast.unparse(s).splitlines()[0]}" for s in tree.body
             if not is_reexport(s, imported)]
    assert not logic, f"{module.relative_to(ROOT)} carries code; move it into warp_drive/compat/: {logic}"


def test_the_import_contract_layers_are_the_package_folders():
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    contract = next(c for c in config["tool"]["importlinter"]["contracts"]
                    if c["type"] == "layers" and "containers" not in c)
    named = [" | ".join(m.removeprefix("warp_drive.") for m in layer.split(" | ")) for layer in contract["layers"]]
    assert named[::-1] == list(LAYERS)


@pytest.mark.parametrize("layer", LAYER_PACKAGES + ("cli", "compat"))
def test_each_layer_has_its_test_folder(layer):
    assert (ROOT / "tests" / layer).is_dir(), f"tests/{layer}/ is missing: the tests of {layer} go there"


@pytest.mark.parametrize("layer", ("runtime", "services", "env"))
def test_each_layer_has_its_api_page_documenting_every_module(layer):
    page = ROOT / "docs" / "api" / f"{layer}.md"
    assert page.is_file(), f"docs/api/{layer}.md is missing"
    documented = set(re.findall(r"\.\. automodule:: (\S+)", page.read_text(encoding="utf-8")))
    modules = {".".join(("warp_drive", layer, *p.relative_to(PACKAGE / layer).with_suffix("").parts))
               .removesuffix(".__init__") for p in (PACKAGE / layer).glob("*.py")}
    modules |= {f"warp_drive.{layer}.{p.name}" for p in (PACKAGE / layer).iterdir()
                if p.is_dir() and (p / "__init__.py").exists()}
    assert modules - documented == set(), f"docs/api/{layer}.md leaves out {sorted(modules - documented)}"


def test_the_readme_table_names_the_layer_folders():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme.split("## How the package is layered", 1)[1].split("\n## ", 1)[0]
    table = section.split("| layer | modules |", 1)[1].split("\n\n", 1)[0]  # the first table: the layers
    layer_column = [line.split("|")[1].strip() for line in table.strip().splitlines()[1:]]
    assert layer_column == ["`runtime/`", "`services/`", "`env/`", "`training/`, `adapters/`", "`cli`"], layer_column
