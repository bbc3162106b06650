"""WarpDrive 2.7's import paths kept inside ``warp_drive/training/`` re-export ``warp_drive.compat`` and do
nothing else.

Why: such a path exists only so that a WarpDrive program's import line still works. Its logic lives in
``compat/`` beside the rest of WarpDrive's translation, where a reader looks for it, and the training
package a newcomer reads carries none of it. The second test keeps the list honest: any module of the
training package that imports compat/ must be one of these paths.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
TRAINING = ROOT / "warp_drive" / "training"
# WarpDrive 2.7's module paths under warp_drive/training/ that this project keeps (reference §1.1).
KEPT_PATHS = (
    "trainer.py",
    "pytorch_lightning.py",
    "trainers/__init__.py",
    "trainers/trainer_a2c.py",
    "trainers/trainer_base.py",
    "trainers/trainer_ddpg.py",
    "models/factory.py",
    "utils/__init__.py",
    "utils/param_scheduler.py",
    "utils/vertical_scaler.py",
    "utils/distributed_train/__init__.py",
    "utils/distributed_train/distributed_trainer_pycuda.py",
)


def imports_compat(node: ast.AST) -> bool:
    if isinstance(node, ast.ImportFrom):
        return (node.module or "").startswith("warp_drive.compat")
    return isinstance(node, ast.Import) and any(a.name.startswith("warp_drive.compat") for a in node.names)


def is_reexport(statement: ast.stmt, first: bool) -> bool:
    """The module docstring, an import from compat/, or ``__all__`` as a list of names."""
    if first and isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Constant) \
            and isinstance(statement.value.value, str):
        return True
    if imports_compat(statement):
        return True
    return (isinstance(statement, ast.Assign) and [ast.unparse(t) for t in statement.targets] == ["__all__"]
            and isinstance(statement.value, (ast.List, ast.Tuple))
            and all(isinstance(e, ast.Constant) and isinstance(e.value, str) for e in statement.value.elts))


@pytest.mark.parametrize("kept", KEPT_PATHS)
def test_a_kept_path_only_reexports_compat(kept):
    tree = ast.parse((TRAINING / kept).read_text())
    logic = [f"line {s.lineno}: {ast.unparse(s).splitlines()[0]}" for i, s in enumerate(tree.body)
             if not is_reexport(s, first=i == 0)]
    assert not logic, (f"warp_drive/training/{kept} is WarpDrive's kept path: move this into warp_drive/compat/ "
                       "and re-export it:\n" + "\n".join(logic))


def test_every_module_of_training_that_imports_compat_is_a_kept_path():
    importers = sorted(str(path.relative_to(TRAINING)) for path in TRAINING.rglob("*.py")
                       if any(imports_compat(node) for node in ast.walk(ast.parse(path.read_text()))))
    assert set(importers) <= set(KEPT_PATHS), sorted(set(importers) - set(KEPT_PATHS))
