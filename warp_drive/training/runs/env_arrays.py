"""Restoring a checkpoint's env arrays into the envs, each one checked before any is copied.

A checkpoint may come from elsewhere (a received run), and an env kernel indexes memory with some of
its arrays: a wrong shape, dtype, value range or constant is refused here, naming the array, rather
than read out of bounds on the device. ``OnDeviceTrainer.load_state_dict`` calls
:func:`restore_env_arrays`.
"""

from __future__ import annotations

from typing import Any

import torch

from warp_drive.training.runs.checkpoint import CheckpointError


def _first(mask: torch.Tensor) -> tuple[int, ...]:
    return tuple(int(i) for i in torch.nonzero(mask)[0])


def _same_bits(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Bit-for-bit equality (a NaN equals itself, -0.0 differs from 0.0): constants must be the env's own."""
    if a.dtype in (torch.float32, torch.int32):
        return torch.equal(a.contiguous().view(torch.int32), b.contiguous().view(torch.int32))
    return torch.equal(a, b)


def _refuse_env_array(env: Any, name: str, values: torch.Tensor, target: torch.Tensor, constant: bool,
                      bounds: tuple[int, int] | None) -> str | None:
    """Why checkpoint env array ``name`` cannot be restored into ``target``; None when it fits."""
    if not torch.is_tensor(values) or values.shape != target.shape or values.dtype != target.dtype:
        got = f"{tuple(values.shape)} {values.dtype}" if torch.is_tensor(values) else type(values).__name__
        return (f"is {got}, the env's is {tuple(target.shape)} {target.dtype}: not a checkpoint of this run's "
                f"envs; resume the run that wrote it")
    if constant:
        if _same_bits(values, target.cpu()):
            return None
        what = ("a reset pool (drawn from the seed when the envs are built)" if name.endswith("_reset_pool")
                else "a constant (set when the env is built, never written by a step or a reset)")
        return (f"differs from {env.name}'s own: it is {what}, so the checkpoint was saved with a different env "
                f"config; resume it with the config it was saved with (its run's config.yaml), or, if "
                f"{env.name}'s step does write {name!r}, list it in {type(env.env).__name__}.written_arrays")
    broken = "; resume an earlier checkpoint of the run (pass its path)"
    if values.is_floating_point() and not bool(torch.isfinite(values).all()):
        where = _first(~torch.isfinite(values))
        return f"holds {float(values[where])} at {list(where)}: state must be finite{broken}"
    if bounds is not None:
        bad = (values < bounds[0]) | (values > bounds[1])
        if bool(bad.any()):
            where = _first(bad)
            return (f"holds {int(values[where])} at {list(where)}, outside {bounds[0]}..{bounds[1]} "
                    f"(Environment.array_ranges: a kernel indexes with it){broken}")
    return None


def restore_env_arrays(env: Any, arrays: dict) -> None:
    """Restore a checkpoint's env arrays into ``env`` (an EnvWrapper), after checking every one of them.

    Only state is copied. Constants and index tables (``env.constant_arrays()``, the Environment docstring's
    rule) must equal the env's own, else the checkpoint was saved with a different env config; they are
    never copied (a received checkpoint's ``tagger_ids = 10**8`` crashed the process with SIGSEGV, 40000
    read out of bounds silently). Every array must have exactly the env's shape and dtype (a single value
    was broadcast over an array, float64 cast into int32), float state must be finite and int32 state
    inside ``env.state_ranges()``. A refusal raises :class:`CheckpointError` naming the array, before any
    array has changed.
    """
    dm = env.data_manager
    if not isinstance(arrays, dict):
        raise CheckpointError(f"checkpoint env arrays are a {type(arrays).__name__}, not a dict: not a checkpoint "
                              f"of this run's envs; resume the run that wrote it")
    constants, ranges, known = set(env.constant_arrays()), env.state_ranges(), set(dm.array_names)
    restore = []
    for name, values in arrays.items():
        if name not in known:
            raise CheckpointError(f"checkpoint env array {name!r} is not an array of {env.name}'s envs: the "
                                  f"checkpoint was saved with a different env config; resume it with its own")
        target = dm.data_on_device_via_torch(name)
        values = values.cpu() if torch.is_tensor(values) else values
        problem = _refuse_env_array(env, name, values, target, name in constants, ranges.get(name))
        if problem is not None:
            raise CheckpointError(f"checkpoint env array {name!r} {problem}")
        if name not in constants:
            restore.append((target, values))
    for target, values in restore:
        target.copy_(values)
