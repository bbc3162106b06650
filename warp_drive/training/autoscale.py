"""Automatic vertical scaling: the ``num_envs`` that trains fastest within a memory budget.

``auto_scale(config)`` (and ``warp-drive train --auto-scale``) answers "how
many envs should one training process run on this machine?" by measuring.
Each size is tried in a *probe*: a fresh child process builds the trainer,
runs one warm-up training iteration and then timed ones (at least three, and
at least ``probe_seconds``), takes a checkpoint's ``state_dict`` (which copies
the env arrays, part of a real run's peak) and reports the env steps/s of its
median iteration; the parent measures its peak memory.

The search starts at the config's own ``num_envs`` (the baseline) and
doubles, and it stops at the first of:

* the upper bound: ``max_envs``, and ``total_steps // rollout_length`` so that
  the run keeps at least one iteration;
* a size that does not fit the memory budget, or one that a straight-line fit
  of peak memory against ``num_envs`` over the probes so far predicts will
  not fit (then the largest size the fit allows is probed instead, when it is
  at least 25% above the last one);
* the second size in a row (``patience``) that is not more than ``min_gain``
  (5%) faster than the fastest so far: on a CPU throughput levels off once
  the cores are busy, and past the caches it drops. One such size does not
  end the search: a single probe taken in a busy moment of a shared machine
  can read far below its size's real speed (seen on a 2-core VM: 12k env
  steps/s for a size that trains at 24k), and stopping there would keep the
  search from the sizes that train several times faster.

Then the three fastest sizes (``confirm``) are probed once more and each
keeps its better reading: on a shared machine another process can halve a
whole probe's speed, never raise it. The choice is the *fastest measured*
size that fits: never a size that was not probed, and never slower than any
probe. When the config's own size does
not fit, the search halves it until one does.

Memory, per training process:

* cpu executor (``cpu`` or ``cpu-gpu``: host arrays): the probe's resident
  memory, sampled with ``psutil`` every 50 ms by the parent, which
  stops the probe as soon as it passes the budget (so doubling past the limit
  cannot take the machine's memory with it). Default budget: half of the
  memory available when the search starts (the cgroup's limit where there is
  one), divided by ``processes`` for ``--nproc`` runs, which share the host.
* GPU: ``torch.cuda.max_memory_reserved`` (what torch's allocator took from
  the device, which holds the env arrays too). Default budget: 90% of the
  device's memory (the rest for the CUDA context and the kernels); a CUDA
  out-of-memory error also means "does not fit".

Why child processes: a CUDA out-of-memory or illegal-address error can leave
the CUDA context unusable, the OOM killer ends the whole process, and torch's
caching allocator keeps what it reserved; none of that may reach the process
that trains afterwards. They are forked from Python's ``forkserver``, which
has imported torch and warp_drive once (``PROBE_PRELOAD``), so a probe starts
in well under a second instead of the ~3 s a fresh interpreter spends
importing torch. The server never touches CUDA (importing those modules does
not), so each probe makes its own CUDA context, as a real training process
does. A probe's resident memory counts the pages it uses, the imported
modules' heap included; library pages that only the imports touched (~50 MiB
of torch's shared libraries with its CPU build: file cache, shared and
reclaimable) are the one part of a fresh process's resident size it leaves
out. The server is Python's own; it idles until the process ends. A
probe that raises an error that is not about memory (a bug, a compile error)
stops the search with that error; one killed by a signal (the OOM killer's
SIGKILL) or past ``probe_timeout`` counts as not fitting. The env kernels are
compiled once, by the first probe, into the build cache.

The original WarpDrive's scaler doubled without an upper bound, chose the
largest size rather than the fastest, and could not tell a bug from a full GPU.
"""

from __future__ import annotations

import math
import multiprocessing
import re
import signal
import statistics
import time
import traceback
from dataclasses import dataclass
from typing import Any, Callable

import psutil

from warp_drive.backends import backend_class
from warp_drive.training.config import ConfigError, RunConfig, apply_overrides

DEFAULT_MAX_ENVS = 65_536
DEFAULT_MIN_GAIN = 0.05  # a size must be more than 5% faster than the best so far for the search to go on
DEFAULT_PATIENCE = 2  # ... and the search ends at the 2nd size in a row that is not
DEFAULT_CONFIRM = 3  # the fastest sizes measured are probed once more; each keeps its better reading
DEFAULT_PROBE_SECONDS = 2.0  # timed training per probe, after one warm-up iteration
DEFAULT_HOST_FRACTION = 0.5  # of the host memory available now, when no budget is given (cpu executor)
DEFAULT_DEVICE_FRACTION = 0.9  # of the GPU's memory, when no budget is given
DEFAULT_PROBE_TIMEOUT = 600.0
MIN_GROWTH = 1.25  # a size the memory fit allows is probed only if it is this much above the last one
# How often the parent samples a probe's resident memory: rarely enough not to take the probe's cores from it.
WATCH_PERIOD_S = 0.05
# Imported once by the forkserver that probes are forked from (torch is most of a probe's start-up time).
PROBE_PRELOAD = ["warp_drive.training.run"]
_MEMORY_ERROR_TEXT = ("out of memory", "illegal memory access", "out of resources", "bad_alloc",
                      "can't allocate memory", "cannot allocate memory")


class ScaleError(RuntimeError):
    """The search could not finish: nothing fits the budget, or a probe failed with an error not about memory."""


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
            return f"{n / size:,.1f} {unit}"
    return f"{int(n)} B"


def host_memory_available() -> int:
    """Bytes this process could still use: psutil's ``available``, capped by a cgroup memory limit (containers)."""
    available = psutil.virtual_memory().available
    for limit_file, usage_file in (("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory.current"),
                                   ("/sys/fs/cgroup/memory/memory.limit_in_bytes",
                                    "/sys/fs/cgroup/memory/memory.usage_in_bytes")):
        try:
            with open(limit_file) as f_limit, open(usage_file) as f_usage:
                limit, usage = f_limit.read().strip(), int(f_usage.read().strip())
        except (OSError, ValueError):
            continue
        if limit.isdigit() and int(limit) < 2**60:  # "max" or a huge number: no limit
            available = min(available, max(int(limit) - usage, 0))
        break
    return available


# --------------------------------------------------------------------------- results
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


# --------------------------------------------------------------------------- the search
def search(start: int, upper: int, probe: Callable[[int], Probe], min_gain: float = DEFAULT_MIN_GAIN,
           log: Callable[[str], None] | None = None, patience: int = DEFAULT_PATIENCE,
           confirm: int = DEFAULT_CONFIRM) -> tuple[Probe, list[Probe], str, MemoryFit | None]:
    """Probe sizes from ``start`` (doubling, at most ``upper``); return the fastest that fits.

    ``probe(num_envs)`` measures one size (a real probe, or numbers in a
    test). Returns ``(chosen, probes in order, why the search stopped, memory
    fit or None)``. ``patience``: how many sizes in a row may fail to gain
    ``min_gain`` before the search stops. ``confirm``: how many of the fastest
    sizes are probed a second time once it has stopped (0: none). Raises
    :class:`ScaleError` when no size fits, naming the budget.
    """
    say = log or (lambda line: None)
    probes: list[Probe] = []

    def measure(num_envs: int) -> Probe:
        result = probe(num_envs)
        result.index = len(probes) + 1
        probes.append(result)
        say(result.describe())
        return result

    num_envs = min(start, upper)
    last = measure(num_envs)
    if not last.fits:  # the config's size is too big: halve until one fits
        while not last.fits:
            if last.base_bytes is not None and last.budget_bytes is not None and last.base_bytes >= last.budget_bytes:
                raise ScaleError(f"nothing fits the memory budget of {format_bytes(last.budget_bytes)}: a training "
                                 f"process holds {format_bytes(last.base_bytes)} before it builds any env (torch "
                                 f"and the trainer's modules); raise the memory budget")
            if num_envs == 1:
                raise ScaleError(f"nothing fits the memory budget of {format_bytes(last.budget_bytes)}: even "
                                 f"num_envs=1 does not ({last.reason}); raise the memory budget")
            num_envs //= 2
            last = measure(num_envs)
        stop = f"num_envs={probes[-2].num_envs:,} does not fit, num_envs={num_envs:,} does"
        return last, probes, stop, MemoryFit.of(probes)
    misses = 0  # sizes in a row that were not faster
    while True:
        if num_envs >= upper:
            stop = f"reached the upper bound, num_envs={upper:,}"
            break
        following = min(2 * num_envs, upper)
        fit = MemoryFit.of(probes)
        if fit is not None and fit.predict(following) > last.budget_bytes:
            most = fit.largest_fitting(last.budget_bytes) or 0
            if most < MIN_GROWTH * num_envs:
                stop = (f"the memory fit ({fit.describe()}) predicts {format_bytes(fit.predict(following))} for "
                        f"num_envs={following:,}, over the budget of {format_bytes(last.budget_bytes)}")
                break
            following = most
        best_before = max(p.env_steps_per_s for p in probes if p.fits)
        num_envs = following
        last = measure(num_envs)
        if not last.fits:
            stop = f"num_envs={num_envs:,} does not fit"
            break
        misses = misses + 1 if last.env_steps_per_s <= (1 + min_gain) * best_before else 0
        if misses >= patience:
            row = f"{misses} sizes in a row" if misses > 1 else "a size"
            stop = (f"num_envs={num_envs:,} ran at {last.env_steps_per_s:,.0f} env steps/s: {row} not more than "
                    f"{min_gain:.0%} faster than the best before (now {best_before:,.0f})")
            break
    _second_readings(probes, confirm, measure, say)
    refused = {p.num_envs for p in probes if not p.fits}
    chosen = max((p for p in probes if p.fits and p.num_envs not in refused), key=lambda p: p.env_steps_per_s)
    return chosen, probes, stop, MemoryFit.of(probes)


def _second_readings(probes: list[Probe], confirm: int, measure: Callable[[int], Probe],
                     say: Callable[[str], None]) -> None:
    """Probe the ``confirm`` fastest sizes that fit once more (when more than one size fits).

    Another process taking the cores can only slow a probe down, and on a
    shared machine it can halve a whole probe (seen on a 2-core VM: 1,024 envs
    read 35.6k env steps/s and train at 70k), so each size keeps its better
    reading and a size that read low once is not lost. A second reading that
    does not fit rules the size out: memory is a limit, not a race.
    """
    best: dict[int, float] = {}
    for p in probes:
        if p.fits:
            best[p.num_envs] = max(best.get(p.num_envs, 0.0), p.env_steps_per_s)
    again = sorted(best, key=best.get, reverse=True)[:confirm] if len(best) > 1 else []
    if again:
        say(f"auto-scale: probing the {len(again)} fastest sizes again ({', '.join(f'{n:,}' for n in again)}); "
            f"each keeps its better reading")
    for num_envs in again:
        measure(num_envs)


def auto_scale(config: RunConfig, memory_budget: int | str | None = None, max_envs: int | None = None, *,
               processes: int = 1, min_gain: float = DEFAULT_MIN_GAIN, probe_seconds: float = DEFAULT_PROBE_SECONDS,
               probe_timeout: float = DEFAULT_PROBE_TIMEOUT, log: Callable[[str], None] | None = print,
               probe: Callable[[int], Probe] | None = None, patience: int = DEFAULT_PATIENCE,
               confirm: int = DEFAULT_CONFIRM) -> ScaleResult:
    """The ``num_envs`` that trains ``config`` fastest within ``memory_budget`` (see the module docstring).

    ``memory_budget``: bytes or a size such as ``"2GiB"`` for one training
    process (GPU memory on a GPU, resident host memory on the cpu executor);
    ``None`` for the defaults. ``max_envs``: the upper bound on ``num_envs``
    (default 65,536). ``processes``: training processes that will share this
    host (``--nproc``); divides the default host budget. ``min_gain``: the
    search goes on while each doubling is more than this much faster (-1:
    throughput never stops it, only memory and ``max_envs`` do); ``patience``:
    the sizes in a row that may fail to gain it before the search stops;
    ``confirm``: the fastest sizes probed a second time (each keeps its better reading).
    ``probe_seconds``: timed training per probe. ``log`` receives one line per
    probe and the summary. ``probe``: measures one ``num_envs`` instead of a
    real probe (tests of the selection). Raises :class:`ScaleError` when
    nothing fits, or when a probe fails with an error that is not about memory.
    """
    say = log or (lambda line: None)
    budget = parse_memory_size(memory_budget) if memory_budget is not None else None
    max_envs = DEFAULT_MAX_ENVS if max_envs is None else max_envs
    for name, value in (("max_envs", max_envs), ("processes", processes), ("patience", patience)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ConfigError(f"auto-scale {name}: expected an integer >= 1, got {value!r}")
    if not min_gain >= -1:
        raise ConfigError(f"auto-scale min_gain: expected a fraction >= -1 (0.05 for 5%), got {min_gain!r}")
    host_budget = _host_budget(budget, processes)
    trainer = config.trainer
    by_steps = trainer.total_steps // trainer.rollout_length
    upper = min(max_envs, by_steps)
    bound_note = ("max_envs" if max_envs <= by_steps else
                  f"total_steps // rollout_length = {trainer.total_steps:,} // {trainer.rollout_length}, so that "
                  f"the run keeps one iteration; raise trainer.total_steps for more")
    start = min(trainer.num_envs, upper)
    shared = f" shared by {processes} processes" if processes > 1 else ""
    default = (f"on the cpu executor {DEFAULT_HOST_FRACTION:.0%} of the host memory available{shared} "
               f"({format_bytes(host_budget)}), on a GPU {DEFAULT_DEVICE_FRACTION:.0%} of its memory")
    say(f"auto-scale: probing num_envs from {start:,}, doubling up to {upper:,} ({bound_note}); memory budget "
        f"per training process: {format_bytes(budget) if budget is not None else default}; "
        f"the fastest size that fits wins")

    def real_probe(num_envs: int) -> Probe:
        sized = RunConfig.from_dict(apply_overrides(config.to_dict(), [f"trainer.num_envs={num_envs}"]))
        return _run_probe(sized, budget, host_budget, probe_seconds, probe_timeout)

    if isinstance(confirm, bool) or not isinstance(confirm, int) or confirm < 0:
        raise ConfigError(f"auto-scale confirm: expected an integer >= 0, got {confirm!r}")
    chosen, probes, stop, fit = search(start, upper, probe or real_probe, min_gain, say, patience, confirm)
    if budget is not None:
        budget_note = "given"
    elif chosen.device.startswith("cuda"):
        budget_note = f"{DEFAULT_DEVICE_FRACTION:.0%} of {chosen.device}"
    else:
        budget_note = f"{DEFAULT_HOST_FRACTION:.0%} of the host memory available{shared}"
    result = ScaleResult(
        num_envs=chosen.num_envs,
        overrides=[] if chosen.num_envs == trainer.num_envs else [f"trainer.num_envs={chosen.num_envs}"],
        chosen=chosen, probes=probes, baseline=_baseline(probes, trainer.num_envs),
        stop_reason=stop, fit=fit, budget_note=budget_note,
        upper_bound=upper, upper_bound_note=bound_note)
    say(result.summary())
    return result


def _baseline(probes: list[Probe], num_envs: int) -> Probe | None:
    """The config's own size: its best reading that fit, else its first probe (None when it was not probed)."""
    own = [p for p in probes if p.num_envs == num_envs]
    fitting = [p for p in own if p.fits]
    return max(fitting, key=lambda p: p.env_steps_per_s) if fitting else (own[0] if own else None)


def probe_config(config: RunConfig, memory_budget: int | str | None = None, *,
                 probe_seconds: float = DEFAULT_PROBE_SECONDS, timeout: float = DEFAULT_PROBE_TIMEOUT,
                 processes: int = 1) -> Probe:
    """One probe of ``config`` as it is, in a child process: does it fit, how much memory, how fast?"""
    budget = parse_memory_size(memory_budget) if memory_budget is not None else None
    host_budget = _host_budget(budget, processes)
    return _run_probe(config, budget, host_budget, probe_seconds, timeout)


def _host_budget(budget: int | None, processes: int) -> int:
    """The budget for a probe's resident memory: the given one, or a share of the host memory available now."""
    return budget if budget is not None else int(DEFAULT_HOST_FRACTION * host_memory_available() / processes)


# --------------------------------------------------------------------------- one probe (parent side)
def _run_probe(config: RunConfig, budget: int | None, host_budget: int, probe_seconds: float,
               timeout: float) -> Probe:
    """Train ``config`` in a child process, watching its resident memory; the caller's process is untouched.

    The child first sends ``started`` (its device, its GPU budget or None on
    the cpu executor, its resident memory after the imports), then its report
    (or the error it hit). The parent samples the child's resident size with
    psutil until then and stops it as soon as it passes a host budget, or
    when it outlives ``timeout``.
    """
    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload(PROBE_PRELOAD)  # applies when the server starts: the first probe of this process
    receiver, sender = ctx.Pipe(duplex=False)
    request = {"config": config.to_dict(), "budget": budget, "probe_seconds": probe_seconds}
    child = ctx.Process(target=probe_main, args=(request, sender), name="warp_drive-autoscale-probe", daemon=True)
    begun = time.perf_counter()
    child.start()
    sender.close()  # the child holds the only writer: EOF on the reader means it is gone
    process = psutil.Process(child.pid)
    started: dict | None = None
    report: dict | None = None
    peak = 0
    stopped = ""
    try:
        while True:
            if receiver.poll(WATCH_PERIOD_S):
                try:
                    message = receiver.recv()
                except EOFError:  # the child died without a report
                    break
                if message.get("started"):
                    started = message
                    continue
                report = message
                break
            rss = _resident_bytes(process)
            peak = max(peak, rss or 0)
            if started is not None and started["gpu_budget"] is None and rss is not None and rss > host_budget:
                stopped = (f"resident memory reached {format_bytes(rss)}, over the budget of "
                           f"{format_bytes(host_budget)}; probe stopped")
                break
            if time.perf_counter() - begun > timeout:
                stopped = f"the probe took longer than {timeout:.0f} s and was stopped"
                break
    finally:
        if report is None and child.is_alive():
            child.kill()
        child.join()
        receiver.close()
    device = started["device"] if started else ""
    gpu = started is not None and started["gpu_budget"] is not None
    probe = Probe(num_envs=config.trainer.num_envs, fits=False, peak_bytes=peak or None,
                  budget_bytes=started["gpu_budget"] if gpu else host_budget, env_steps_per_s=None,
                  seconds=time.perf_counter() - begun, device=device,
                  base_bytes=started["rss"] if started and not gpu else None)
    if report is None:
        if stopped:
            probe.reason = stopped
        elif child.exitcode is not None and child.exitcode < 0:
            name = signal.Signals(-child.exitcode).name
            probe.reason = f"the probe was killed by {name}" + (
                " (the kernel's out-of-memory killer sends SIGKILL)" if name == "SIGKILL" else "")
        else:
            probe.reason = f"the probe exited with status {child.exitcode} without a report"
    elif report.get("error"):
        raise ScaleError(f"a probe of num_envs={config.trainer.num_envs:,} failed with an error that is not about "
                         f"memory, so the search stopped:\n{report['error']}")
    elif report.get("memory_error"):
        probe.reason = report["memory_error"]
    else:
        probe.peak_bytes = report["gpu_peak"] if gpu else max(peak, report["rss"])
        probe.fits = probe.peak_bytes <= probe.budget_bytes
        probe.env_steps_per_s = report["env_steps_per_s"] if probe.fits else None
        if not probe.fits:
            probe.reason = (f"peak {format_bytes(probe.peak_bytes)} is over the budget of "
                            f"{format_bytes(probe.budget_bytes)}")
    return probe


def _resident_bytes(process: psutil.Process) -> int | None:
    try:
        return process.memory_info().rss
    except psutil.Error:  # gone (or a zombie on some platforms)
        return None


# --------------------------------------------------------------------------- one probe (child side)
def _is_memory_error(exc: BaseException) -> bool:
    if isinstance(exc, MemoryError):
        return True
    text = f"{type(exc).__name__}: {exc}".lower()
    return any(s in text for s in _MEMORY_ERROR_TEXT)


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}"[:300]


def probe_main(request: dict, conn) -> None:
    """The probe, in the child: build, warm up, train for ``probe_seconds``, checkpoint, report."""
    try:
        import torch

        from warp_drive.training import run  # deferred: the probe child imports the training stack, the server never

        config = RunConfig.from_dict(request["config"])
        gpu_budget = None
        device = "cpu"
        # Where the executor's arrays live decides what is measured: torch's CUDA
        # allocator, or the process's resident memory (cpu executor, either shape).
        on_gpu = backend_class(config.trainer.backend).capabilities.memory == "cuda"
        if on_gpu:
            index = torch.cuda.current_device()
            properties = torch.cuda.get_device_properties(index)
            device = f"cuda:{index} ({properties.name})"
            gpu_budget = request["budget"] or int(DEFAULT_DEVICE_FRACTION * properties.total_memory)
        me = psutil.Process()
        conn.send({"started": True, "device": device, "gpu_budget": gpu_budget, "rss": me.memory_info().rss})
        # Enough total steps that no schedule ends during the probe; one iteration to warm up, then timed ones.
        batch = config.trainer.num_envs * config.trainer.rollout_length
        config = RunConfig.from_dict(apply_overrides(config.to_dict(), [f"trainer.total_steps={batch * 10**6}"]))
        trainer = run.build(config)
        trainer.iterate()
        times: list[float] = []
        while len(times) < 3 or sum(times) < request["probe_seconds"]:
            times.append(trainer.iterate()["time/iteration"])
        state = trainer.state_dict()  # a checkpoint copies every env array: part of a run's peak
        trainer.env.backend.synchronize()
        # The median iteration: a moment when another process held the cores slows a few iterations, not the size.
        report = {"env_steps_per_s": trainer.batch_env_steps / statistics.median(times), "rss": me.memory_info().rss}
        if on_gpu:
            report["gpu_peak"] = torch.cuda.max_memory_reserved(index)
        del state
        conn.send(report)
    except BaseException as exc:  # noqa: BLE001 - everything goes back to the parent, which decides
        if _is_memory_error(exc):
            conn.send({"memory_error": _first_line(exc)})
        else:
            conn.send({"error": "".join(traceback.format_exception(exc)).rstrip()})
    finally:
        conn.close()
