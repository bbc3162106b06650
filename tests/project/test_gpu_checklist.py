"""The GPU checklist (``tests/gpu/``) keeps working without a GPU.

A lent GPU machine is rare and its time short (15 minutes a session), so a
checklist that breaks -- a shell syntax error, a flag the workload no longer
takes, a tool or target dropped, a report that no longer says what ran -- must
show up here and not first on the device. These tests:

* parse ``checklist.sh`` and ``device_setup.sh`` with ``bash -n``;
* check ``sanitize_envs.py``'s arguments and run each of its three targets (a
  small TagContinuous step, a TagGridWorld step, the cooperative DummyEnv) on
  the cpu executor;
* run ``checklist.sh`` itself over its compute-sanitizer steps on the cpu
  executor, with a stub ``compute-sanitizer`` that runs the workload and prints
  the real tool's summary lines, and read its one report, ``gpu_report.md``:
  a row per tool and target with rc, seconds and the SUMMARY line, a planted
  sanitizer error turned into rc 9, a FAIL verdict and exit status 1, and
  every step skipped (not run) when the budget is spent.

What needs a GPU (the real compute-sanitizer, pycuda's cooperative launch) runs
in ``test_cooperative_target_launches_cooperatively_on_pycuda`` (``-m gpu``) and
in the checklist itself on the device.
"""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
GPU_DIR = REPO / "tests" / "gpu"
CHECKLIST = GPU_DIR / "checklist.sh"
SETUP = GPU_DIR / "device_setup.sh"
DRIVER = GPU_DIR / "sanitize_envs.py"
TOOLS = ("memcheck", "initcheck", "racecheck", "synccheck")
TARGETS = ("tag_continuous", "tag_gridworld", "cooperative")
TARGET_ENVS = {"tag_continuous": "TagContinuous", "tag_gridworld": "TagGridWorld", "cooperative": "DummyEnv"}
SANITIZER_STEPS = rf"^({'|'.join(TOOLS)})_({'|'.join(TARGETS)})$"  # not memcheck_all

# What the real tool takes from the checklist and prints at the end; --version for the report's header.
STUB_SANITIZER = r"""#!/usr/bin/env bash
if [ "${1:-}" = --version ]; then echo "Version stub (tests/project/test_gpu_checklist.py)"; exit 0; fi
echo "$*" >> "$STUB_CALLS"
tool=memcheck; exitcode=0
while [ $# -gt 0 ]; do
  case $1 in
    --tool) tool=$2; shift 2 ;;
    --error-exitcode) exitcode=$2; shift 2 ;;
    -*) echo "stub compute-sanitizer: option $1 not expected" >&2; exit 64 ;;
    *) break ;;
  esac
done
case $tool in memcheck|initcheck|racecheck|synccheck) ;; *) echo "stub: unknown tool $tool" >&2; exit 64 ;; esac
echo "========= COMPUTE-SANITIZER"
"$@"; rc=$?
errors=0
if [ -n "${STUB_FAIL:-}" ] && [[ "$tool $*" =~ $STUB_FAIL ]]; then
  errors=1; echo "========= Invalid __global__ read of size 4 bytes (planted by the stub)"
fi
if [ "$tool" = racecheck ]; then
  echo "========= RACECHECK SUMMARY: $errors hazards displayed ($errors errors, 0 warnings)"
else
  echo "========= ERROR SUMMARY: $errors errors"
fi
[ "$rc" -ne 0 ] && exit "$rc"
[ "$errors" -ne 0 ] && exit "$exitcode"
exit 0
"""


def load_driver():
    spec = importlib.util.spec_from_file_location("sanitize_envs", DRIVER)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def run_driver(*args: str, timeout: int = 300) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(DRIVER), *args], cwd=REPO, capture_output=True, text=True,
                          timeout=timeout)


# ------------------------------------------------------------------ the scripts parse
@pytest.mark.parametrize("script", [CHECKLIST, SETUP], ids=lambda p: p.name)
def test_shell_scripts_parse(script):
    proc = subprocess.run(["bash", "-n", str(script)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr


def test_checklist_runs_four_tools_over_the_drivers_three_targets():
    text = CHECKLIST.read_text()
    tools = re.search(r'^TOOLS="([^"]*)"', text, re.M)
    targets = re.search(r'^TARGETS="([^"]*)"', text, re.M)
    assert tools and tuple(tools.group(1).split()) == TOOLS
    assert targets and tuple(targets.group(1).split()) == TARGETS
    assert tuple(load_driver().TARGETS) == TARGETS
    assert "gpu_report.md" in text


def test_device_setup_puts_the_wheels_compute_sanitizer_on_path():
    text = SETUP.read_text()
    assert "nvidia_cuda_sanitizer_api-*" in text
    assert "/tmp/sanitizer/nvidia/cu*/bin/compute-sanitizer" in text and "export PATH=" in text
    readme = (GPU_DIR / "README.md").read_text()
    assert "nvidia-cuda-sanitizer-api==" in readme  # how to fill .device_wheels with it


# ------------------------------------------------------------------ sanitize_envs.py
def test_driver_arguments():
    driver = load_driver()
    args = driver.parse_args(["--backend", "pycuda", "--target", "cooperative", "--target", "tag_gridworld"])
    assert args.backend == "pycuda" and args.target == ["cooperative", "tag_gridworld"] and args.steps == 6
    assert driver.parse_args([]).target is None  # no target: every built-in env and training, as before
    for bad in (["--target", "tag"], ["--steps", "0"], ["--tool", "memcheck"]):
        with pytest.raises(SystemExit) as exc:
            driver.parse_args(bad)
        assert exc.value.code == 2, bad
    listed = run_driver("--list-targets")
    assert listed.returncode == 0 and tuple(listed.stdout.split()) == TARGETS, listed.stdout + listed.stderr


@pytest.mark.slow  # child processes (over ~1.5 s: the full suite, not the fast tier)
def test_each_target_runs_on_the_cpu_executor():
    proc = run_driver("--backend", "cpu", *(a for t in TARGETS for a in ("--target", t)))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = proc.stdout.splitlines()
    results = {line.split(":")[0][len("target "):]: line for line in lines
               if line.startswith("target ") and not line.endswith(": begin")}
    assert tuple(results) == TARGETS, lines
    for target, line in results.items():
        assert f": {TARGET_ENVS[target]}: " in line and ", 6 steps" in line, line
    assert "200 agents" in results["cooperative"] and "no cooperative launch" in results["cooperative"]
    assert lines[-1] == "sanitizer driver: done"


@pytest.mark.gpu
def test_cooperative_target_launches_cooperatively_on_pycuda():
    proc = run_driver("--backend", "pycuda", "--target", "cooperative", "--steps", "2")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    line = next(line for line in proc.stdout.splitlines() if line.startswith("target cooperative: DummyEnv"))
    assert "4 block(s) per env" in line and "cooperative launch" in line and "no cooperative" not in line, line


# ------------------------------------------------------------------ checklist.sh with a stub sanitizer
def run_checklist(tmp_path: Path, budget: int, steps: str, fail: str = "") -> tuple[subprocess.CompletedProcess, Path]:
    stubs, out = tmp_path / "stubs", tmp_path / "out"
    stubs.mkdir()
    for name, body in {
        "compute-sanitizer": STUB_SANITIZER,
        "nvidia-smi": "#!/bin/sh\necho 'CPU stub, 0, 0 MiB'\n",
        "python3": f"#!/bin/sh\nexec {sys.executable} \"$@\"\n",  # the venv's Python, as python3 on the device
    }.items():
        (stubs / name).write_text(body)
        (stubs / name).chmod(0o755)
    env = {**os.environ, "PATH": f"{stubs}{os.pathsep}{os.environ['PATH']}", "OUT": str(out),
           "CHECKLIST_SETUP": "none", "CHECKLIST_BACKEND": "cpu", "STUB_CALLS": str(tmp_path / "calls.txt"),
           "STUB_FAIL": fail}
    proc = subprocess.run(["bash", str(CHECKLIST), str(budget), steps], cwd=REPO, env=env, capture_output=True,
                          text=True, timeout=600)
    return proc, out


def report_rows(out: Path) -> dict[str, dict[str, str]]:
    columns = ("step", "tool", "target", "rc", "seconds", "limit", "summary", "ran")
    rows = {}
    for line in (out / "gpu_report.md").read_text().splitlines():
        if not line.startswith("| ") or line.startswith("| step |"):
            continue
        cells = [c.strip() for c in re.split(r"(?<!\\)\|", line)[1:-1]]
        assert len(cells) == len(columns), line
        rows[cells[0]] = dict(zip(columns, cells))
    return rows


@pytest.mark.slow
def test_checklist_reports_every_tool_and_target_and_a_planted_error(tmp_path):
    if shutil.which("timeout") is None:
        pytest.skip("coreutils timeout not installed")
    proc, out = run_checklist(tmp_path, 500, SANITIZER_STEPS, fail=r"^initcheck .*--target cooperative")
    assert proc.returncode == 1, proc.stdout + proc.stderr  # one step failed
    rows = report_rows(out)
    expected = [f"{tool}_{target}" for tool in TOOLS for target in TARGETS]
    assert list(rows) == expected, proc.stdout
    for name, row in rows.items():
        tool, target = row["tool"], row["target"]
        assert name == f"{tool}_{target}" and (out / f"{name}.log").is_file()
        assert int(row["seconds"]) >= 0 and int(row["limit"]) > 0, row
        assert row["ran"].startswith(f"{TARGET_ENVS[target]}: "), row  # the workload says what it ran
        planted = name == "initcheck_cooperative"
        assert row["rc"] == ("9" if planted else "0"), row
        word = "RACECHECK" if tool == "racecheck" else "ERROR"
        assert row["summary"].startswith(f"{word} SUMMARY: {1 if planted else 0} "), row
    report = (out / "gpu_report.md").read_text()
    assert "Verdict: FAIL -- 1 of 12 step(s) had rc != 0" in report
    assert "- executor: cpu" in report and "Version stub" in report
    calls = (tmp_path / "calls.txt").read_text().splitlines()
    assert len(calls) == 12 and all(c.startswith("--error-exitcode 9 --tool ") for c in calls), calls


@pytest.mark.slow
def test_checklist_passes_when_its_steps_pass(tmp_path):
    proc, out = run_checklist(tmp_path, 500, r"^synccheck_cooperative$")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    rows = report_rows(out)
    assert list(rows) == ["synccheck_cooperative"] and rows["synccheck_cooperative"]["rc"] == "0", rows
    assert "Verdict: PASS -- 1 step(s) ran, all rc 0" in (out / "gpu_report.md").read_text()


@pytest.mark.slow  # runs the checklist script (over ~1.5 s: the full suite, not the fast tier)
def test_checklist_skips_what_the_budget_no_longer_fits(tmp_path):
    proc, out = run_checklist(tmp_path, 10, "")  # under the 20 s a step needs: nothing runs
    assert proc.returncode == 0, proc.stdout + proc.stderr
    rows = report_rows(out)
    assert {"gpu_tests", "memcheck_tag_continuous", "synccheck_cooperative", "memcheck_all"} <= set(rows)
    assert all(row["summary"] == "SKIPPED: budget spent" for row in rows.values()), rows
    assert not (tmp_path / "calls.txt").exists()
    assert "0 step(s) ran" in (out / "gpu_report.md").read_text()
