"""The import rules of pyproject.toml's [tool.importlinter] hold, and they bite.

`lint-imports` checks the layers (runtime < services < env < training | adapters
< cli), WarpDrive compatibility as a leaf that only its kept paths and the CLI
import, the example envs (the root package ``example_envs``) on the env layer and
below, and no cycles among any package's modules -- counting imports made
inside functions. The planted-violation tests write a violation into a copy of
the packages and expect the check to fail, so a contract that silently matches
nothing cannot pass for a rule.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def lint_imports(cwd: Path) -> subprocess.CompletedProcess:
    executable = shutil.which("lint-imports", path=str(Path(sys.executable).parent))
    if executable is None:
        pytest.fail("import-linter is missing: pip install -e '.[dev]'")
    # The package is found on the path: the checkout's copy in `cwd`.
    return subprocess.run([executable, "--no-cache"], cwd=cwd, capture_output=True, text=True,
                          env={"PYTHONPATH": str(cwd), "PATH": "/usr/bin:/bin"}, timeout=300)


def test_the_import_contracts_are_kept():
    result = lint_imports(ROOT)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    assert "0 broken" in result.stdout


@pytest.mark.parametrize("module, planted, contract", [
    # the runtime reaching up into the env layer, inside a function (a deferred import hides nothing)
    ("runtime/data_manager.py", "def _planted():\n    from warp_drive.env import wrapper\n", "layers import downward"),
    # a core module importing WarpDrive's compatibility layer
    ("services/sampler.py", "def _planted():\n    import warp_drive.compat.managers\n", "compatibility is a leaf"),
    # a new cycle: the backends' errors importing the interface that imports them
    ("runtime/backends/errors.py", "def _planted():\n    from warp_drive.runtime.backends import base\n", "No import cycles"),
    # inside a layer: the env contract reaching up to the wrapper built on it, the sampler up to the log
    ("env/environment.py", "def _planted():\n    from warp_drive.env import wrapper\n", "Inside the env layer"),
    ("services/sampler.py", "def _planted():\n    from warp_drive.services import log\n", "Inside the services layer"),
    ("runtime/data_feed.py", "def _planted():\n    from warp_drive.runtime import data_manager\n", "Inside the runtime layer"),
])
def test_a_planted_violation_breaks_its_contract(tmp_path, module, planted, contract):
    assert_planted_violation_breaks(tmp_path, Path("warp_drive") / module, planted, contract)


@pytest.mark.parametrize("planted", [
    "def _planted():\n    from warp_drive.training import trainer\n",  # deferred: the graph still counts it
    "import warp_drive.compat.example_envs\n",  # how the module once reached WarpDrive's CUDATagGridWorld
])
def test_an_example_env_importing_above_the_env_layer_breaks_its_contract(tmp_path, planted):
    assert_planted_violation_breaks(tmp_path, Path("example_envs/tag_gridworld/tag_gridworld.py"), planted,
                                    "The example envs build on the env layer and below")


def assert_planted_violation_breaks(tmp_path: Path, module: Path, planted: str, contract: str) -> None:
    """Copy both root packages and pyproject.toml, append ``planted`` to ``module`` (relative to the checkout),
    and expect ``contract`` among lint-imports' broken contracts."""
    for package in ("warp_drive", "example_envs"):
        shutil.copytree(ROOT / package, tmp_path / package, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy2(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    with (tmp_path / module).open("a") as handle:
        handle.write("\n\n" + planted)
    result = lint_imports(tmp_path)
    assert result.returncode != 0, result.stdout[-3000:]
    broken = result.stdout.split("Broken contracts", 1)[-1]
    assert contract in broken, result.stdout[-3000:]


MAX_DEFERRED_IMPORTS = 7  # the CLI's torch-free start (5: train, evaluate, check), the auto-scaler's probe child
# and the env layer's host API, whose kernel replica (an executor, so torch) only an env without a reference needs


def deferred_imports() -> list[tuple[str, int, str, str]]:
    """(file, line, statement, its comment) of every import of the package's own
    modules made inside a function; the comment is on the line or the line above."""
    import ast

    found = []
    for path in sorted((ROOT / "warp_drive").rglob("*.py")):
        lines = path.read_text().splitlines()
        for node in ast.walk(ast.parse("\n".join(lines))):
            if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            for sub in ast.walk(node):
                own = (isinstance(sub, ast.ImportFrom) and (sub.module or "").startswith("warp_drive")) or (
                    isinstance(sub, ast.Import) and any(a.name.startswith("warp_drive") for a in sub.names))
                if own:
                    line, above = lines[sub.lineno - 1], lines[sub.lineno - 2].strip()
                    comment = line.split("#", 1)[1] if "#" in line else (above[1:] if above.startswith("#") else "")
                    found.append((str(path.relative_to(ROOT)), sub.lineno, ast.unparse(sub), comment.strip()))
    return sorted(set(found))


def test_deferred_imports_are_few_and_say_why():
    """An import inside a function hides a dependency from a reader (and, before
    grimp, from the cycle check): at most a few, each with a comment saying why --
    the training stack deferred for a light start, or a named debt to pay."""
    found = deferred_imports()
    silent = [f"{path}:{line}: {text}" for path, line, text, comment in found if not comment]
    assert not silent, "deferred imports without a comment saying why:\n" + "\n".join(silent)
    assert len(found) <= MAX_DEFERRED_IMPORTS, "\n".join(f"{p}:{n}: {t}" for p, n, t, _ in found)
