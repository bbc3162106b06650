"""``example_envs`` is an alias of ``warp_drive.example_envs`` -- unless the user has
a package of that name of their own, which then wins whether it is imported before
or after ``warp_drive`` (it once won only before)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

PROGRAM = """
import sys
sys.path.insert(0, sys.argv[1])
if sys.argv[2] == "user-first":
    import example_envs.first
import warp_drive
import example_envs, example_envs.second
from warp_drive.example_envs.tag_continuous.tag_continuous import TagContinuous
print(example_envs.OWNER, example_envs.second.WHAT, TagContinuous.__module__)
"""


def run(tmp_path: Path, order: str) -> str:
    package = tmp_path / "example_envs"
    package.mkdir(exist_ok=True)
    (package / "__init__.py").write_text("OWNER = 'user'\n")
    (package / "first.py").write_text("WHAT = 'first'\n")
    (package / "second.py").write_text("WHAT = 'second'\n")
    proc = subprocess.run([sys.executable, "-c", PROGRAM, str(tmp_path), order], capture_output=True, text=True,
                          cwd=tmp_path, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.split()


def test_a_users_own_example_envs_wins_after_warp_drive_is_imported(tmp_path):
    assert run(tmp_path, "warp-drive-first") == ["user", "second", "warp_drive.example_envs.tag_continuous.tag_continuous"]


def test_a_users_own_example_envs_wins_when_imported_first(tmp_path):
    assert run(tmp_path, "user-first") == ["user", "second", "warp_drive.example_envs.tag_continuous.tag_continuous"]


def test_without_one_example_envs_is_the_projects(tmp_path):
    code = ("import warp_drive, example_envs, example_envs.tag_continuous.tag_continuous as t, warp_drive.example_envs as w; "
            "print(t.__name__, example_envs is w)")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["warp_drive.example_envs.tag_continuous.tag_continuous", "True"]
