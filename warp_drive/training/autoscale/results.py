"""What auto-scaling measures and decides: one probe, the memory fit over probes, the result, its error.

Plain data with their own log lines, shared by the search (which reads
probes), the probe runner (which makes them) and :func:`auto_scale` (which
returns a :class:`ScaleResult`); tests build them from made-up numbers.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from warp_drive.training.config import RunConfig, apply_overrides
from warp_drive.training.runs.memory import format_bytes


class ScaleError(RuntimeError):
    """The search could not finish: nothing fits the budget, or a probe failed with an error not about memory."""


@dataclass
class Probe:
    """One size tried: whether it fits, its peak memory and its training throughput."""

    num_envs: int
    fits: bool
    peak_bytes: int | None  # None when the probe ended before it could be measured
    budget_bytes: int | None
    env_steps_per_s: float | None  # None when it does not fit
    reason: str = ""  # why it does not fit ("" when it does)
    seconds: float = 0.0  # wall clock of the whole probe, process start included
    device: str = ""
    base_bytes: int | None = None  # host memory before the envs and models were built (imports); cpu executor only
    index: int = 0  # 1, 2, ... in the order of the search

    def describe(self) -> str:
        """The probe's log line."""
        if self.fits:
            outcome = (f"{self.env_steps_per_s:,.0f} env steps/s, peak {format_bytes(self.peak_bytes)} of "
                       f"{format_bytes(self.budget_bytes)}")
        else:
            outcome = f"does not fit: {self.reason}"
        return f"probe {self.index}: num_envs={self.num_envs:,}: {outcome} [{self.seconds:.1f} s]"


@dataclass
class MemoryFit:
    """Peak memory as a straight line in ``num_envs``: ``fixed + per_env * num_envs`` (least squares)."""

    fixed: float
    per_env: float

    @classmethod
    def of(cls, probes: list[Probe]) -> MemoryFit | None:
        """The fit over the probes that fit; None with fewer than two different sizes."""
        points = [(p.num_envs, p.peak_bytes) for p in probes if p.fits and p.peak_bytes is not None]
        if len({n for n, _ in points}) < 2:
            return None
        mean_n = sum(n for n, _ in points) / len(points)
        mean_m = sum(m for _, m in points) / len(points)
        slope = (sum((n - mean_n) * (m - mean_m) for n, m in points)
                 / sum((n - mean_n) ** 2 for n, _ in points))
        slope = max(slope, 0.0)  # memory does not shrink with more envs; a negative slope is noise
        return cls(mean_m - slope * mean_n, slope)

    def predict(self, num_envs: int) -> float:
        return self.fixed + self.per_env * num_envs

    def largest_fitting(self, budget: int) -> int | None:
        """The most envs predicted to fit ``budget`` (0 if none); None when memory does not grow with envs."""
        if self.per_env <= 0:
            return None
        return max(0, math.floor((budget - self.fixed) / self.per_env))

    def describe(self) -> str:
        return f"peak ~ {format_bytes(self.fixed)} + {format_bytes(self.per_env)} per env"


@dataclass
class ScaleResult:
    """The chosen ``num_envs``, the override that applies it, every probe, and why the search stopped."""

    num_envs: int
    overrides: list[str]  # ``--set`` items: apply with apply() or load_config(name, [..., *overrides])
    chosen: Probe
    probes: list[Probe]
    baseline: Probe | None  # the config's own num_envs (None when it was above the upper bound)
    stop_reason: str
    fit: MemoryFit | None
    budget_note: str
    upper_bound: int
    upper_bound_note: str

    @property
    def budget_bytes(self) -> int | None:
        return self.chosen.budget_bytes

    @property
    def speedup(self) -> float | None:
        """Env steps/s at the chosen size over env steps/s at the config's size."""
        if not (self.baseline and self.baseline.fits):
            return None
        return self.chosen.env_steps_per_s / self.baseline.env_steps_per_s

    def apply(self, config: RunConfig) -> RunConfig:
        """``config`` with the chosen size (validated as any config is)."""
        return RunConfig.from_dict(apply_overrides(config.to_dict(), self.overrides))

    def rows(self) -> list[dict[str, Any]]:
        """One dict per probe (for tables, CSV files, plots)."""
        return [{"probe": p.index, "envs": p.num_envs, "fits": "yes" if p.fits else "no",
                 "peak MiB": (p.peak_bytes or 0) / 2**20, "env steps/s": p.env_steps_per_s or 0.0,
                 "seconds": p.seconds, "why not": p.reason} for p in self.probes]

    def summary(self) -> str:
        """Why the search stopped, the memory fit, the choice and why, and the overrides."""
        fitting = [p for p in self.probes if p.fits]
        lines = [f"auto-scale: stopped: {self.stop_reason}"]
        if self.fit is not None and self.budget_bytes is not None:
            most = self.fit.largest_fitting(self.budget_bytes)
            holds = "memory does not grow measurably with envs" if most is None else \
                f"the budget holds about {most:,} envs"
            lines.append(f"auto-scale: memory fit over {len(fitting)} probes: {self.fit.describe()}; {holds}")
        chosen = self.chosen
        sizes = len({p.num_envs for p in fitting})
        line = (f"auto-scale: chose num_envs={chosen.num_envs:,}, the fastest of the {sizes} "
                f"size{'' if sizes == 1 else 's'} that fit: {chosen.env_steps_per_s:,.0f} env steps/s, "
                f"peak {format_bytes(chosen.peak_bytes)} of {format_bytes(self.budget_bytes)} ({self.budget_note})")
        if self.speedup is not None and self.baseline is not chosen:
            line += (f"; {self.speedup:.2f}x the config's num_envs={self.baseline.num_envs:,} "
                     f"({self.baseline.env_steps_per_s:,.0f} env steps/s)")
        lines.append(line)
        lines.append("auto-scale: overrides: " + (" ".join(self.overrides) or "none (the config's num_envs)"))
        return "\n".join(lines)
