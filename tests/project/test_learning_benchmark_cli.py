"""``benchmarks.learning_simple_spread`` without training: the JaxMARL skip note, baselines lookup, pass/fail rows."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from benchmarks import learning_simple_spread as bench


def test_jaxmarl_is_skipped_with_how_to_install_it(tmp_path, capsys):
    rows = bench.main(["--only", "jaxmarl", "--jaxmarl-python", str(tmp_path / "no-python"),
                       "--runs", str(tmp_path / "runs"), "--out", str(tmp_path / "out")])
    text = capsys.readouterr().out
    assert rows == [] and "JaxMARL skipped: no python at" in text
    assert "pip install jaxmarl" in text and "FLAIROx/JaxMARL" in text
    assert not (tmp_path / "out").exists()


def test_baselines_are_found_from_the_checkout_or_its_baselines_folder(tmp_path):
    script = tmp_path / "baselines" / "IPPO" / "ippo_ff_mpe.py"
    script.parent.mkdir(parents=True)
    script.write_text("")
    assert bench.find_baselines(str(tmp_path)) == tmp_path / "baselines"
    assert bench.find_baselines(str(tmp_path / "baselines")) == tmp_path / "baselines"
    assert bench.find_baselines(str(tmp_path / "IPPO")) is None and bench.find_baselines(None) is None


def test_rows_judge_the_iqm_against_both_bars():
    result = {"returns": [[-60.0] * 4, [-62.0] * 4], "train_s": [10.0, 12.0], "eval_s": 3.0, "env_steps": 100}
    row = bench.table_row("ours", result, reference=-61.0)
    assert row["IQM"] == -61.0 and row["train s total"] == 22.0 and row["per-seed mean"] == "-60.0 -62.0"
    assert row["IQM >= -65"] == "pass" and row["IQM >= JaxMARL IQM - half-width"] == "pass"
    assert bench.table_row("ours", result, reference=-60.5)["IQM >= JaxMARL IQM - half-width"] == "FAIL"
    assert bench.table_row("ours", result, reference=None)["IQM >= JaxMARL IQM - half-width"] == "n/a"
    low = {**result, "returns": [[-70.0] * 4, [-66.0] * 4]}
    assert bench.table_row("ours", low, reference=None)["IQM >= -65"] == "FAIL"
