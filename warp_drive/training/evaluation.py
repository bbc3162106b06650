"""Comparing trained runs as MARL papers do: the interquartile mean (IQM) of returns over seeds, a 95%
bootstrap confidence interval, and marl-eval's JSON format.

``warp-drive evaluate RUN [RUN ...]`` plays each run's latest checkpoint (one
run per training seed) and hands the episodes' team returns here. The IQM (the
mean of the middle 50% of scores, Agarwal et al. 2021, "Deep RL at the edge
of the statistical precipice") is taken over every episode of every run; the
interval resamples the *runs* with replacement (their episodes come along),
since runs, not episodes, are the independent draws. Plain NumPy, so the
command line imports no torch to summarise.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Mapping, Sequence

import numpy as np


def iqm(values: Sequence[float]) -> float:
    """The interquartile mean: the mean after dropping ``floor(n / 4)`` values from each end (scipy's
    ``trim_mean(values, 0.25)``, what rliable and marl-eval use)."""
    x = np.sort(np.asarray(values, dtype=np.float64).ravel())
    if x.size == 0:
        raise ValueError("iqm of no values")
    cut = x.size // 4
    return float(x[cut: x.size - cut].mean())


def bootstrap_ci(runs: Sequence[Sequence[float]], confidence: float = 0.95, resamples: int = 2000,
                 seed: int = 0) -> tuple[float, float]:
    """Percentile interval of the IQM when the runs (each a sequence of episode scores) are resampled with
    replacement; one run gives a zero-width interval."""
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    arrays = [np.asarray(r, dtype=np.float64).ravel() for r in runs]
    if not arrays or any(a.size == 0 for a in arrays):
        raise ValueError("bootstrap_ci needs at least one run, each with at least one score")
    rng = np.random.default_rng(seed)
    stats = np.empty(int(resamples))
    for i in range(int(resamples)):
        picks = rng.integers(0, len(arrays), size=len(arrays))
        stats[i] = iqm(np.concatenate([arrays[j] for j in picks]))
    alpha = (1.0 - confidence) / 2.0
    return float(np.quantile(stats, alpha)), float(np.quantile(stats, 1.0 - alpha))


def summarize(runs: Mapping[str, Sequence[float]], confidence: float = 0.95) -> dict[str, float]:
    """``{run name: episode scores}`` -> IQM, CI bounds, mean, runs and episodes."""
    values = list(runs.values())
    low, high = bootstrap_ci(values, confidence)
    pooled = np.concatenate([np.asarray(v, dtype=np.float64).ravel() for v in values])
    return {"iqm": iqm(pooled), "ci_low": low, "ci_high": high, "mean": float(pooled.mean()),
            "runs": len(values), "episodes": int(pooled.size)}


def marl_eval_json(env_name: str, task_name: str, algorithm: str, runs: Mapping[str, Sequence[float]],
                   step_count: int, metric: str = "return") -> dict:
    """marl-eval's raw-data layout: ``{env: {task: {algorithm: {run: {"step_0": {"step_count": ...,
    metric: [...]}, "absolute_metrics": {metric: [...]}}}}}}``, one entry per run, the episodes' scores
    as the metric's list."""
    per_run = {}
    for name, scores in runs.items():
        values = [float(v) for v in np.asarray(scores, dtype=np.float64).ravel()]
        if not all(math.isfinite(v) for v in values):
            raise ValueError(f"run {name!r}: non-finite scores cannot be written")
        per_run[name] = {"step_0": {"step_count": int(step_count), metric: values},
                         "absolute_metrics": {metric: values}}
    return {env_name: {task_name: {algorithm: per_run}}}


def write_marl_eval_json(path: str | Path, data: dict) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")
    return path
