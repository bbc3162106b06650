"""The README's runtime example must run as written (kernel and Python)."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[2] / "README.md"


def _blocks(language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", README.read_text(), re.S)


@pytest.mark.slow  # builds and steps an env (over ~1.5 s: the full suite, not the fast tier)
def test_readme_runtime_example_runs(tmp_path, monkeypatch):
    (kernel,) = [b for b in _blocks("c") if "MyEnvStep" in b]
    (example,) = [b for b in _blocks("python") if "MyEnvStep" in b]
    (tmp_path / "my_env.cu").write_text(kernel)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("WARP_DRIVE_BACKEND", os.environ.get("WARP_DRIVE_BACKEND", "cpu"))
    namespace: dict = {}
    exec(compile(example, str(README), "exec"), namespace)

    dm, rewards = namespace["dm"], namespace["rewards"]
    assert rewards is dm.data_on_device_via_torch("rewards")
    # 1000 steps of 50-step episodes: every env was reset after its last truncation.
    timesteps = dm.pull_data_from_device("_timestep_")
    assert (timesteps == 1000 % 50).all()
    # The final reset restored the start positions; the last step's rewards remain.
    assert (dm.pull_data_from_device("positions") == 0).all()
    assert set(rewards.unique().tolist()) == {0.0, 1.0}  # some random walkers stood on the goal


def test_readme_environment_example_runs(monkeypatch):
    (example,) = [b for b in _blocks("python") if 'EnvWrapper("TagGridWorld"' in b]
    monkeypatch.setenv("WARP_DRIVE_BACKEND", os.environ.get("WARP_DRIVE_BACKEND", "cpu"))
    namespace: dict = {}
    exec(compile(example, str(README), "exec"), namespace)
    env = namespace["env"]
    assert env.obs.shape == (2000, 5, 6) and env.rewards.shape == (2000, 5)
    assert (env.data_manager.pull_data_from_device("_timestep_") == 1).all()  # one step, nothing done yet
