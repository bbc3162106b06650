"""``warp-drive check ENV`` (warp_drive/env/env_check.py): each planted mistake fails the check meant to find it,
naming it, while the checks that cannot see it pass; every example env passes.

The planted envs (tests/env/planted/planted_env.py, one subclass per mistake) are checked by one command, as
``package.module:Class`` from their folder (no packaging), so its two sanitizer children serve them all; the
example envs likewise, at small sizes. Builds land in the build cache and are reused between runs.
"""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

import pytest

from warp_drive.runtime.backends.race import libtsan_path
from warp_drive.cli import main
from warp_drive.env.env_check import CHECKS, GATE_TARGETS
from warp_drive.env.env_rollout import libasan_path, scan
from warp_drive.env.registry import BUILTIN_ENVS
from warp_drive.env.wrapper import EnvWrapper

ROOT = Path(__file__).resolve().parents[2]
PLANTED = ROOT / "tests" / "env" / "planted"
KERNEL = PLANTED / "planted_env.cu"
PLANTED_ENVS = ("PlantedEnv", "MissingBarrier", "PlainIncrement", "NanReward", "WideObservations",
                "WriteOutOfBounds")  # last: ASan ends its child, and the envs after it need another
needs_sanitizers = pytest.mark.skipif(libtsan_path() is None or libasan_path() is None,
                                      reason="g++ has no libtsan or libasan")


def line_of(text: str) -> int:
    return next(i for i, line in enumerate(KERNEL.read_text().splitlines(), 1) if text in line)


def check_command(args: list[str], cwd: Path = ROOT, timeout: int = 900) -> tuple[int, dict, str]:
    """Run ``warp-drive check`` in a process of its own; (exit status, {env: {check: (result, detail)}}, stderr)."""
    proc = subprocess.run([sys.executable, "-m", "warp_drive", "check", *args], cwd=cwd, capture_output=True,
                          text=True, timeout=timeout)
    tables: dict = {}
    for line in proc.stdout.splitlines():
        if not line.startswith(" "):
            env = tables.setdefault(line.split(" ")[0], {})
        elif (row := re.match(r"  (\S+)\s+(PASS|FAIL|SKIP)\s+\S+s  (.*)$", line)):
            env[row.group(1)] = (row.group(2), row.group(3))
    return proc.returncode, tables, proc.stderr


@pytest.fixture(scope="module")
def planted():
    """One ``warp-drive check`` of every planted env (the GPU builds left out: not what these plant)."""
    code, tables, stderr = check_command([*(f"planted_env:{n}" for n in PLANTED_ENVS), "--skip", "gpu-build",
                                          "--steps", "12"], cwd=PLANTED)
    return code, {name.split(":")[1]: rows for name, rows in tables.items()}, stderr


@pytest.mark.slow
@needs_sanitizers
def test_the_planted_env_without_a_mistake_passes(planted):
    _code, tables, _stderr = planted
    assert {check: row[0] for check, row in tables["PlantedEnv"].items()} == {
        check: "PASS" for check in CHECKS if check != "gpu-build"}, tables["PlantedEnv"]


@pytest.mark.slow
@needs_sanitizers
def test_a_missing_barrier_fails_race_mode_and_nothing_else(planted):
    rows = planted[1]["MissingBarrier"]
    assert rows["consistency"][0] == "PASS"  # the fixed thread order hides it from the checker
    status, detail = rows["race"]
    assert status == "FAIL" and "data race" in detail and "`values`" in detail, detail
    assert f"planted_env.cu:{line_of('values[row] = value;')}" in detail
    assert f"planted_env.cu:{line_of('const float left')}" in detail


@pytest.mark.slow
@needs_sanitizers
def test_a_plain_increment_across_threads_fails_race_mode(planted):
    rows = planted[1]["PlainIncrement"]
    assert rows["consistency"][0] == "PASS" and rows["rollout"][0] == "PASS"
    status, detail = rows["race"]
    assert status == "FAIL" and "data race" in detail and "`count`" in detail, detail
    assert f"planted_env.cu:{line_of('count[env] += 1;')}" in detail


@pytest.mark.slow
@needs_sanitizers
def test_an_out_of_bounds_write_fails_asan_and_is_not_run_in_process(planted):
    rows = planted[1]["WriteOutOfBounds"]
    status, detail = rows["asan"]
    assert status == "FAIL" and "heap-buffer-overflow" in detail and "WRITE of size 4" in detail, detail
    assert f"in PlantedStep at planted_env.cu:{line_of('rewards[row + 1] = 1.0f;')}" in detail
    assert all(rows[check][0] == "SKIP" for check in ("host-api", "consistency", "rollout")), rows


@pytest.mark.slow
@needs_sanitizers
def test_an_observation_space_wider_than_its_array_fails_construction(planted):
    rows = planted[1]["WideObservations"]
    status, detail = rows["construction"]
    assert status == "FAIL" and "'observations'" in detail and "(3, 4, 2)" in detail and "(3,)" in detail, detail
    assert rows["rollout"] == ("SKIP", "construction failed")


@pytest.mark.slow
@needs_sanitizers
def test_a_nan_reward_fails_the_rollout_scan(planted):
    rows = planted[1]["NanReward"]
    assert rows["consistency"][0] == "PASS" and rows["race"][0] == "PASS"  # the reference has the NaN too
    status, detail = rows["rollout"]
    assert status == "FAIL" and "'rewards' env 0, agent 0 is nan" in detail and "after step 3" in detail, detail


@pytest.mark.slow
@needs_sanitizers
def test_a_failure_exits_1_with_the_first_failure_in_one_line(planted):
    code, _tables, stderr = planted
    assert code == 1
    [line] = [x for x in stderr.splitlines() if x.startswith("warp-drive check:")]
    assert line.startswith("warp-drive check: planted_env:MissingBarrier: check race failed: kernel PlantedStep")
    assert "Fix: put a wd_sync_env()" in line


@pytest.mark.slow
def test_every_example_env_passes():
    """Every check but gpu-build and race, which other tests already run on every shipped kernel: the build
    gate (tests/runtime/test_build_gate.py) builds them for the same targets, and race mode
    (tests/runtime/test_race_mode.py) runs every example env under ThreadSanitizer at three thread counts.
    tests/cli/test_new_env.py runs the whole check, and the planted envs here fail race and asan."""
    code, tables, stderr = check_command([*BUILTIN_ENVS, "--num-envs", "2", "--steps", "8",
                                          "--skip", "gpu-build", "race"])
    assert code == 0, stderr[-3000:]
    assert set(tables) == set(BUILTIN_ENVS)
    allowed_skips = {"asan": libasan_path() is None, "consistency": False}
    for env, rows in tables.items():
        assert set(rows) == set(CHECKS) - {"gpu-build", "race"}, (env, rows)
        for check, (status, detail) in rows.items():
            assert status == "PASS" or (status == "SKIP" and allowed_skips[check]), (env, check, detail)


def test_the_gpu_build_check_builds_the_gate_targets():
    source = (ROOT / "tests" / "runtime" / "test_build_gate.py").read_text()
    assignment = next(n for n in ast.parse(source).body if isinstance(n, ast.Assign)
                      and getattr(n.targets[0], "id", "") == "TARGETS")
    assert ast.literal_eval(assignment.value) == GATE_TARGETS


def test_the_scan_names_nan_out_of_range_state_and_a_mask_row_with_no_legal_action():
    sys.path.insert(0, str(PLANTED))
    try:
        from planted_env import PlantedEnv
    finally:
        sys.path.remove(str(PLANTED))
    wrapper = EnvWrapper(PlantedEnv, 2, backend="cpu", seed=0)
    wrapper.reset_all_envs()
    assert scan(wrapper) is None
    for name, index, value, expected in [
        ("rewards", (1, 2), float("inf"), "'rewards' env 1, agent 2 is inf: not finite"),
        ("count", (0,), 5, "'count' env 0 is 5: outside array_ranges() [0, 4]"),
        ("_timestep_", (1,), -1, "'_timestep_' env 1 is -1: outside array_ranges() [0, 6]"),
        ("action_mask", (1, 3), 0, "'action_mask' env 1, agent 3: no legal action"),
    ]:
        array = wrapper.data_manager.data_on_device_via_torch(name)
        kept = array.clone()
        array[index] = value
        assert expected in (scan(wrapper) or ""), (name, scan(wrapper))
        array.copy_(kept)
    assert scan(wrapper) is None


@pytest.mark.parametrize("args, message", [
    (["check"], "give an ENV"),
    (["check", "DummyEnv", "--only", "races"], "no check named races"),
    (["check", "DummyEnv", "--set", "trainer.num_envs=4"], "env.config.KEY=VALUE only"),
    (["check", "NoSuchEnv"], "no environment named 'NoSuchEnv'"),
    (["check", "DummyEnv", "--config", "cartpole"], "the config's env is 'CartPole'"),
])
def test_usage_mistakes_exit_2_in_one_line(args, message, capsys):
    assert main(args) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and len(err.splitlines()) == 1, err


def test_config_and_set_reach_the_env(capsys):
    assert main(["check", "--config", "dummy_env", "--set", "env.config.episode_length=5", "--only", "host-api",
                 "construction"]) == 0
    out = capsys.readouterr().out
    assert "DummyEnv {'num_agents': 4, 'episode_length': 5}" in out and "episode_length 5" in out, out
