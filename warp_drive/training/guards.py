"""NaN and inf guards around an update: they find the first bad value and say where it came from.

A NaN or inf must never reach the parameters. Once per iteration, before the
update, one device reduction per rollout buffer checks observations, rewards
and values (:func:`describe_nonfinite_rollout`); every minibatch's loss and
gradient norm are checked when the update's metrics come to the host
(:func:`raise_if_nonfinite_update`). The trainer then puts the parameters back
and raises :class:`NonFiniteError` or skips the update (``trainer.on_nonfinite``).
"""

from __future__ import annotations

import copy
import math
from typing import Any, Iterable

import torch

# The per-minibatch metrics of an on-policy update, in the order the update stacks them.
METRIC_NAMES = ("policy_loss", "value_loss", "entropy", "approx_kl", "clipfrac", "grad_norm")


class NonFiniteError(FloatingPointError):
    """A NaN or inf in a rollout (observations, rewards, values) or in an update
    (loss, gradient norm). A rollout's is raised before the update; an update's
    at its end, and the trainer then puts back the parameters and optimizer
    state from before the update, so that a single bad value cannot turn every
    weight into NaN."""


def raise_if_nonfinite_update(rows: Iterable[list[float]], first_step: int, settings: Any) -> None:
    """Raise :class:`NonFiniteError` for the first row (METRIC_NAMES, then the loss;
    update step ``first_step`` onwards) whose loss or gradient norm is not finite."""
    for step, row in enumerate(rows, start=first_step):
        metrics = dict(zip(METRIC_NAMES, row[:6]))
        loss = row[6]
        if math.isfinite(loss) and math.isfinite(metrics["grad_norm"]):
            continue
        what = "loss" if not math.isfinite(loss) else "gradient norm"
        raise NonFiniteError(
            f"non-finite {what} in update step {step}: loss = {loss} (policy_loss "
            f"{metrics['policy_loss']}, value_loss {metrics['value_loss']} x vf_coef {settings.vf_coef}, "
            f"entropy {metrics['entropy']} x entropy_coef {settings.entropy_coef}), gradient norm "
            f"{metrics['grad_norm']} (max_grad_norm {settings.max_grad_norm}). Fix: lower vf_coef / the learning "
            "rate, set max_grad_norm, or scale the rewards"
        )


_ARRAY_NAMES = {"rewards": "rewards", "obs": "observations", "final_obs": "observations",
                "values": "value predictions"}


def describe_nonfinite_rollout(policies: Iterable[Any], buffers: dict[str, dict[str, torch.Tensor]]) -> str | None:
    """None when every checked buffer of the last rollout is finite, else where the first
    non-finite value is and what likely made it.

    Checks each policy's ``rewards``, ``obs``, ``final_obs`` and (when it has
    them) ``values`` buffers (``buffers[tag]``, the rollout's): one reduction per
    buffer and one host sync in all.
    """
    checks = [(p, key, torch.isfinite(buffers[p.tag][key]).all())
              for p in policies for key in _ARRAY_NAMES if key in buffers[p.tag]]
    if bool(torch.stack([flag for _, _, flag in checks]).all()):
        return None
    for p, key, flag in checks:
        if bool(flag):
            continue
        data = buffers[p.tag][key]
        bad = ~torch.isfinite(data)
        where = [int(i) for i in torch.nonzero(bad)[0]]
        step, row = where[0], where[1]
        n = len(p.agent_ids)
        env, agent = row // n, p.agent_ids[row % n]
        array = _ARRAY_NAMES[key]
        index = f"[env {env}, agent {agent}" + (f", element {where[2]}" if len(where) > 2 else "") + "]"
        when = (f"after rollout step {step} (before the reset)" if key == "final_obs"
                else f"at rollout step {step}")
        cause = ("the model's parameters are non-finite" if key == "values" else
                 "the env produced it: look for a division by zero, a log or sqrt of a bad value, or an "
                 "overflow in the step kernel (warp_drive.env.consistency compares the kernel with its NumPy "
                 "reference)")
        return (f"non-finite {array}: {array}{index} = {float(data[tuple(where)])} {when} (policy {p.tag!r}; "
                f"{int(bad.sum())} non-finite value(s) in this rollout's {array}). Cause: {cause}")
    return "non-finite values in the rollout"  # pragma: no cover - a flag was False above


def snapshot(policy: Any) -> tuple[dict, dict]:
    """A policy's model and optimizer state before an update (on the device: no host sync)."""
    return ({k: v.clone() for k, v in policy.model.state_dict().items()}, copy.deepcopy(policy.optimizer.state_dict()))
