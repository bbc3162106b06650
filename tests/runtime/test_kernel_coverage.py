"""Every line of every shipped env kernel runs in some CPU test, in both cpu shapes together.

The env test files run once more in a child process with the cpu executor's
``coverage`` mode (gcov line counts); a line that nvcc compiles but no test
executes -- typically a branch only a GPU's geometry would take -- fails here
with its file and line. Lines a host compiler never sees (``#ifdef
__CUDACC__``) have no counts and are not judged.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # gcov build of every example kernel (the fast tier: pytest -m 'not slow')

ROOT = Path(__file__).resolve().parents[2]
ENV_TESTS = ["tests/env/test_tag_continuous.py", "tests/env/test_tag_gridworld.py", "tests/env/test_classic_control.py",
             "tests/env/test_env_wrapper.py", "tests/env/test_simple_spread.py",
             "tests/env/test_pandemic_economy.py"]
# What a user's env is made of: the example envs' kernels and the layer-1 headers they build on.
JUDGED = sorted((ROOT / "example_envs").glob("*/*.cu")) + [
    ROOT / "warp_drive" / "cuda" / "include" / "warp_drive" / name for name in ("agents.h", "neighbors.h")]


def line_counts(cache: Path) -> dict[Path, dict[int, int]]:
    """Executions per line of every source file, summed over every module's gcov data in ``cache``."""
    counts: dict[Path, dict[int, int]] = defaultdict(lambda: defaultdict(int))
    for data in cache.rglob("*.gcda"):
        out = subprocess.run(["gcov", "--json-format", "--stdout", data.name], cwd=data.parent,
                             capture_output=True, text=True, check=True).stdout
        for document in filter(None, out.splitlines()):
            for record in json.loads(document)["files"]:
                for line in record["lines"]:
                    counts[Path(record["file"]).resolve()][line["line_number"]] += line["count"]
    return counts


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("gcov") is None, reason="gcov (from gcc) not found")
def test_every_line_of_the_example_env_kernels_runs_on_the_cpu(tmp_path):
    env = {**os.environ, "WARP_DRIVE_CPU_MODE": "coverage", "WARP_DRIVE_CACHE": str(tmp_path / "cache"),
           "WARP_DRIVE_BACKEND": "cpu"}
    run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider", "-m", "not gpu and not slow",
                          "-k", "not coverage", *ENV_TESTS], cwd=ROOT, env=env, capture_output=True, text=True)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    counts = line_counts(tmp_path / "cache")
    missed = []
    for source in JUDGED:
        lines = counts.get(source.resolve())
        assert lines, f"no coverage data for {source}: did the env tests build it?"
        missed += [f"{source.relative_to(ROOT)}:{n}" for n, c in sorted(lines.items()) if c == 0]
    assert not missed, "lines no CPU test executes:\n" + "\n".join(missed)
