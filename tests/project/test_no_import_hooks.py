"""``import warp_drive`` installs no import hook, and the example envs have one home.

The example environments are the top-level package ``example_envs`` (WarpDrive
2.7's name), beside ``warp_drive`` in a checkout and once installed, with one
import path: there is no ``warp_drive.example_envs`` alias and no finder that
makes one. Gymnasium's ids are registered by ``import warp_drive`` itself, in
either import order, with no hook waiting for Gymnasium's import.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def run_python(code: str, cwd: Path = ROOT) -> str:
    proc = subprocess.run([sys.executable, "-c", code], cwd=cwd, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    return proc.stdout


IMPORT_LEAVES_NO_HOOK = """
import sys
before = (list(sys.meta_path), list(sys.path_hooks), dict(sys.path_importer_cache))
import warp_drive
after = (list(sys.meta_path), list(sys.path_hooks), dict(sys.path_importer_cache))
assert after[0] == before[0], f"import warp_drive changed sys.meta_path: {before[0]} -> {after[0]}"
assert after[1] == before[1], f"import warp_drive changed sys.path_hooks: {before[1]} -> {after[1]}"
assert "torch" not in sys.modules, "import warp_drive imported torch"
import gymnasium
assert sys.meta_path == before[0]
env = gymnasium.make("warp_drive/CartPole-v1", backend="cpu")
obs, _ = env.reset(seed=0)
print(type(env.unwrapped).__name__, obs.shape, env.spec.id)
"""


@pytest.mark.slow  # a child process each (over ~1.5 s on the 2-core VM)
def test_import_warp_drive_leaves_sys_meta_path_alone_and_gymnasium_make_works():
    out = run_python(IMPORT_LEAVES_NO_HOOK)
    assert out.split() == ["GymnasiumEnv", "(4,)", "warp_drive/CartPole-v1"], out


def test_the_example_envs_have_one_import_path_beside_warp_drive():
    code = """
import importlib.util, sys
from pathlib import Path
import warp_drive
import example_envs.tag_continuous.tag_continuous as module
from warp_drive.env.registry import get_env_class
assert get_env_class("TagContinuous") is module.TagContinuous
assert importlib.util.find_spec("warp_drive.example_envs") is None, "warp_drive.example_envs is importable"
assert not [name for name in sys.modules if name.startswith("warp_drive.example_envs")]
assert Path(module.__file__).parents[2] == Path(warp_drive.__file__).parents[1]
print(module.TagContinuous.cuda_source_path())
"""
    out = run_python(code)
    assert out.strip() == str(ROOT / "example_envs" / "tag_continuous" / "tag_continuous.cu")


def test_a_users_own_example_envs_package_is_named_when_it_hides_the_builtin_envs(tmp_path):
    """Both are top-level packages, so the first on sys.path wins (as with WarpDrive 2.7's): a package of the
    user's own named example_envs hides the built-in envs, and looking one up says which file did it."""
    (tmp_path / "example_envs").mkdir()
    (tmp_path / "example_envs" / "__init__.py").write_text("OWNER = 'user'\n")
    # As a wheel installs them: the checkout after the current directory on sys.path, and without the finder of
    # an editable install (which would find the project's subpackages inside the user's package).
    code = f"""
import sys
sys.meta_path[:] = [finder for finder in sys.meta_path if "__editable__" not in getattr(finder, "__module__", "")]
sys.path.insert(1, {str(ROOT)!r})
import example_envs
from warp_drive.env.registry import EnvLookupError, get_env_class
assert example_envs.OWNER == "user"
try:
    get_env_class("TagContinuous")
except EnvLookupError as exc:
    print(exc)
else:
    raise SystemExit("the user's example_envs did not hide the built-in TagContinuous")
"""
    out = run_python(code, cwd=tmp_path)
    assert str(tmp_path / "example_envs" / "__init__.py") in out and "rename a package of your own" in out, out
    assert "example_envs.tag_continuous.tag_continuous:TagContinuous" in out, out


def test_a_module_extension_is_an_entry_point_named_after_the_module():
    """WarpDrive's CUDATagGridWorld reaches the example env's module through its entry point, not an import."""
    from warp_drive.compat.example_envs import CUDATagGridWorld
    from warp_drive.env.registry import module_extension

    module = "example_envs.tag_gridworld.tag_gridworld"
    assert module_extension(module, "CUDATagGridWorld") is CUDATagGridWorld
    for name in ("NoSuchName", "_CUDATagGridWorld", "__path__"):
        with pytest.raises(AttributeError, match=f"module '{module}' has no attribute '{name}'"):
            module_extension(module, name)
    with pytest.raises(AttributeError, match="has no attribute 'CUDATagGridWorld'"):
        module_extension("example_envs.tag_continuous.tag_continuous", "CUDATagGridWorld")
