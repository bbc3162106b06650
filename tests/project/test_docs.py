"""The documentation site builds with warnings as errors and has its main pages.

Runs the same command as ``make docs`` into a temporary directory. A docstring
whose markup Sphinx cannot parse, a README section that moved, or a tutorial
notebook missing from the site fails here rather than on the published site.
"""

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCS_PACKAGES = ("sphinx", "myst_nb", "furo")  # the build's own tools (extra ``docs``)

missing = [name for name in DOCS_PACKAGES if importlib.util.find_spec(name) is None]
pytestmark = [
    pytest.mark.skipif(bool(missing), reason=f"docs build needs {', '.join(missing)}: pip install -e '.[docs]'"),
    pytest.mark.slow,  # a whole Sphinx build (the fast tier: pytest -m 'not slow')
]


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    """Build the site once (about 15 s on 2 cores) and return its HTML directory."""
    out = tmp_path_factory.mktemp("docs") / "html"
    cmd = [sys.executable, "-m", "sphinx", "-W", "--keep-going", "-q", "-b", "html", "docs", str(out)]
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, (
        f"`{' '.join(cmd[1:])}` failed (exit {proc.returncode}); fix the warnings below "
        f"(docstring markup, docs/*.md, or a README heading that docs/ includes by name):\n"
        f"{proc.stdout[-4000:]}\n{proc.stderr[-8000:]}"
    )
    return out


def read(site, page):
    path = site / page
    assert path.is_file(), f"{page} missing from the built site; is it in a toctree of docs/index.md?"
    return path.read_text(encoding="utf-8")


def test_migration_guide_is_a_page(site):
    html = read(site, "migrating_from_warpdrive.html")
    assert "Migrating from WarpDrive 2.7" in html
    assert 'id="a-worked-port-linechase-to-the-native-contract"' in html  # the guide's last section


def test_api_reference_documents_public_classes(site):
    html = read(site, "api/env.html")
    assert 'id="warp_drive.env.wrapper.EnvWrapper"' in html
    assert 'id="warp_drive.env.wrapper.EnvWrapper.step_all_envs"' in html
    training = read(site, "api/training.html")
    assert 'id="warp_drive.training.ppo.PPOTrainer"' in training
    assert 'id="warp_drive.training.ppo.losses.ppo_update"' in training
    assert 'id="warp_drive.training.vtrace.VTrace"' in training
    assert 'id="warp_drive.training.config.load_config"' in training


def test_every_tutorial_notebook_is_rendered(site):
    notebooks = sorted((ROOT / "tutorials").glob("*.ipynb"))
    assert notebooks, "no notebooks in tutorials/"
    for nb in notebooks:
        html = read(site, f"tutorials/{nb.stem}.html")
        assert "cell_input" in html, f"tutorials/{nb.stem}.html has no code cells"
    # The README table links each notebook's page.
    index = read(site, "tutorials/README.html")
    for nb in notebooks:
        assert f'href="{nb.stem}.html"' in index, f"tutorials/README.md does not link {nb.name}"
