"""The auto-scaling search: which sizes to probe, when to stop, which size to choose.

It only sees a ``probe(num_envs) -> Probe`` function, never a process or a
trainer, so the selection rules (doubling, the memory fit, patience, second
readings, halving when the config's size does not fit) are tested on made-up
throughput and memory curves; see :mod:`warp_drive.training.autoscale` for
why each rule is there.
"""

from __future__ import annotations

from typing import Callable

from warp_drive.training.autoscale.results import MemoryFit, Probe, ScaleError
from warp_drive.training.runs.memory import format_bytes

DEFAULT_MIN_GAIN = 0.05  # a size must be more than 5% faster than the best so far for the search to go on
DEFAULT_PATIENCE = 2  # ... and the search ends at the 2nd size in a row that is not
DEFAULT_CONFIRM = 3  # the fastest sizes measured are probed once more; each keeps its better reading
MIN_GROWTH = 1.25  # a size the memory fit allows is probed only if it is this much above the last one


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
