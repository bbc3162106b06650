"""One auto-scaling probe: train a size in a child process and measure its memory and speed.

The parent side (:func:`run_probe`) starts the child from a forkserver that
preloaded the training stack, samples the child's resident memory, stops it
past the host budget or the timeout, and turns what happened into a
:class:`~warp_drive.training.autoscale.results.Probe`. The child side
(:func:`probe_main`) builds the trainer, trains, checkpoints and reports. They
live in one module because they speak one small message protocol (``started``,
then a report or an error); why probes run in child processes at all is in
:mod:`warp_drive.training.autoscale`'s docstring.
"""

from __future__ import annotations

import multiprocessing
import signal
import statistics
import time
import traceback

import psutil

from warp_drive.runtime.backend_names import resolve_backend_name
from warp_drive.training.autoscale.results import Probe, ScaleError
from warp_drive.training.config import RunConfig, apply_overrides
from warp_drive.training.runs.memory import format_bytes

DEFAULT_DEVICE_FRACTION = 0.9  # of the GPU's memory, when no budget is given
# How often the parent samples a probe's resident memory: rarely enough not to take the probe's cores from it.
WATCH_PERIOD_S = 0.05
# Imported once by the forkserver that probes are forked from (torch is most of a probe's start-up time).
PROBE_PRELOAD = ["warp_drive.training.run"]
_MEMORY_ERROR_TEXT = ("out of memory", "illegal memory access", "out of resources", "bad_alloc",
                      "can't allocate memory", "cannot allocate memory")


# --------------------------------------------------------------------------- one probe (parent side)
def run_probe(config: RunConfig, budget: int | None, host_budget: int, probe_seconds: float,
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
        # (pycuda is the executor whose memory is "cuda"; the name keeps the server's import torch-free)
        on_gpu = resolve_backend_name(config.trainer.backend) == "pycuda"
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
