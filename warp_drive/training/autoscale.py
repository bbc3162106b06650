"""Automatic vertical scaling: the most envs, then the largest PPO minibatch, that fit in memory.

``auto_scale(config)`` (and ``warp-drive train --auto-scale``) answers "how
big can this run be on this machine?" in two searches, each by doubling and
then bisection, each size tried in a *probe*:

1. **envs**: the largest ``trainer.num_envs`` (up to ``max_envs``, and at most
   ``total_steps // rollout_length`` so that the run keeps at least one
   iteration) with the configured ``rollout_length`` and ``num_minibatches``.
   The first probe is the config's own sizes, the baseline throughput.
2. **minibatch**: at that ``num_envs``, the largest minibatch, i.e. the fewest
   ``num_minibatches`` (down to 1: the whole batch), for every trained PPO
   policy. A2C always updates on the whole batch and untrained policies do no
   update, so they are left alone. The minibatch is what the update's
   forward/backward holds at once; this phase finds room mostly when phase 1
   stopped at its upper bound rather than at the memory limit (typical on a
   GPU with ``--max-envs``).

"Batch" here means the minibatch, not ``rollout_length``: the rollout length
is the GAE horizon, a learning choice the scaler should not change.

A probe is a child process that builds the trainer with ``run.build`` and runs
``iterations`` training iterations (the first warms up, the rest are timed for
env steps/s), then takes a checkpoint's ``state_dict`` (which copies the env
arrays), and reports its peak memory:

* cpu executor (either shape, ``cpu`` or ``cpu-gpu``: its arrays live in host
  memory, ``capabilities.memory == "host"``): the process's peak resident
  memory (``VmHWM``, corrected for the forkserver, see
  ``_forkserver_offset``) against the budget. A
  watchdog thread samples the resident size every few milliseconds
  and ends the probe as soon as it passes the budget, so doubling past the
  limit cannot take the machine's memory with it. The default budget is half
  of the memory available when the search starts (``MemAvailable``, and the
  cgroup's limit where there is one), divided by ``processes`` for
  ``--nproc`` runs, which share the host.
* GPU: ``torch.cuda.max_memory_reserved`` against the budget, default 90% of
  the device's memory (the rest for the CUDA context, the loaded kernels and
  fragmentation); a CUDA out-of-memory error also means "does not fit".

Why child processes: a CUDA out-of-memory or illegal-address error can leave
the CUDA context unusable, the OOM killer ends the whole process, and torch's
caching allocator keeps what it reserved; none of that may reach the process
that trains afterwards. The children come from a ``forkserver`` that has
imported torch and the trainer once (a probe then starts in a fraction of a
second rather than ~5 s); it never touches CUDA, so each probe initialises
its own context. Where forkserver is unavailable, ``spawn`` is used.

A probe that raises an error that is not about memory (a bug, a compile
error) stops the search with that error rather than being read as "too big".
A probe killed by a signal (the kernel's OOM killer sends SIGKILL) or one that
runs past ``probe_timeout`` counts as not fitting. Each probe adds one line to
the log; the result holds every probe, the chosen sizes and the ``--set``
overrides that apply them. The env kernels are compiled once (by the first
probe) into the build cache and loaded from it by the others: the number of
envs is a run-time value, not a compile-time one.

The original WarpDrive's scaler doubled without an upper bound, gave a probe
a rollout length of 1 that its data loader could not handle (so, by all
appearances, every probe failed), and could not tell a bug from a full GPU.
"""

from __future__ import annotations

import math
import multiprocessing
import os
import re
import signal
import sys
import threading
import time
import traceback
from dataclasses import dataclass, field
from typing import Any, Callable

from warp_drive.training.config import ConfigError, RunConfig, apply_overrides

DEFAULT_MAX_ENVS = 65_536
DEFAULT_HOST_FRACTION = 0.5  # of the host memory available now, when no budget is given (cpu executor)
DEFAULT_DEVICE_FRACTION = 0.9  # of the GPU's memory, when no budget is given
DEFAULT_PRECISION = 0.1  # bisection stops when the failing size is within 10% of the fitting one
DEFAULT_PROBE_TIMEOUT = 600.0
WATCHDOG_PERIOD_S = 0.005
# Test hook: "kill:N" makes a probe with more than N envs SIGKILL itself after building (as the OOM killer
# would); "raise:N" makes it raise a ValueError (an error that is not about memory).
FAIL_HOOK_ENV = "WARP_DRIVE_TEST_PROBE_FAIL"
# Preloaded by the forkserver: torch, the trainer, and torch._dynamo (which torch.optim.Adam imports lazily,
# ~3 s) so that a probe starts without importing anything.
_PRELOAD = ["torch", "torch._dynamo", "warp_drive.training.run"]
_MEMORY_ERROR_TEXT = ("out of memory", "illegal memory access", "out of resources", "bad_alloc",
                      "can't allocate memory", "cannot allocate memory")


class ScaleError(RuntimeError):
    """The search could not finish: nothing fits, or a probe failed with an error that is not about memory."""


# --------------------------------------------------------------------------- sizes in bytes
_UNITS = {"": 1, "b": 1, "k": 2**10, "kib": 2**10, "kb": 10**3, "m": 2**20, "mib": 2**20, "mb": 10**6,
          "g": 2**30, "gib": 2**30, "gb": 10**9, "t": 2**40, "tib": 2**40, "tb": 10**12}


def parse_memory_size(text: str | int) -> int:
    """Bytes in ``"512MiB"``, ``"2GiB"``, ``"1.5GB"``, ``"2G"`` (binary) or ``"1000000"``; an int passes through."""
    if isinstance(text, int) and not isinstance(text, bool):
        value = text
    else:
        match = re.fullmatch(r"\s*([0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)\s*([A-Za-z]*)\s*", str(text))
        unit = match.group(2).lower() if match else None
        if unit not in _UNITS:
            raise ConfigError(f"memory budget {text!r}: expected a size such as 512MiB, 2GiB, 1.5GB or a number of "
                              f"bytes (units: {', '.join(u for u in _UNITS if u)}; K/M/G/T are binary)")
        value = int(float(match.group(1)) * _UNITS[unit])
    if value <= 0:
        raise ConfigError(f"memory budget {text!r}: must be more than 0 bytes")
    return value


def format_bytes(n: float | None) -> str:
    if n is None:
        return "-"
    for unit, size in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= size:
            return f"{n / size:,.1f} {unit}" if n < 100 * size else f"{n / size:,.0f} {unit}"
    return f"{int(n)} B"


def host_memory_available() -> int | None:
    """Bytes this process could still use: ``MemAvailable``, capped by a cgroup memory limit (containers)."""
    available = None
    try:
        for line in open("/proc/meminfo"):
            if line.startswith("MemAvailable:"):
                available = int(line.split()[1]) * 1024
                break
    except OSError:
        pass
    for limit_file, usage_file in (("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory.current"),
                                   ("/sys/fs/cgroup/memory/memory.limit_in_bytes",
                                    "/sys/fs/cgroup/memory/memory.usage_in_bytes")):
        try:
            limit, usage = open(limit_file).read().strip(), int(open(usage_file).read().strip())
        except (OSError, ValueError):
            continue
        if limit.isdigit() and int(limit) < 2**60:  # "max" or a huge number: no limit
            room = max(int(limit) - usage, 0)
            available = room if available is None else min(available, room)
        break
    return available


# --------------------------------------------------------------------------- results
@dataclass
class Probe:
    """One trial: the sizes, whether they fit, and what was measured."""

    index: int
    phase: str  # "envs" or "minibatch"
    num_envs: int
    num_minibatches: dict[str, int]  # trained PPO policies only
    minibatch_env_steps: int | None  # env steps per minibatch of those policies (None when there are none)
    fits: bool
    reason: str  # why it does not fit ("" when it does)
    peak_bytes: int | None
    env_steps_per_s: float | None
    seconds: float
    budget_bytes: int | None = None
    device: str = ""
    overrides: list[str] = field(default_factory=list)  # ``--set`` items that give the config these sizes

    def describe(self) -> str:
        """The log line of this probe."""
        sizes = f"num_envs={self.num_envs:,}"
        if self.num_minibatches:
            sizes += f" minibatches={_minibatch_text(self.num_minibatches)} ({self.minibatch_env_steps:,} env steps)"
        if self.fits:
            outcome = f"fits, peak {format_bytes(self.peak_bytes)} of {format_bytes(self.budget_bytes)}"
        else:
            outcome = f"does not fit: {self.reason}"
        speed = f", {self.env_steps_per_s:,.0f} env steps/s" if self.env_steps_per_s else ""
        return f"probe {self.index} ({self.phase}): {sizes}: {outcome}{speed} [{self.seconds:.1f} s]"


def _minibatch_text(num_minibatches: dict[str, int]) -> str:
    values = set(num_minibatches.values())
    if len(values) == 1:
        return str(values.pop())
    return ",".join(f"{tag}:{n}" for tag, n in num_minibatches.items())


@dataclass
class ScaleResult:
    """The chosen sizes, the overrides that apply them, and every probe."""

    num_envs: int
    num_minibatches: dict[str, int]
    overrides: list[str]  # ``--set`` items: apply with apply() or load_config(name, [..., *overrides])
    budget_bytes: int | None
    budget_note: str
    probes: list[Probe] = field(default_factory=list)
    chosen: Probe | None = None
    baseline: Probe | None = None  # the config's own sizes (None when above the upper bound)
    upper_bound: int = 0
    upper_bound_note: str = ""

    @property
    def speedup(self) -> float | None:
        """Env steps/s at the chosen sizes over env steps/s at the config's sizes."""
        if not (self.chosen and self.baseline and self.chosen.env_steps_per_s and self.baseline.env_steps_per_s):
            return None
        return self.chosen.env_steps_per_s / self.baseline.env_steps_per_s

    def apply(self, config: RunConfig) -> RunConfig:
        """``config`` with the chosen sizes (validated as any config is)."""
        return RunConfig.from_dict(apply_overrides(config.to_dict(), self.overrides))

    def rows(self) -> list[dict[str, Any]]:
        """One dict per probe (for tables, CSV files, plots)."""
        return [{"probe": p.index, "phase": p.phase, "envs": p.num_envs,
                 "num_minibatches": _minibatch_text(p.num_minibatches) if p.num_minibatches else "",
                 "minibatch env steps": p.minibatch_env_steps or 0, "fits": "yes" if p.fits else "no",
                 "peak MiB": (p.peak_bytes or 0) / 2**20, "env steps/s": p.env_steps_per_s or 0.0,
                 "seconds": p.seconds, "why not": p.reason} for p in self.probes]

    def summary(self) -> str:
        """The chosen sizes, their throughput against the config's, and the overrides."""
        lines = [f"auto-scale: num_envs={self.num_envs:,}"
                 + (f", num_minibatches={_minibatch_text(self.num_minibatches)}" if self.num_minibatches else "")
                 + f" (budget {format_bytes(self.budget_bytes)}: {self.budget_note}; "
                 f"num_envs at most {self.upper_bound:,}: {self.upper_bound_note}; "
                 f"{len(self.probes)} probe{'' if len(self.probes) == 1 else 's'})"]
        if self.chosen and self.chosen.env_steps_per_s:
            line = (f"  chosen sizes: {self.chosen.env_steps_per_s:,.0f} env steps/s, "
                    f"peak {format_bytes(self.chosen.peak_bytes)}")
            if self.baseline and self.baseline.env_steps_per_s:
                line += (f"; the config's sizes (num_envs={self.baseline.num_envs:,}): "
                         f"{self.baseline.env_steps_per_s:,.0f} env steps/s ({self.speedup:.2f}x)")
            lines.append(line)
        faster = [p for p in self.probes if p.fits and p.env_steps_per_s and self.chosen
                  and self.chosen.env_steps_per_s and p.env_steps_per_s > 1.1 * self.chosen.env_steps_per_s]
        if faster:
            best = max(faster, key=lambda p: p.env_steps_per_s)
            lines.append(f"  note: probe {best.index} measured {best.env_steps_per_s:,.0f} env steps/s, faster than "
                         f"the chosen sizes (the scaler maximises sizes, not speed); for its sizes use --set "
                         f"{' '.join(best.overrides) or '(none: the config as it is)'}")
        lines.append("  overrides: " + (" ".join(self.overrides) if self.overrides else "none (the config's sizes)"))
        return "\n".join(lines)


# --------------------------------------------------------------------------- the search
def largest_fitting(start: int, upper: int, fits: Callable[[int], bool], precision: float = DEFAULT_PRECISION,
                    lower: int = 1) -> tuple[int | None, int | None]:
    """The largest ``x`` in ``[lower, upper]`` with ``fits(x)``, assuming that fitting shrinks as ``x`` grows.

    Tries ``start``; doubles while it fits (capped at ``upper``) or halves
    while it does not (down to ``lower``); then bisects between the last
    fitting and the first failing size until they are adjacent or within
    ``precision`` (relative). Returns ``(largest fitting or None, smallest
    failing size tried above it or None when ``upper`` fits)``.
    """
    x = min(max(start, lower), upper)
    lo: int | None = None
    hi: int | None = None
    if fits(x):
        lo = x
        while lo < upper:
            x = min(2 * lo, upper)
            if not fits(x):
                hi = x
                break
            lo = x
    else:
        hi = x
        while hi > lower:
            x = max(hi // 2, lower)
            if fits(x):
                lo = x
                break
            hi = x
    if lo is None or hi is None:
        return lo, hi
    while hi - lo > max(1, precision * lo):
        mid = (lo + hi) // 2
        if fits(mid):
            lo = mid
        else:
            hi = mid
    return lo, hi


def auto_scale(config: RunConfig, memory_budget: int | str | None = None, max_envs: int | None = None, *,
               processes: int = 1, iterations: int = 2, precision: float = DEFAULT_PRECISION,
               probe_timeout: float = DEFAULT_PROBE_TIMEOUT, log: Callable[[str], None] | None = print,
               keep_probe_server: bool = False) -> ScaleResult:
    """Find the largest ``num_envs``, then the fewest PPO ``num_minibatches``, that fit ``memory_budget``.

    ``memory_budget``: bytes or a size such as ``"2GiB"`` for one training
    process (GPU memory on a GPU, resident host memory on the cpu executor);
    ``None`` for the defaults in the module docstring. ``max_envs``: the upper
    bound on ``num_envs`` (default 65,536). ``processes``: training processes
    that will share this host (``--nproc``); divides the default host budget.
    ``iterations``: per probe (the first is a warm-up; throughput is measured
    over the rest). ``log`` receives one line per probe and the summary.
    The probes' forkserver (torch imported: ~300 MiB) is stopped at the end
    unless ``keep_probe_server`` (for several searches in a row).
    Raises :class:`ScaleError` when even one env does not fit, or when a probe
    fails with an error that is not about memory.
    """
    say = log or (lambda line: None)
    budget = parse_memory_size(memory_budget) if memory_budget is not None else None
    max_envs = DEFAULT_MAX_ENVS if max_envs is None else max_envs
    for name, value, minimum in (("max_envs", max_envs, 1), ("iterations", iterations, 1),
                                 ("processes", processes, 1)):
        if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
            raise ConfigError(f"auto-scale {name}: expected an integer >= {minimum}, got {value!r}")
    if not 0 < precision < 1:
        raise ConfigError(f"auto-scale precision: expected a fraction between 0 and 1, got {precision!r}")
    searcher = _Searcher(config, budget, _host_default(budget, processes), processes, iterations, probe_timeout, say)
    try:
        return searcher.run(max_envs, precision)
    finally:
        if not keep_probe_server:
            stop_probe_server()


def probe_config(config: RunConfig, memory_budget: int | str | None = None, *, iterations: int = 2,
                 timeout: float = DEFAULT_PROBE_TIMEOUT, processes: int = 1) -> dict[str, Any]:
    """One probe of ``config``'s own sizes, in a child process: does it fit, and how fast is it?

    Returns the probe's report: ``fits``, ``reason`` (why not), ``peak`` and
    ``budget`` (bytes), ``sps`` (env steps/s), ``device``, ``seconds``.
    """
    budget = parse_memory_size(memory_budget) if memory_budget is not None else None
    return _probe(config, budget, _host_default(budget, processes), iterations, timeout)


def _host_default(budget: int | None, processes: int) -> int | None:
    """The cpu executor's budget when none is given: a share of the host memory available now."""
    if budget is not None:
        return None
    available = host_memory_available()
    return None if available is None else int(DEFAULT_HOST_FRACTION * available / processes)


def _probe(config: RunConfig, budget: int | None, host_default: int | None, iterations: int,
           timeout: float) -> dict[str, Any]:
    """Run ``config`` for ``iterations`` in a child; raise ScaleError if it failed for a reason other than memory."""
    steps = config.trainer.num_envs * config.trainer.rollout_length * iterations
    config = RunConfig.from_dict(apply_overrides(config.to_dict(), [f"trainer.total_steps={steps}"]))
    request = {"config": config.to_dict(), "budget": budget, "host_default": host_default,
               "iterations": iterations, "fail_hook": os.environ.get(FAIL_HOOK_ENV)}
    report = _run_child(request, timeout)
    if report.get("error"):
        raise ScaleError(f"a probe of num_envs={config.trainer.num_envs:,} failed with an error that is not about "
                         f"memory, so the search stopped:\n{report['error']}")
    return report


class _Searcher:
    """Runs the two phases; memoises probes by their sizes so that no size is tried twice."""

    def __init__(self, config: RunConfig, budget: int | None, host_default: int | None, processes: int,
                 iterations: int, probe_timeout: float, say: Callable[[str], None]):
        self.config = config
        self.budget = budget
        self.host_default = host_default
        self.processes = processes
        self.iterations = iterations
        self.probe_timeout = probe_timeout
        self.say = say
        self.probes: list[Probe] = []
        self.tried: dict[tuple, Probe] = {}
        self.rollout = config.trainer.rollout_length
        # The policies whose minibatches the scaler may grow: trained PPO ones (A2C uses the whole batch).
        self.ppo = {tag: p.num_minibatches for tag, p in config.policy.items()
                    if p.to_train and p.algorithm == "PPO"}

    # -------------------------------------------------------------- phases
    def run(self, max_envs: int, precision: float) -> ScaleResult:
        trainer = self.config.trainer
        by_steps = trainer.total_steps // self.rollout
        upper = min(max_envs, by_steps)
        bound_note = ("max_envs" if max_envs <= by_steps else
                      f"total_steps // rollout_length = {trainer.total_steps:,} // {self.rollout}, so that "
                      f"the run keeps one iteration; raise trainer.total_steps for more")
        grown = f"the trained PPO policies ({', '.join(self.ppo)})" if self.ppo else "no policy (none is trained PPO)"
        start = (f"{trainer.num_envs:,}" if trainer.num_envs <= upper else
                 f"{upper:,} (the config's {trainer.num_envs:,} is above the bound)")
        self.say(f"auto-scale: searching num_envs from {start} up to {upper:,} ({bound_note}), "
                 f"then the minibatch of {grown}")
        if self.budget is not None:
            self.say(f"auto-scale: memory budget {format_bytes(self.budget)} per training process")
        elif self.host_default is not None:
            self.say(f"auto-scale: no memory budget given; on the cpu executor the budget is "
                     f"{DEFAULT_HOST_FRACTION:.0%} of the host memory available now"
                     + (f" shared by {self.processes} processes" if self.processes > 1 else "")
                     + f" ({format_bytes(self.host_default)}); on a GPU {DEFAULT_DEVICE_FRACTION:.0%} of its memory")

        def envs_fit(num_envs: int) -> bool:
            return self.probe("envs", num_envs, self._configured_minibatches(num_envs)).fits

        num_envs, _ = largest_fitting(trainer.num_envs, upper, envs_fit, precision)
        if num_envs is None:
            last = self.probes[-1]
            raise ScaleError(f"nothing fits: even num_envs={last.num_envs} does not ({last.reason}); "
                             f"raise the memory budget")
        minibatches = self._configured_minibatches(num_envs)
        if not self.ppo:
            self.say("auto-scale: no trained PPO policy, so no minibatch to grow")
        elif max(minibatches.values()) == 1:
            self.say("auto-scale: the minibatches are already whole batches")
        else:
            batch = num_envs * self.rollout
            start = batch // max(minibatches.values())

            def minibatch_fits(env_steps: int) -> bool:
                return self.probe("minibatch", num_envs, self._minibatches_for(num_envs, env_steps)).fits

            size, _ = largest_fitting(start, batch, minibatch_fits, precision, lower=start)
            if size is not None:
                minibatches = self._minibatches_for(num_envs, size)
        chosen = self.tried[self._key(num_envs, minibatches)]
        baseline = self.tried.get(self._key(trainer.num_envs, self._configured_minibatches(trainer.num_envs)))
        result = ScaleResult(num_envs=num_envs, num_minibatches=minibatches,
                             overrides=self._overrides(num_envs, minibatches), budget_bytes=chosen.budget_bytes,
                             budget_note=self._budget_note(chosen), probes=self.probes, chosen=chosen,
                             baseline=baseline, upper_bound=upper, upper_bound_note=bound_note)
        self.say(result.summary())
        return result

    def _configured_minibatches(self, num_envs: int) -> dict[str, int]:
        """Phase 1 keeps each policy's num_minibatches (fewer only if the batch has fewer env steps)."""
        return {tag: min(n, num_envs * self.rollout) for tag, n in self.ppo.items()}

    def _minibatches_for(self, num_envs: int, env_steps: int) -> dict[str, int]:
        """num_minibatches giving minibatches of about ``env_steps``, never more than configured."""
        batch = num_envs * self.rollout
        return {tag: max(1, min(n, math.ceil(batch / env_steps))) for tag, n in self.ppo.items()}

    def _overrides(self, num_envs: int, minibatches: dict[str, int]) -> list[str]:
        out = [] if num_envs == self.config.trainer.num_envs else [f"trainer.num_envs={num_envs}"]
        out += [f"policy.{tag}.num_minibatches={n}" for tag, n in minibatches.items()
                if n != self.config.policy[tag].num_minibatches]
        return out

    def _budget_note(self, probe: Probe) -> str:
        if self.budget is not None:
            return "given"
        if probe.device.startswith("cuda"):
            return f"{DEFAULT_DEVICE_FRACTION:.0%} of {probe.device}"
        return f"{DEFAULT_HOST_FRACTION:.0%} of the host memory available" + (
            f", divided by {self.processes} processes" if self.processes > 1 else "")

    # -------------------------------------------------------------- one probe
    @staticmethod
    def _key(num_envs: int, minibatches: dict[str, int]) -> tuple:
        return num_envs, tuple(sorted(minibatches.items()))

    def probe(self, phase: str, num_envs: int, minibatches: dict[str, int]) -> Probe:
        key = self._key(num_envs, minibatches)
        if key in self.tried:
            return self.tried[key]
        sizes = [f"trainer.num_envs={num_envs}", f"trainer.total_steps={num_envs * self.rollout}"]
        sizes += [f"policy.{tag}.num_minibatches={n}" for tag, n in minibatches.items()]
        config = RunConfig.from_dict(apply_overrides(self.config.to_dict(), sizes))
        report = _probe(config, self.budget, self.host_default, self.iterations, self.probe_timeout)
        mb = self._minibatch_env_steps(num_envs, minibatches)
        probe = Probe(index=len(self.probes) + 1, phase=phase, num_envs=num_envs, num_minibatches=minibatches,
                      minibatch_env_steps=mb, fits=report["fits"], reason=report.get("reason", ""),
                      peak_bytes=report.get("peak"), env_steps_per_s=report.get("sps"),
                      seconds=report["seconds"], budget_bytes=report.get("budget"), device=report.get("device", ""),
                      overrides=self._overrides(num_envs, minibatches))
        self.probes.append(probe)
        self.tried[key] = probe
        self.say(probe.describe())
        return probe

    def _minibatch_env_steps(self, num_envs: int, minibatches: dict[str, int]) -> int | None:
        if not minibatches:
            return None
        return (num_envs * self.rollout) // max(minibatches.values())


# --------------------------------------------------------------------------- the child process
def _context() -> multiprocessing.context.BaseContext:
    if "forkserver" in multiprocessing.get_all_start_methods():
        ctx = multiprocessing.get_context("forkserver")
        ctx.set_forkserver_preload(_PRELOAD)  # only used when the server starts; harmless afterwards
        return ctx
    return multiprocessing.get_context("spawn")


def stop_probe_server() -> None:
    """Stop the forkserver the probes fork from, if it runs (the next probe starts a new one).

    It holds torch and the trainer's modules (~300 MiB resident), which a run
    that trains in this process afterwards should not pay for. Python has no
    public call for this; where the private one is missing, the server stays
    until this process exits.
    """
    try:
        from multiprocessing import forkserver
    except ImportError:  # pragma: no cover - platforms without forkserver
        return
    stop = getattr(getattr(forkserver, "_forkserver", None), "_stop", None)
    if stop is not None:
        stop()


def _run_child(request: dict, timeout: float) -> dict:
    """Run one probe in a child process; return its report (``fits``, ``reason``, ``peak``, ``sps``, ...).

    A child that dies without reporting, or outlives ``timeout``, is reported
    as not fitting, with what happened; the caller's process is untouched.
    """
    ctx = _context()
    request = {**request, "forked": ctx.get_start_method() == "forkserver"}
    receiver, sender = ctx.Pipe(duplex=False)
    started = time.perf_counter()
    child = ctx.Process(target=probe_main, args=(request, sender), name="warp_drive-autoscale-probe", daemon=True)
    child.start()
    sender.close()  # the child holds the only writer: EOF on the reader means it is gone
    report = None
    timed_out = False
    try:
        if receiver.poll(timeout):  # a report, or EOF when the child died without one
            try:
                report = receiver.recv()
            except EOFError:
                pass
        else:
            timed_out = True
    finally:
        child.join(timeout=0 if timed_out else 30)
        if child.is_alive():
            child.kill()
            child.join()
        receiver.close()
    seconds = time.perf_counter() - started
    if report is None:
        if timed_out:
            why = f"the probe took longer than {timeout:.0f} s and was stopped"
        elif child.exitcode is not None and child.exitcode < 0:
            name = signal.Signals(-child.exitcode).name
            why = f"the probe was killed by {name}" + (
                " (the kernel's out-of-memory killer sends SIGKILL)" if name == "SIGKILL" else "")
        else:
            why = f"the probe exited with status {child.exitcode} without a report"
        report = {"fits": False, "reason": why}
    report["seconds"] = seconds
    return report


class _Reporter:
    """Sends the probe's one report, from whichever thread gets there first."""

    def __init__(self, conn):
        self.conn = conn
        self.lock = threading.Lock()
        self.sent = False

    def send(self, report: dict) -> None:
        with self.lock:
            if not self.sent:
                self.conn.send(report)
                self.sent = True


def _resident_bytes() -> int | None:
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return None


def _mapped_library_bytes(pid: int | str = "self") -> int:
    """Resident file-backed pages (RssFile): mostly the shared libraries' code, torch's above all."""
    try:
        for line in open(f"/proc/{pid}/status"):
            if line.startswith("RssFile:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def _forkserver_offset() -> int:
    """Library pages a fresh training process holds that a child forked from the forkserver does not (yet).

    The forkserver imported what a training process imports, so its resident
    library pages are those of a fresh process; a forked child maps them only
    as it touches them, so its own resident size starts ~70 MiB lower. The
    anonymous memory (Python objects, tensors) is the same in both. Adding
    the difference makes a probe's peak that of a fresh process (within a
    few MiB, on the safe side).
    """
    return max(0, _mapped_library_bytes(os.getppid()) - _mapped_library_bytes())


def _peak_resident_bytes() -> int:
    """This process's high-water resident memory (VmHWM; ru_maxrss where /proc is missing)."""
    try:
        for line in open("/proc/self/status"):
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    import resource

    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak if sys.platform == "darwin" else peak * 1024  # bytes on macOS, KiB on Linux


def _watch_resident(budget: int, offset: int, reporter: _Reporter) -> None:
    """End this probe as soon as its resident memory (+ ``offset``) passes ``budget`` (a daemon thread)."""
    while True:
        rss = _resident_bytes()
        if rss is None:
            return  # no /proc: the peak is still checked at the end
        rss += offset
        if rss > budget:
            reporter.send({"fits": False, "peak": rss, "budget": budget, "device": "cpu",
                           "reason": f"resident memory passed {format_bytes(budget)} (at {format_bytes(rss)}); "
                                     f"probe stopped early"})
            os._exit(0)
        time.sleep(WATCHDOG_PERIOD_S)


def _is_memory_error(exc: BaseException) -> bool:
    if isinstance(exc, MemoryError):
        return True
    text = f"{type(exc).__name__}: {exc}".lower()
    return any(s in text for s in _MEMORY_ERROR_TEXT)


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}"[:300]


def probe_main(request: dict, conn) -> None:
    """The probe, in the child: build, train ``iterations`` iterations, checkpoint, report peak memory."""
    reporter = _Reporter(conn)
    device = "cpu"
    budget = request["budget"]
    offset = _forkserver_offset() if request.get("forked") else 0
    try:
        import torch

        from warp_drive.backends import backend_class
        from warp_drive.training import run

        config = RunConfig.from_dict(request["config"])
        num_envs = config.trainer.num_envs
        # Where the executor's arrays live decides what is measured: torch's CUDA
        # allocator, or the process's resident memory (cpu executor, either shape).
        on_gpu = backend_class(config.trainer.backend).capabilities.memory == "cuda"
        if on_gpu:
            index = torch.cuda.current_device()
            properties = torch.cuda.get_device_properties(index)
            device = f"cuda:{index} ({properties.name})"
            if budget is None:
                budget = int(DEFAULT_DEVICE_FRACTION * properties.total_memory)
        else:
            budget = budget if budget is not None else request["host_default"]
            if budget is None:
                raise ConfigError("cannot tell how much host memory is available here; give a memory budget")
            threading.Thread(target=_watch_resident, args=(budget, offset, reporter), daemon=True).start()
        trainer = run.build(config)
        _apply_fail_hook(request.get("fail_hook"), num_envs)
        steps = seconds = 0.0
        for i in range(request["iterations"]):
            metrics = trainer.iterate()
            if i > 0 or request["iterations"] == 1:
                steps += trainer.batch_env_steps
                seconds += metrics["time/iteration"]
        trainer.state_dict()  # a checkpoint copies every env array: part of a run's peak
        trainer.env.backend.synchronize()
        peak = torch.cuda.max_memory_reserved(index) if on_gpu else _peak_resident_bytes() + offset
        fits = peak <= budget
        reason = "" if fits else f"peak {format_bytes(peak)} is over the budget of {format_bytes(budget)}"
        reporter.send({"fits": fits, "reason": reason, "peak": int(peak), "budget": int(budget),
                       "sps": steps / seconds if seconds else None, "device": device})
    except BaseException as exc:  # noqa: BLE001 - everything goes back to the parent, which decides
        if _is_memory_error(exc):
            reporter.send({"fits": False, "reason": _first_line(exc), "budget": budget, "device": device})
        else:
            reporter.send({"error": "".join(traceback.format_exception(exc)).rstrip()})
    finally:
        conn.close()


def _apply_fail_hook(hook: str | None, num_envs: int) -> None:
    """Test hook ($WARP_DRIVE_TEST_PROBE_FAIL=kill:N or raise:N): fail a probe of more than N envs."""
    if not hook:
        return
    kind, _, limit = hook.partition(":")
    if num_envs <= int(limit):
        return
    if kind == "kill":
        os.kill(os.getpid(), signal.SIGKILL)
    raise ValueError(f"injected probe failure above {limit} envs")
