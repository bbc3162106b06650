"""The tutorials in ``tutorials/`` run top to bottom and are committed without outputs.

Every notebook found there is executed with nbclient, in a Jupyter kernel that
runs this very interpreter (a ``python3`` kernelspec written to a temporary
``$JUPYTER_PATH`` entry, which takes precedence over any installed one), with
the kernel's working directory in ``tutorials/`` as when a reader opens it.
The notebooks choose the ``auto`` backend: the cpu executor on a machine
without a GPU (``$WARP_DRIVE_BACKEND`` is set to ``cpu`` unless already set,
for code that leaves the backend unnamed).
A failing cell fails the test with the notebook's name, the cell's number and
first line, and the error. A notebook must not leave files in ``tutorials/``
(it should write into a ``tempfile`` directory; under test those go to pytest's
``tmp_path``).

A committed notebook holds no outputs and no execution counts, except image
outputs (``display_data`` with ``image/png`` or ``image/gif``) that readers
should see without running it; those are kept small.
"""

from __future__ import annotations

import base64
import json
import os
import re
import sys
from pathlib import Path

import pytest

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")
pytest.importorskip("ipykernel")
from nbclient.exceptions import CellExecutionError  # noqa: E402  (after the skip checks)

pytestmark = pytest.mark.slow  # notebooks: each tutorial executed top to bottom (the fast tier: pytest -m 'not slow')

TUTORIALS = Path(__file__).resolve().parents[2] / "tutorials"
NOTEBOOKS = sorted(TUTORIALS.glob("*.ipynb"))
IDS = [path.name for path in NOTEBOOKS]

IMAGE_LIMITS = {"image/png": 150_000, "image/gif": 500_000}  # bytes, decoded
ALLOWED_MIME = {*IMAGE_LIMITS, "text/plain"}  # text/plain: an image's fallback representation


@pytest.fixture(scope="session")
def jupyter_path(tmp_path_factory) -> Path:
    """A Jupyter data dir whose ``python3`` kernel runs ``sys.executable`` (this venv)."""
    root = tmp_path_factory.mktemp("jupyter")
    spec_dir = root / "kernels" / "python3"
    spec_dir.mkdir(parents=True)
    spec = {
        "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "Python 3 (warp_drive tests)",
        "language": "python",
    }
    (spec_dir / "kernel.json").write_text(json.dumps(spec))
    return root


def _failed_cell(nb) -> str:
    """'cell N (first line of its source)' for the cell that holds an error output."""
    for number, cell in enumerate(nb.cells, 1):
        if any(output.get("output_type") == "error" for output in cell.get("outputs", [])):
            first_line = cell.source.strip().splitlines()[0] if cell.source.strip() else ""
            return f"cell {number} ({first_line!r})"
    return "an unknown cell"


def _files(directory: Path) -> set[Path]:
    """Files under ``directory``, except notebooks (which people add while tests run) and Jupyter's checkpoints."""
    return {path for path in directory.rglob("*")
            if path.suffix != ".ipynb" and ".ipynb_checkpoints" not in path.parts}


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=IDS)
def test_tutorial_runs_top_to_bottom(notebook, jupyter_path, tmp_path, monkeypatch):
    monkeypatch.setenv("JUPYTER_PATH", str(jupyter_path))
    monkeypatch.setenv("TMPDIR", str(tmp_path))  # the notebooks' tempfile directories (runs, kernels) land here
    monkeypatch.setenv("WARP_DRIVE_BACKEND", os.environ.get("WARP_DRIVE_BACKEND", "cpu"))
    nb = nbformat.read(notebook, as_version=4)
    before = _files(TUTORIALS)
    client = nbclient.NotebookClient(
        nb, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(TUTORIALS)}}
    )
    try:
        client.execute()
    except CellExecutionError as error:
        message = re.sub(r"\x1b\[[0-9;]*m", "", str(error))  # the kernel's traceback comes with terminal colours
        pytest.fail(f"{notebook.name}: {_failed_cell(nb)} raised:\n{message}", pytrace=False)
    written = sorted(str(path.relative_to(TUTORIALS)) for path in _files(TUTORIALS) - before)
    assert not written, (
        f"{notebook.name} wrote {written} into tutorials/; write into a tempfile.mkdtemp() directory instead"
    )


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=IDS)
def test_tutorial_is_committed_without_outputs_except_images(notebook):
    nb = nbformat.read(notebook, as_version=4)
    nbformat.validate(nb)
    problems = []
    for number, cell in enumerate(nb.cells, 1):
        if cell.cell_type != "code":
            continue
        if cell.get("execution_count") is not None:
            problems.append(f"cell {number} has execution_count {cell.execution_count}")
        for output in cell.get("outputs", []):
            mime = set(output.get("data", {}))
            if output.output_type != "display_data" or not mime & set(IMAGE_LIMITS) or not mime <= ALLOWED_MIME:
                kinds = f" ({', '.join(sorted(mime))})" if mime else ""
                problems.append(f"cell {number} has a {output.output_type} output{kinds}")
                continue
            for kind, limit in IMAGE_LIMITS.items():
                if kind in output.data and len(base64.b64decode(output.data[kind])) > limit:
                    problems.append(f"cell {number}: its {kind} output is over {limit // 1000} KB")
    assert not problems, (
        f"{notebook.name}: " + "; ".join(problems) + ". Clear the outputs before committing; keep only "
        "small image outputs that readers should see without running the notebook"
    )


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=IDS)
def test_tutorial_is_listed_in_the_index(notebook):
    index = (TUTORIALS / "README.md").read_text(encoding="utf-8")
    assert notebook.name in index, f"tutorials/README.md does not mention {notebook.name}"
