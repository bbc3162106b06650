"""Packaging: the wheel and sdist built from pyproject.toml, what the wheel
installs, and the package's import surface (lazy exports, example envs)."""

from __future__ import annotations

import os
import subprocess
import sys
import venv
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
# Files that belong in the wheel: Python sources and the package data.
SHIPPED_SUFFIXES = {".py", ".cu", ".h", ".cuh", ".hpp", ".cpp", ".S", ".yaml"}


def build_env() -> dict:
    env = dict(os.environ)
    # With this set, setuptools warns that byte-compiling is disabled (a
    # property of the caller's environment, not of the package), and a venv
    # installed with --no-compile would compile its modules in every process.
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env


@pytest.fixture(scope="module")
def dist(tmp_path_factory):
    """(output of ``python -m build``, wheel path, sdist path).

    Without ``--wheel --sdist``, build makes the sdist and then the wheel from
    the unpacked sdist: that checks the sdist is complete, and leaves no
    ``build/`` folder in the checkout whose stale files a later wheel would pack.
    """
    try:
        import build  # noqa: F401
    except ImportError:
        pytest.fail("the `build` package is missing: pip install -e '.[dev]'")
    out = tmp_path_factory.mktemp("dist")
    proc = subprocess.run(
        [sys.executable, "-m", "build", "--outdir", str(out), str(ROOT)],
        capture_output=True,
        text=True,
        env=build_env(),
    )
    log = proc.stdout + proc.stderr
    assert proc.returncode == 0, f"python -m build failed:\n{log[-4000:]}"
    (wheel,) = out.glob("*.whl")
    (sdist,) = out.glob("*.tar.gz")
    return log, wheel, sdist


@pytest.mark.slow
def test_build_prints_no_warnings(dist):
    log, _, _ = dist
    warnings = [line for line in log.splitlines() if "warning" in line.lower()]
    assert not warnings, "python -m build warned:\n" + "\n".join(warnings)


@pytest.mark.slow
def test_wheel_ships_the_package_and_the_example_envs_as_two_top_level_names(dist):
    _, wheel, _ = dist
    names = set(zipfile.ZipFile(wheel).namelist())
    top_levels = {name.split("/")[0] for name in names if not name.split("/")[0].endswith(".dist-info")}
    assert top_levels == {"warp_drive", "example_envs"}, f"wheel installs top-level {sorted(top_levels)}"
    assert not [n for n in names if n.startswith("warp_drive/example_envs/")], "example envs installed twice"
    assert "warp_drive/py.typed" in names
    assert any(n.startswith("warp_drive-") and n.endswith(".dist-info/licenses/LICENSE") for n in names)
    # WarpDrive's CUDATagGridWorld reaches its example env module through this entry point (no compat import).
    (entry_points,) = [n for n in names if n.endswith(".dist-info/entry_points.txt")]
    assert "[example_envs.tag_gridworld.tag_gridworld]" in zipfile.ZipFile(wheel).read(entry_points).decode()

    # Every source and data file of the checkout lands in the wheel, under the
    # same path. (pyproject.toml lists the packages one by one: a new
    # subpackage missing there fails here.)
    expected = set()
    for folder in ("warp_drive", "example_envs"):
        for path in (ROOT / folder).rglob("*"):
            if path.suffix in SHIPPED_SUFFIXES and "__pycache__" not in path.parts:
                expected.add(path.relative_to(ROOT).as_posix())
    missing = sorted(expected - names)
    assert not missing, f"not in the wheel (add the package or data pattern to pyproject.toml): {missing}"
    assert "example_envs/tag_continuous/tag_continuous.cu" in names
    assert "warp_drive/training/configs/cartpole.yaml" in names


@pytest.mark.slow
def test_sdist_builds_the_same_layout(dist):
    import tarfile

    _, _, sdist = dist
    names = {name.split("/", 1)[1] for name in tarfile.open(sdist).getnames() if "/" in name}
    for required in ("pyproject.toml", "setup.py", "requirements.txt", "LICENSE", "CITATION.cff", "README.md",
                     "example_envs/tag_continuous/tag_continuous.cu"):
        assert required in names, f"{required} missing from the sdist"


def test_citation_names_the_package_version():
    import yaml

    import warp_drive

    citation = yaml.safe_load((ROOT / "CITATION.cff").read_text())
    assert citation["cff-version"] == "1.2.0"
    assert str(citation["version"]) == warp_drive.__version__, "update version: in CITATION.cff"
    assert any("WarpDrive" in ref["title"] for ref in citation["references"])


def test_dir_lists_the_lazy_exports():
    import warp_drive

    listed = dir(warp_drive)
    for name in warp_drive.__all__:
        assert name in listed, f"dir(warp_drive) lacks {name}"
        assert getattr(warp_drive, name) is not None


# Run in a fresh interpreter (nothing imported yet): the example envs import
# before warp_drive, as WarpDrive programs do, and are the registry's classes;
# WarpDrive's CUDATagGridWorld comes from its entry point.
EXAMPLE_ENVS_CHECK = """
import example_envs.tag_continuous.tag_continuous as a
from example_envs.tag_gridworld.tag_gridworld import CUDATagGridWorld, TagGridWorld
from warp_drive.env.registry import get_env_class
assert get_env_class("TagContinuous") is a.TagContinuous
assert issubclass(CUDATagGridWorld, TagGridWorld) and CUDATagGridWorld.__module__ == "warp_drive.compat.example_envs"
print("ok", a.TagContinuous.cuda_source_path())
"""


def test_example_envs_import_first_from_the_checkout():
    proc = subprocess.run([sys.executable, "-c", EXAMPLE_ENVS_CHECK], cwd=ROOT, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.startswith("ok") and proc.stdout.strip().endswith("tag_continuous.cu")


def _requirement_lines(text: str) -> list[str]:
    return [line.split("#")[0].strip() for line in text.splitlines() if line.split("#")[0].strip()]


def test_requirements_txt_is_pyprojects_runtime_dependencies():
    """requirements.txt (the design card's top level) lists exactly pyproject.toml's
    [project] dependencies, in order: one source of metadata, one copy kept in step."""
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10
        tomllib = pytest.importorskip("tomli")
    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    listed = _requirement_lines((ROOT / "requirements.txt").read_text())
    assert listed == declared, f"requirements.txt {listed} != pyproject.toml's dependencies {declared}"


def test_setup_py_is_a_shim_over_pyproject():
    """setup.py passes nothing to setup(): the metadata has one home, pyproject.toml."""
    import ast

    tree = ast.parse((ROOT / "setup.py").read_text())
    calls = [node for node in ast.walk(tree) if isinstance(node, ast.Call) and getattr(node.func, "id", "") == "setup"]
    assert len(calls) == 1 and not calls[0].args and not calls[0].keywords


def _train_briefly(warp_drive_exe: Path, tmp_path: Path, name: str, env: dict | None = None) -> None:
    """``warp-drive train`` of CartPole for 1024 steps, outside the checkout; a run directory must appear."""
    runs = tmp_path / name
    train = subprocess.run(
        [str(warp_drive_exe), "train", "--config", "cartpole",
         "--set", "trainer.total_steps=1024", f"saving.basedir={runs}"],
        cwd=tmp_path, capture_output=True, text=True, env=env,
    )  # fmt: skip
    assert train.returncode == 0, train.stdout[-3000:] + train.stderr[-3000:]
    assert [p for p in runs.rglob("*") if p.is_dir() and p.parent.name == "experiment"], f"no run directory under {runs}"


@pytest.mark.slow
def test_source_install_and_wheel_train_in_a_bare_venv(dist, tmp_path):
    """Both install paths, one after the other in one venv without the system's
    packages (one venv: torch and the dependencies are installed once):

    1. ``pip install -r requirements.txt && pip install .`` from a copy of the
       tracked files (so that the build leaves nothing in the checkout), torch's
       CPU wheel first as the Makefile does (or pip would fetch the CUDA build);
       then ``warp-drive train``;
    2. the wheel of ``python -m build`` over it (``--force-reinstall --no-deps``:
       its dependencies are requirements.txt's, which another test holds equal to
       pyproject's, and ``pip check`` confirms they are met); ``warp-drive train``
       again, and the example envs load from the venv, before warp_drive as
       WarpDrive programs import them."""
    import shutil

    import torch

    listed = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True)
    if listed.returncode != 0:
        pytest.skip("not a git checkout: the tracked files are not known")
    source = tmp_path / "source"
    for name in filter(None, listed.stdout.decode().split("\0")):
        target = source / name
        target.parent.mkdir(parents=True, exist_ok=True)
        if (ROOT / name).is_file():
            shutil.copy2(ROOT / name, target)
    env_dir = tmp_path / "venv"
    venv.create(env_dir, with_pip=True)
    python = str(env_dir / "bin" / "python")
    torch_spec = "torch==" + torch.__version__.split("+")[0]  # the wheel this venv uses, from pip's find-links/cache
    _, wheel, _ = dist
    # --no-compile, and the venv's processes may write bytecode: each module is compiled once, when first
    # imported, instead of every file of torch & co. at install (about 25 s of CPU less on the 2-core VM).
    env = build_env()
    steps = ([torch_spec], ["-r", "requirements.txt"], ["."])
    for step in steps:
        install = subprocess.run([python, "-m", "pip", "install", "-q", "--no-compile", *step], cwd=source,
                                 capture_output=True, text=True, env=env)
        assert install.returncode == 0, f"pip install {' '.join(step)}:\n" + install.stdout[-3000:] + install.stderr[-3000:]
    _train_briefly(env_dir / "bin" / "warp-drive", tmp_path, "runs_source", env)

    for step in (["install", "-q", "--no-compile", "--force-reinstall", "--no-deps", str(wheel)], ["check"]):
        pip = subprocess.run([python, "-m", "pip", *step], cwd=tmp_path, capture_output=True, text=True, env=env)
        assert pip.returncode == 0, f"pip {' '.join(step)}:\n" + pip.stdout[-3000:] + pip.stderr[-3000:]
    _train_briefly(env_dir / "bin" / "warp-drive", tmp_path, "runs_wheel", env)

    # Outside the checkout: the installed packages are the ones imported. The example
    # envs first, before any warp_drive import, as WarpDrive's tests and tutorial 7 do.
    check = subprocess.run(
        [python, "-c", EXAMPLE_ENVS_CHECK],
        cwd=tmp_path, capture_output=True, text=True, env=env,
    )  # fmt: skip
    assert check.returncode == 0, check.stdout + check.stderr
    assert str(env_dir) in check.stdout, f"example env not loaded from the venv: {check.stdout}"