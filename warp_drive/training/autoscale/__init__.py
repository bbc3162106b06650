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

This package's ``__init__`` is its public entry (:func:`auto_scale`,
:func:`probe_config`, reading a budget such as ``"2GiB"``) and names the parts
users meet; the parts live in their own modules:
:mod:`~warp_drive.training.autoscale.results` (``Probe``, ``MemoryFit``,
``ScaleResult``, ``ScaleError``), :mod:`~warp_drive.training.autoscale.search`
(the search over sizes) and :mod:`~warp_drive.training.autoscale.probe` (one
probe, parent and child side). Sizes in bytes and the host's free memory are
the run's memory check's (:mod:`warp_drive.training.runs.memory`): a probe
runs a real training process, so auto-scaling sits above the run, never below it.
"""

from __future__ import annotations

import re
from typing import Callable

from warp_drive.training.autoscale.probe import DEFAULT_DEVICE_FRACTION, run_probe
from warp_drive.training.autoscale.results import MemoryFit, Probe, ScaleError, ScaleResult
from warp_drive.training.autoscale.search import DEFAULT_CONFIRM, DEFAULT_MIN_GAIN, DEFAULT_PATIENCE, search
from warp_drive.training.config import ConfigError, RunConfig, apply_overrides
from warp_drive.training.runs.memory import format_bytes, host_memory_available

__all__ = [
    "DEFAULT_CONFIRM",
    "DEFAULT_DEVICE_FRACTION",
    "DEFAULT_HOST_FRACTION",
    "DEFAULT_MAX_ENVS",
    "DEFAULT_MIN_GAIN",
    "DEFAULT_PATIENCE",
    "DEFAULT_PROBE_SECONDS",
    "DEFAULT_PROBE_TIMEOUT",
    "MemoryFit",
    "Probe",
    "ScaleError",
    "ScaleResult",
    "auto_scale",
    "parse_memory_size",
    "probe_config",
]

DEFAULT_MAX_ENVS = 65_536
DEFAULT_PROBE_SECONDS = 2.0  # timed training per probe, after one warm-up iteration
DEFAULT_HOST_FRACTION = 0.5  # of the host memory available now, when no budget is given (cpu executor)
DEFAULT_PROBE_TIMEOUT = 600.0

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
        return run_probe(sized, budget, host_budget, probe_seconds, probe_timeout)

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
    return run_probe(config, budget, host_budget, probe_seconds, timeout)


def _host_budget(budget: int | None, processes: int) -> int:
    """The budget for a probe's resident memory: the given one, or a share of the host memory available now."""
    return budget if budget is not None else int(DEFAULT_HOST_FRACTION * host_memory_available() / processes)
