"""Race mode (``WARP_DRIVE_CPU_MODE=race``: ThreadSanitizer over CUDA threads) and the
thread-order shuffle: GPU bugs that the cpu executor's fixed thread order hides.

* Planted bugs (tests/kernels/race_planted.cu): a missing barrier, a non-atomic
  accumulation, a warp-lockstep reduction and an inter-block race each fail
  their launch with KernelRaceError naming the kernel, both source lines and
  the array; the same kernels with their fix (-DFIXED=1) run clean and right.
* Every shipped kernel runs clean in race mode: each example env's consistency
  check at three thread counts (fewer threads than agents included; one env
  natively too), and the framework's kernels as the demo and training use them.
* The shuffle (no TSan needed) finds a kernel whose result depends on thread
  order, and leaves order-independent kernels' results bit for bit.

Race mode needs a process started with libtsan preloaded: those tests read the
results of tests/runtime/race_child.py, run once in such a process (about 80 s).
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from warp_drive.runtime.backends.cpu import CpuBackend, GpuShapedCpuBackend
from warp_drive.runtime.backends.race import libtsan_path, race_environment, shuffle_seed_from_environment
from warp_drive.env.consistency import check
from warp_drive.env.registry import get_env_class

ROOT = Path(__file__).resolve().parents[2]
CHILD = Path(__file__).with_name("race_child.py")
PLANTED = ROOT / "tests" / "kernels" / "race_planted.cu"

needs_tsan = pytest.mark.skipif(libtsan_path() is None, reason="g++ has no libtsan (Debian: apt install libtsan2)")


@pytest.fixture(scope="module")
def race_run() -> dict:
    """Every race-mode result, from one process started for race mode (its start costs ~5 s)."""
    proc = subprocess.run([sys.executable, str(CHILD)], env=race_environment(), cwd=ROOT, capture_output=True,
                          text=True, timeout=900)
    assert proc.returncode == 0, f"the race-mode child exited {proc.returncode}:\n{proc.stderr[-4000:]}"
    return json.loads(proc.stdout.strip().splitlines()[-1])


def line_of(text: str, path: Path = PLANTED, occurrence: int = 0) -> int:
    """Line number of the `occurrence`-th line of `path` containing `text`."""
    hits = [i for i, line in enumerate(path.read_text().splitlines(), 1) if text in line]
    return hits[occurrence]


def kernels_in(paths) -> set[str]:
    names = set()
    for path in paths:
        names.update(re.findall(r"__global__\s+void\s+(\w+)", Path(path).read_text()))
    return names


# --------------------------------------------------------------------------- planted bugs


@pytest.fixture
def planted(race_run):
    return race_run["planted"]


@pytest.mark.slow
@needs_tsan
def test_a_missing_barrier_is_reported_with_both_lines(planted):
    bug, fixed = planted["neighbour_sum/0"], planted["neighbour_sum/1"]
    assert bug["race"], bug
    assert "kernel neighbour_sum" in bug["error"] and "`__shared__` memory" in bug["error"]
    assert f"race_planted.cu:{line_of('cells[t] = in[row + t];')}" in bug["error"]
    assert f"race_planted.cu:{line_of('out[row + t] = cells[t]')}" in bug["error"]
    values = (torch.arange(32, dtype=torch.int32) * 3 + 1).view(4, 8)
    assert fixed["error"] is None and fixed["result"] == (values + values.roll(-1, dims=1)).flatten().tolist()


@pytest.mark.slow
@needs_tsan
def test_a_non_atomic_accumulation_is_reported_on_its_array(planted):
    bug, fixed = planted["block_total/0"], planted["block_total/1"]
    assert bug["race"], bug
    assert "array parameter `totals`" in bug["error"]
    assert bug["error"].count(f"race_planted.cu:{line_of('totals[blockIdx.x] += in[i];')}") == 2
    values = (torch.arange(32, dtype=torch.int32) * 3 + 1).view(4, 8)
    assert fixed["error"] is None and fixed["result"] == values.sum(dim=1).tolist()


@pytest.mark.slow
@needs_tsan
def test_a_warp_lockstep_reduction_is_reported(planted):
    bug, fixed = planted["warp_reduce/0"], planted["warp_reduce/1"]
    assert bug["race"], bug
    loop = line_of("if (t < s) partial[t] += partial[t + s];", occurrence=1)  # the barrier-free (buggy) loop
    assert "`__shared__` memory" in bug["error"] and f"race_planted.cu:{loop}" in bug["error"]
    assert fixed["error"] is None and fixed["result"] == torch.arange(128).view(2, 64).sum(dim=1).tolist()


@pytest.mark.slow
@needs_tsan
def test_a_race_between_blocks_is_reported(planted):
    bug, fixed = planted["count_blocks/0"], planted["count_blocks/1"]
    assert bug["race"], bug
    assert "array parameter `counter`, element 0" in bug["error"]
    blocks = set(re.findall(r"by block (\(\d+,\d+,\d+\))", bug["error"]))
    assert len(blocks) == 2, f"two different blocks should be named: {bug['error']}"
    assert fixed["error"] is None and fixed["result"] == [6]


# --------------------------------------------------------------------------- shipped kernels


@pytest.mark.slow
@needs_tsan
def test_every_example_env_is_race_free_at_three_thread_counts(race_run):
    result = dict(race_run["envs"])
    launched = set(result.pop("launched"))
    failures = {name: outcome["error"] for name, outcome in result.items() if outcome["error"]}
    assert not failures, failures
    assert all(outcome["result"] >= 5 for outcome in result.values()), result  # steps actually checked
    env_kernels = kernels_in((ROOT / "example_envs").rglob("*.cu"))
    assert env_kernels and env_kernels <= launched, f"env kernels that did not run: {env_kernels - launched}"
    phase_envs = {name.split("/")[0] for name in result if "/threads<=" in name}
    assert len(phase_envs) == 6 and "TagContinuous/native" in result
    for env in phase_envs:  # one thread per agent, and fewer threads than agents
        assert {f"{env}/threads<={cap}" for cap in (64, 3, 2)} <= set(result), env


@pytest.mark.slow
@needs_tsan
def test_the_framework_kernels_are_race_free(race_run):
    result = dict(race_run["framework"])
    launched = set(result.pop("launched"))
    failures = {name: outcome["error"] for name, outcome in result.items() if outcome["error"]}
    assert not failures, failures
    framework = kernels_in([*(ROOT / "warp_drive" / "cuda" / "kernels").glob("*.cu"), ROOT / "warp_drive" / "cuda"
                            / "demo" / "walk.cu"])
    assert framework <= launched, f"framework kernels that did not run in race mode: {framework - launched}"


@pytest.mark.slow  # a child process (over ~1.5 s: the full suite, not the fast tier)
def test_race_mode_without_libtsan_says_how_to_start_it():
    code = "from warp_drive.runtime.backends.cpu import CpuBackend; CpuBackend(mode='race')"
    env = {k: v for k, v in race_environment().items() if k != "LD_PRELOAD"}
    proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode != 0
    assert "LD_PRELOAD=" in proc.stderr and "libtsan" in proc.stderr and "race_environment()" in proc.stderr


# --------------------------------------------------------------------------- the shuffle


@pytest.fixture
def shuffled_backend():
    backend = CpuBackend()
    yield backend
    backend.set_shuffle(None)


def test_the_shuffle_finds_a_result_that_depends_on_thread_order(shuffled_backend):
    """`last_writer` keeps whichever thread wrote last: always thread 15 in the
    executor's fixed order, some other thread once the order is shuffled."""
    def winners(fixed: int, seed) -> list[int]:
        shuffled_backend.set_shuffle(seed)
        module = shuffled_backend.build([PLANTED], defines={"FIXED": str(fixed)})
        out = torch.full((4,), -1, dtype=torch.int32)
        module._kernel("last_writer").bind(out).launch(4, 16)
        return out.tolist()

    assert winners(0, None) == [15] * 4  # the fixed order hides the bug
    shuffled = [winners(0, seed) for seed in range(4)]
    assert any(w != [15] * 4 for w in shuffled), shuffled
    assert len({tuple(w) for w in shuffled}) > 1, "different seeds should give different orders"
    assert all(winners(1, seed) == [15] * 4 for seed in (None, *range(4)))


def test_the_shuffle_leaves_order_independent_kernels_bit_for_bit(shuffled_backend):
    module = shuffled_backend.build([ROOT / "tests" / "kernels" / "sync.cu"])
    cells = torch.from_numpy(np.random.default_rng(0).integers(0, 10007, size=(3, 40), dtype=np.int32))

    def stencil(seed):
        shuffled_backend.set_shuffle(seed)
        out = torch.zeros_like(cells)
        module._kernel("stencil_rounds").bind(cells, out, 5).launch(3, 40)
        return out

    plain = stencil(None)
    for seed in (1, 2, 3):
        assert torch.equal(stencil(seed), plain)


@pytest.mark.parametrize("env", ["TagContinuous", "PandemicEconomy"])
@pytest.mark.slow  # a child process (over ~1.5 s: the full suite, not the fast tier)
def test_phase_envs_match_their_reference_with_shuffled_threads(env, shuffled_backend):
    shaped = GpuShapedCpuBackend()
    shaped.set_shuffle(5)  # process-wide, as the worker pool is; the fixture turns it off
    report, = check(get_env_class(env), [{"episode_length": 8}], num_envs=2, num_episodes=1, backend=shaped, seed=2)
    assert report.steps == 8


def test_the_shuffle_variable_takes_a_seed_or_off(monkeypatch):
    monkeypatch.setenv("WARP_DRIVE_CPU_SHUFFLE", "0x10")
    assert shuffle_seed_from_environment(None) == 16
    monkeypatch.setenv("WARP_DRIVE_CPU_SHUFFLE", "off")
    assert shuffle_seed_from_environment(0) is None
    monkeypatch.delenv("WARP_DRIVE_CPU_SHUFFLE")
    assert shuffle_seed_from_environment(0) == 0
    monkeypatch.setenv("WARP_DRIVE_CPU_SHUFFLE", "fast")
    with pytest.raises(ValueError, match="WARP_DRIVE_CPU_SHUFFLE='fast'"):
        shuffle_seed_from_environment(None)
