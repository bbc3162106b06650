"""``tests/gpu/sanitize_envs.py``, the workload compute-sanitizer runs on a GPU, keeps working here.

On a GPU it is run as ``compute-sanitizer --tool memcheck|initcheck|racecheck|synccheck
python tests/gpu/sanitize_envs.py --backend pycuda`` (README, "GPU results"). Here it runs
on the cpu executor, so a change to an env or the wrapper that breaks it shows up in CI
and not first on a lent GPU.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
DRIVER = REPO / "tests" / "gpu" / "sanitize_envs.py"


@pytest.mark.slow
def test_sanitizer_driver_runs_every_builtin_env_and_training_on_the_cpu_executor():
    from warp_drive.env.registry import BUILTIN_ENVS

    proc = subprocess.run([sys.executable, str(DRIVER), "--backend", "cpu"], cwd=REPO, capture_output=True,
                          text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = proc.stdout.splitlines()
    driven = {line.split(":")[0] for line in lines if " block(s) per env" in line}
    assert driven == set(BUILTIN_ENVS), lines
    assert any(line.startswith("training ") for line in lines), lines
    assert lines[-1] == "sanitizer driver: done"
