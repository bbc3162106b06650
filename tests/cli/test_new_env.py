"""``warp-drive new NAME``: the scaffold a user owns passes ``check`` and trains as generated."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from warp_drive.cli import main
from warp_drive.env.scaffold import ScaffoldError, names_for, scaffold


@pytest.mark.parametrize("name, class_name, package", [("Foraging", "Foraging", "foraging"),
                                                        ("level_based_foraging", "LevelBasedForaging",
                                                         "level_based_foraging"),
                                                        ("my-env2", "MyEnv2", "my_env2"),
                                                        ("LBFGrid", "LBFGrid", "lbfgrid")])
def test_names(name, class_name, package):
    assert names_for(name) == {"class_name": class_name, "package": package, "kernel": f"{class_name}Step"}


def test_the_scaffold_has_every_file_with_the_names_filled_in(tmp_path):
    root = scaffold("Foraging", tmp_path)
    files = sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file())
    assert files == ["README.md", "foraging.yaml", "foraging/__init__.py", "foraging/foraging.cu",
                     "foraging/foraging.py", "pyproject.toml", "tests/test_foraging.py"]
    assert "$" not in (root / "foraging" / "foraging.py").read_text()
    assert 'Foraging = "foraging.foraging:Foraging"' in (root / "pyproject.toml").read_text()
    assert 'foraging = ["*.cu"]' in (root / "pyproject.toml").read_text()
    assert "name: foraging.foraging:Foraging" in (root / "foraging.yaml").read_text()
    assert "void ForagingStep(" in (root / "foraging" / "foraging.cu").read_text()


def test_an_existing_folder_or_a_bad_name_is_refused_and_nothing_is_written(tmp_path, capsys):
    (tmp_path / "foraging").mkdir()
    (tmp_path / "foraging" / "mine.txt").write_text("keep")
    assert main(["new", "Foraging", "--dir", str(tmp_path)]) == 2
    assert "exists already" in capsys.readouterr().err
    assert [p.name for p in (tmp_path / "foraging").iterdir()] == ["mine.txt"]
    for bad in ("9lives", "class", "tests"):
        with pytest.raises(ScaffoldError):
            names_for(bad)
    assert main(["new", "9lives", "--dir", str(tmp_path)]) == 2
    assert sorted(p.name for p in tmp_path.iterdir()) == ["foraging"]


def test_a_path_given_as_the_name_is_refused_with_the_dir_spelling(tmp_path, capsys, monkeypatch):
    """``warp-drive new /some/where/Beacon`` once made ``./some_where_beacon`` in the working folder."""
    monkeypatch.chdir(tmp_path)
    target = tmp_path / "envs"
    assert main(["new", f"{target}/Beacon"]) == 2
    err = capsys.readouterr().err
    assert f"warp-drive new Beacon --dir {target}" in err and len(err.strip().splitlines()) == 1, err
    assert list(tmp_path.iterdir()) == []


@pytest.mark.slow
def test_new_then_check_then_train_in_a_fresh_directory(tmp_path):
    def warp_drive(*argv, cwd):
        result = subprocess.run([sys.executable, "-m", "warp_drive", *argv], cwd=cwd, capture_output=True,
                                text=True, timeout=900)
        assert result.returncode == 0, result.stdout + result.stderr
        return result.stdout

    warp_drive("new", "Beacon", cwd=tmp_path)
    root = tmp_path / "beacon"
    table = warp_drive("check", "beacon.beacon:Beacon", cwd=root)
    assert "FAIL" not in table and table.count("PASS") >= 6, table
    summary = warp_drive("train", "--config", "beacon.yaml", "--no-progress", cwd=root)
    row = re.search(r"^shared\s+yes\s+(-?[\d.]+)\s+(-?[\d.]+)", summary, re.M)
    assert row, summary
    before, after = float(row.group(1)), float(row.group(2))
    assert after > before + 5.0, summary  # the return improves well beyond noise (about -22 -> -3)
    assert (root / "runs" / "beacon").is_dir()
