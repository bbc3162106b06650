"""No shipped code, docstring, tutorial or document loads (or tells users to load) a pickle with
``weights_only=False``: that load runs whatever code a planted checkpoint holds. Checkpoints -- warp_drive's
and Lightning's -- load with ``weights_only=True`` (tests/training/test_lightning.py loads one that way)."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_nothing_shipped_recommends_an_unsafe_load():
    places = [*(ROOT / "warp_drive").rglob("*.py"), *(ROOT / "tutorials").rglob("*.ipynb"),
              *(ROOT / "docs").rglob("*.md"), ROOT / "README.md"]
    offenders = [str(path.relative_to(ROOT)) for path in places if "weights_only=False" in path.read_text("utf-8")]
    assert offenders == [], f"weights_only=False in {offenders}: load with weights_only=True"
