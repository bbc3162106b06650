"""docs/config_reference.md is generated from the config schema, so the page cannot drift from the code."""

from __future__ import annotations

from pathlib import Path

import pytest

from warp_drive.training.config import ConfigError, RunConfig
from warp_drive.training.config.reference import PAGES, markdown

PAGE = Path(__file__).resolve().parents[2] / "docs" / "config_reference.md"
REGENERATE = "python -m warp_drive.training.config.reference > docs/config_reference.md"


def test_the_committed_page_is_the_generated_one():
    assert PAGE.read_text(encoding="utf-8") == markdown(), f"docs/config_reference.md is stale: run {REGENERATE}"


def test_every_key_of_every_section_has_a_row():
    page = markdown()
    for _, section in PAGES:
        for key in section.model_fields:
            assert f"| `{key}` |" in page, (section.__name__, key)


@pytest.mark.parametrize("key, value, row", [
    ("trainer.num_envs", 0, "| `num_envs` | an integer >= 1 | `100` |"),
    ("policy.shared.gamma", 1.5, "| `gamma` | a number in [0.0, 1.0] | `0.99` |"),
    ("policy.shared.max_grad_norm", -1, "| `max_grad_norm` | a number > 0, or null: no clipping | `0.5` |"),
    ("trainer.backend", "cuda", "| `backend` | one of auto, cpu, cpu-gpu, pycuda (any case) | `auto` |"),
])
def test_a_row_says_what_the_keys_error_message_says(key, value, row):
    data = {"name": "unit", "env": {"name": "CartPole"}, "policy": {"shared": {}}}
    *parents, last = key.split(".")
    node = data
    for part in parents:
        node = node.setdefault(part, {})
    node[last] = value
    with pytest.raises(ConfigError) as info:
        RunConfig.from_dict(data)
    takes = row.split(" | ")[1].split(", or null")[0].replace(" (any case)", "")
    assert f"{key}: expected {takes}" in str(info.value)
    assert row in markdown()
