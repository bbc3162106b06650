"""The Environment contract declares every attribute the layers above read from an env.

An optional hook that the wrapper reads with ``getattr(env, name, default)`` is
invisible to someone writing an env: the contract is the class, so each hook
is declared there with its default, and the readers use plain attributes. And
it declares the native contract only: an env not written to it (WarpDrive's)
takes part through the wrapper's ``StepBinding``, never through hooks here.
"""

from __future__ import annotations

import re
from pathlib import Path

from warp_drive.env.environment import Environment

ROOT = Path(__file__).resolve().parents[2]
READERS = ["warp_drive/env_wrapper.py", "warp_drive/env/consistency.py", "warp_drive/training/runs/callbacks.py",
           "warp_drive/training/trainer.py", "warp_drive/adapters/gymnasium.py", "warp_drive/adapters/pettingzoo.py"]
HOOKS = {"cuda_defines": {}, "consistency_atol": None, "consistency_rtol": None, "render_arrays": (),
         "step_args": (), "consistency_skip": ()}
# Everything public Environment declares, by concern: what a native env writes and what the layers above call.
NATIVE_CONTRACT = {
    # identity, sizes and the kernel
    "name", "num_agents", "episode_length", "cuda_source", "cuda_source_path", "cuda_defines", "step_kernel",
    "step_args", "thread_layout", "framework_clock",
    # parameters, declared once
    "parameters", "set_parameters", "config_keys", "describe",
    # spaces, groups, arrays
    "observation_space", "action_space", "agent_groups", "get_data_dictionary", "data_dictionary",
    "state_arrays", "active_array", "written_arrays", "array_ranges",
    # starts
    "get_reset_pools", "reset_kernel", "reference_reset", "has_reference_reset", "run_reference_reset",
    # the reference and the consistency checker
    "reference_step", "has_reference", "run_reference_step", "consistency_atol", "consistency_rtol",
    "consistency_skip",
    # rendering
    "render_arrays", "render",
    # one env on the host
    "reset", "step", "single_env_arrays", "single_env_observations",
}
# The hooks Environment once carried for WarpDrive-style envs alone; they are now the wrapper's StepBinding
# (warp_drive/compat/envs.py's WarpDriveStepBinding, passed by WarpDrive's EnvWrapper).
WARPDRIVE_ONLY = {"bind_step", "host_first_reset", "first_observations", "redraw_reset_pools"}


def test_every_optional_hook_is_declared_with_its_default():
    for name, default in HOOKS.items():
        assert hasattr(Environment, name), f"Environment does not declare {name}"
        assert getattr(Environment, name) == default, f"Environment.{name} = {getattr(Environment, name)!r}"


def test_the_contract_declares_native_hooks_only():
    declared = {n for n in [*dir(Environment), *Environment.__annotations__] if not n.startswith("_")}
    assert not declared & WARPDRIVE_ONLY, f"WarpDrive-only hooks on Environment: {sorted(declared & WARPDRIVE_ONLY)}"
    assert declared == NATIVE_CONTRACT, (f"not in the listed contract: {sorted(declared - NATIVE_CONTRACT)}; "
                                         f"listed but gone: {sorted(NATIVE_CONTRACT - declared)}")


def test_no_reader_probes_an_env_for_undeclared_attributes():
    probe = re.compile(r"getattr\(\s*(self\.env|env_?|wrapper\.env|trainer\.env\.env)\s*,")
    found = [f"{path}:{n}: {line.strip()}" for path in READERS
             for n, line in enumerate((ROOT / path).read_text().splitlines(), 1) if probe.search(line)]
    assert not found, "read a declared attribute instead:\n" + "\n".join(found)
