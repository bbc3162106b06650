"""The Environment contract declares every attribute the layers above read from an env.

An optional hook that the wrapper reads with ``getattr(env, name, default)`` is
invisible to someone writing an env: the contract is the class, so each hook
is declared there with its default, and the readers use plain attributes.
"""

from __future__ import annotations

import re
from pathlib import Path

from warp_drive.environment import Environment

ROOT = Path(__file__).resolve().parents[2]
READERS = ["warp_drive/env_wrapper.py", "warp_drive/consistency.py", "warp_drive/training/callbacks.py",
           "warp_drive/training/trainer.py", "warp_drive/adapters/gymnasium.py", "warp_drive/adapters/pettingzoo.py"]
HOOKS = {"cuda_defines": {}, "consistency_atol": None, "consistency_rtol": None, "redraw_reset_pools": True,
         "host_first_reset": False, "first_observations": None, "bind_step": None, "render_arrays": (),
         "step_args": (), "consistency_skip": ()}


def test_every_optional_hook_is_declared_with_its_default():
    for name, default in HOOKS.items():
        assert hasattr(Environment, name), f"Environment does not declare {name}"
        assert getattr(Environment, name) == default, f"Environment.{name} = {getattr(Environment, name)!r}"


def test_no_reader_probes_an_env_for_undeclared_attributes():
    probe = re.compile(r"getattr\(\s*(self\.env|env_?|wrapper\.env|trainer\.env\.env)\s*,")
    found = [f"{path}:{n}: {line.strip()}" for path in READERS
             for n, line in enumerate((ROOT / path).read_text().splitlines(), 1) if probe.search(line)]
    assert not found, "read a declared attribute instead:\n" + "\n".join(found)
