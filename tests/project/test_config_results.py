"""Every shipped config states what it reaches, the README says the same, and the check runs."""

from __future__ import annotations

import csv
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))  # benchmarks/ is not an installed package
from benchmarks import config_results  # noqa: E402
from warp_drive.training.config import available_configs  # noqa: E402


def test_every_shipped_config_has_a_stated_result():
    claimed = [claim.config for claim in config_results.CLAIMS]
    assert len(claimed) == len(set(claimed)), "a config with two claims"
    assert sorted(claimed) == sorted(available_configs()), (
        "a config without a stated result (add a Claim to benchmarks/config_results.py and its row to the "
        "README's table), or a claim for a config that is gone")
    for claim in config_results.CLAIMS:
        checks_here = claim.checked_by == config_results.HERE
        assert not checks_here or (claim.at_least is not None or claim.rise is not None), claim.config
        assert checks_here or (ROOT / claim.checked_by.split(" ")[0].rstrip(",")).exists(), claim.checked_by


def test_the_readme_states_each_result_as_the_claims_do():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    for claim in config_results.CLAIMS:
        row = f"| `{claim.config}` | {claim.result} | {claim.checked_by} |"
        assert row in readme, f"README.md lacks the row\n{row}"


@pytest.mark.slow  # trains (over ~1.5 s: the full suite, not the fast tier)
def test_a_claim_is_checked_by_training_the_shipped_config(tmp_path):
    """dummy_env's shipped config (51k env steps, a few seconds) against its claim, one seed."""
    rows = config_results.main(["--configs", "dummy_env", "--seeds", "1", "--out", str(tmp_path)])
    assert len(rows) == 1 and rows[0]["env steps"] == 51_200
    assert rows[0]["after"] - rows[0]["before"] >= config_results.BY_CONFIG["dummy_env"].rise
    assert rows[0]["met"] is True
    with (tmp_path / "config_results.csv").open(newline="") as handle:
        assert [row["config"] for row in csv.DictReader(handle)] == ["dummy_env"]
