"""Automatic vertical scaling on the cpu executor: real probes in child processes, a budget that binds.

The budget is set from a measured baseline (one probe of 64 CartPole envs plus
32 MiB), so it binds at about a thousand envs whatever torch's own footprint is
on the machine running the tests.
"""

from __future__ import annotations

import multiprocessing
import subprocess
import sys

import pytest
import yaml

from warp_drive.cli import main
from warp_drive.training.autoscale import (
    FAIL_HOOK_ENV,
    ScaleError,
    auto_scale,
    largest_fitting,
    parse_memory_size,
    probe_config,
)
from warp_drive.training.config import ConfigError, load_config

MiB = 2**20
CPU = ["trainer.backend=cpu"]


def cartpole(*overrides: str):
    return load_config("cartpole", [*CPU, *overrides])


# --------------------------------------------------------------------------- the search alone
def test_largest_fitting_doubles_then_bisects_within_the_bounds():
    tried = []

    def fits(x):
        tried.append(x)
        return x <= 1000

    assert largest_fitting(10, 5000, fits, precision=1e-9) == (1000, 1001)
    assert tried[:8] == [10, 20, 40, 80, 160, 320, 640, 1280]  # doubling, then bisection
    assert max(tried) <= 5000
    tried.clear()
    lo, hi = largest_fitting(4000, 5000, fits, precision=0.25)  # too big at the start: halve
    assert tried[:3] == [4000, 2000, 1000] and lo <= 1000 < hi and hi - lo <= 0.25 * lo
    tried.clear()
    assert largest_fitting(10, 700, fits) == (700, None)  # the upper bound fits: stop there
    assert max(tried) == 700
    assert largest_fitting(8, 100, lambda x: False) == (None, 1)  # nothing fits
    assert largest_fitting(8, 100, lambda x: x <= 50, precision=1e-9, lower=8) == (50, 51)
    lo, hi = largest_fitting(8, 100, lambda x: x <= 50)  # default precision: within 10%
    assert lo <= 50 < hi and hi - lo <= 0.1 * lo


def test_memory_sizes_parse_and_bad_ones_say_how_to_write_them():
    assert parse_memory_size("512MiB") == 512 * MiB
    assert parse_memory_size("2G") == parse_memory_size("2 GiB") == 2 * 2**30
    assert parse_memory_size("1.5GB") == 1_500_000_000
    assert parse_memory_size("1000") == parse_memory_size(1000) == 1000
    for bad in ("lots", "2 parsecs", "0", "-1G", ""):
        with pytest.raises(ConfigError, match="memory budget .*(512MiB|more than 0)"):
            parse_memory_size(bad)


# --------------------------------------------------------------------------- real probes
@pytest.fixture(scope="module")
def binding_budget() -> int:
    """64 envs' measured peak plus 32 MiB: CartPole runs out of room at about a thousand envs."""
    report = probe_config(cartpole("trainer.num_envs=64"), "8GiB")
    assert report["fits"], report
    assert 100 * MiB < report["peak"] < 2048 * MiB  # the resident size of a process with torch and the trainer
    return report["peak"] + 32 * MiB


def test_the_chosen_num_envs_fits_and_the_next_size_up_did_not(binding_budget):
    lines = []
    config = cartpole("trainer.num_envs=256")
    result = auto_scale(config, binding_budget, max_envs=16_384, precision=0.25, log=lines.append,
                        keep_probe_server=True)
    chosen = result.chosen
    assert chosen.fits and chosen.peak_bytes <= binding_budget and chosen.num_envs == result.num_envs
    assert result.baseline is result.probes[0] and result.baseline.num_envs == 256  # the config's own sizes first
    envs_probes = [p for p in result.probes if p.phase == "envs"]
    bigger = [p for p in envs_probes if p.num_envs > result.num_envs]
    assert bigger and not any(p.fits for p in bigger)  # the budget bound, not max_envs
    next_up = min(bigger, key=lambda p: p.num_envs)
    assert next_up.num_envs - result.num_envs <= max(1, 0.25 * result.num_envs)
    assert "resident memory passed" in next_up.reason or "over the budget" in next_up.reason
    assert all(p.fits for p in envs_probes if p.num_envs <= result.num_envs)
    assert all(p.num_envs == result.num_envs for p in result.probes if p.phase == "minibatch")
    assert all(p.env_steps_per_s > 0 for p in result.probes if p.fits)
    # The log: a header, one line per probe in order, the summary.
    probe_lines = [line for line in lines if line.startswith("probe ")]
    assert probe_lines == [p.describe() for p in result.probes]
    assert [int(line.split()[1]) for line in probe_lines] == list(range(1, len(result.probes) + 1))
    assert lines[-1].startswith(f"auto-scale: num_envs={result.num_envs:,}")
    assert result.apply(config).trainer.num_envs == result.num_envs
    assert f"trainer.num_envs={result.num_envs}" in result.overrides


def test_a_probe_that_dies_leaves_the_parent_unharmed(monkeypatch):
    monkeypatch.setenv(FAIL_HOOK_ENV, "kill:200")  # probes of more than 200 envs SIGKILL themselves
    config = cartpole("trainer.num_envs=64", f"trainer.total_steps={512 * 32}")
    result = auto_scale(config, "8GiB", precision=0.25, iterations=1, log=None, keep_probe_server=True)
    assert result.upper_bound == 512 and "total_steps" in result.upper_bound_note  # one iteration must remain
    killed = [p for p in result.probes if not p.fits]
    assert killed and all("SIGKILL" in p.reason and p.num_envs > 200 for p in killed)
    assert 128 <= result.num_envs <= 200 and max(p.num_envs for p in result.probes) <= 512
    assert not multiprocessing.active_children()
    from warp_drive.training.run import build  # this process still trains, with the chosen sizes

    trainer = build(result.apply(config))
    assert trainer.num_envs == result.num_envs and trainer.iterate()["charts/SPS"] > 0


def test_a_probe_error_that_is_not_about_memory_stops_the_search(monkeypatch):
    monkeypatch.setenv(FAIL_HOOK_ENV, "raise:64")
    with pytest.raises(ScaleError, match="(?s)not about memory.*injected probe failure"):
        auto_scale(cartpole("trainer.num_envs=64"), "8GiB", iterations=1, log=None, keep_probe_server=True)


# --------------------------------------------------------------------------- the command line
def test_train_auto_scale_probes_reports_and_trains_with_the_chosen_sizes(tmp_path):
    command = [sys.executable, "-m", "warp_drive", "train", "--config", "cartpole", "--auto-scale",
               "--memory-budget", "4GiB", "--max-envs", "128", "--no-progress", "--set", *CPU,
               "trainer.num_envs=64", "trainer.rollout_length=8", "trainer.total_steps=2048",
               f"saving.basedir={tmp_path}"]
    result = subprocess.run(command, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    out = result.stdout
    probes = [line for line in out.splitlines() if line.startswith("probe ")]
    assert probes[0].startswith("probe 1 (envs): num_envs=64 ") and "env steps/s" in probes[0]
    assert any(line.startswith("probe 2 (envs): num_envs=128 ") for line in probes)
    assert not any("num_envs=256" in line for line in probes)  # --max-envs
    # 128 envs fit; then phase 2 grows the minibatch to the whole batch (4 GiB is plenty).
    assert "auto-scale: num_envs=128, num_minibatches=1" in out
    assert "overrides: trainer.num_envs=128 policy.shared.num_minibatches=1" in out
    (saved,) = tmp_path.rglob("config.yaml")
    trained = yaml.safe_load(saved.read_text())
    assert trained["trainer"]["num_envs"] == 128 and trained["policy"]["shared"]["num_minibatches"] == 1
    assert "iterations of 128 envs" in out


@pytest.mark.parametrize("argv, message", [
    (["--memory-budget", "2GiB"], "only apply with --auto-scale"),
    (["--auto-scale", "--memory-budget", "lots"], "memory budget 'lots'"),
    (["--auto-scale", "--resume", "latest"], "a resumed run keeps its own"),
])
def test_train_auto_scale_refuses_bad_options(argv, message, capsys):
    assert main(["train", "--config", "cartpole", *argv]) == 2
    assert message in capsys.readouterr().err
