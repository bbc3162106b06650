"""``warp-drive check ENV``: every check this machine can run on an environment, printed as one table.

Why: an env's kernel can be wrong in ways no single tool shows. The cpu executor runs threads in a fixed
order, so a missing ``wd_sync_env()`` or a plain ``+=`` across threads gives the right numbers there and
passes the consistency checker; an out-of-bounds write usually corrupts nothing visible; a NaN reward
surfaces hundreds of iterations into training. Each check is one function of a
:class:`~warp_drive.env.env_rollout.Subject` returning a :class:`~warp_drive.env.env_rollout.Result` (PASS, FAIL
or SKIP, a one-line detail, and the fix of a failure):

* ``construction``: ``EnvWrapper`` on the cpu executor (declarations, shapes both ways, bind by name);
* ``gpu-build``: nvcc for the build gate's architectures -- build errors, spills, the block's limits;
* ``asan`` / ``race``: a random rollout under AddressSanitizer, and under ThreadSanitizer with the threads
  shuffled (child processes, :mod:`warp_drive.env.env_rollout`);
* ``host-api``: one episode of ``env.reset(seed)`` / ``env.step(actions)``;
* ``consistency``: the kernel against ``reference_step`` on ``cpu`` and ``cpu-gpu`` (SKIP without one);
* ``rollout``: random legal actions with resets, every array scanned (NaN/inf, int state outside
  ``array_ranges()``, masks with no legal action).

:func:`run` runs the sanitizers before any of this process's own launches, and a kernel ASan caught is not
run here at all: a wild write would corrupt the process that prints the table.
"""

from __future__ import annotations

import math
import os
import sys
import time
from typing import Callable, Sequence

import numpy as np
from gymnasium import spaces

from warp_drive.runtime.backends import race
from warp_drive.runtime.backends.nvcc import find_nvcc
from warp_drive.runtime.backends.resources import ResourceRequest, launch_problems, local_memory_problems, ptxas_reports
from warp_drive.env.consistency import check as consistency_check
from warp_drive.env.env_rollout import (DEFAULT_STEPS, FAIL, PASS, SKIP, Result, Subject, failure_text, one_line,
                                    random_rollout, run_sanitizer, scan)
from warp_drive.env.environment import ACTION_MASK, AGENT_PHASES, THREADS_PER_ENV, Environment
from warp_drive.env.registry import get_env_class
from warp_drive.env.wrapper import FLAT_BLOCK, EnvWrapper

CHECKS = ("construction", "gpu-build", "asan", "race", "host-api", "consistency", "rollout")
# The build gate's targets (tests/runtime/test_build_gate.py's TARGETS; tests/cli/test_check.py holds them equal).
GATE_TARGETS = (("sm_75", False), ("sm_80", False), ("sm_90", False), ("sm_120", False), ("sm_90", True))


def check_construction(s: Subject) -> Result:
    """EnvWrapper on the cpu executor: the env's declarations (arrays against spaces both ways, groups, masks,
    bounds, the kernel's arguments by name) are checked, and the kernel is built."""
    s.wrapper = w = EnvWrapper(s.env_class, s.num_envs, backend="cpu", seed=s.seed, env_config=s.config)
    return Result("construction", PASS, f"{w.num_envs} envs x {w.num_agents} agents, episode_length "
                  f"{w.episode_length}, on the cpu executor")


def gpu_block(env: Environment, limit: int, num_envs: int) -> tuple[int, int]:
    """(threads per block, blocks per env) of the env's step on a GPU whose figures allow ``limit`` threads,
    as the framework chooses them (``FunctionManager.env_geometry``, ``EnvWrapper``'s flat launch)."""
    if env.thread_layout == THREADS_PER_ENV:
        return min(FLAT_BLOCK, num_envs), 1
    if env.thread_layout == AGENT_PHASES:
        return max(1, min(env.num_agents, limit)), 1
    blocks = max(1, math.ceil(env.num_agents / max(1, limit)))
    return math.ceil(env.num_agents / blocks), blocks


def check_gpu_build(s: Subject) -> Result:
    """nvcc (``-Xptxas -v``) builds of the env's source for the build gate's architectures, release and -G:
    no build error, no spill in the step kernel's release builds, and each kernel's block -- the step's as the
    framework would launch it -- within each architecture's limits. A stack frame is shown, not refused."""
    if find_nvcc() is None:
        return Result("gpu-build", SKIP, "nvcc not found (install the CUDA toolkit, or set $NVCC / $CUDA_HOME)")
    env = s.make_env()  # an Environment: its step is cuda_source's step_kernel (the wrapper's default StepBinding)
    defines = dict(env.cuda_defines or {}) or None
    requests = [ResourceRequest((env.cuda_source_path(),), (), defines, arch, debug) for arch, debug in GATE_TARGETS]
    problems, registers, frames, blocks = [], [], [], 1
    for (arch, debug), report in zip(GATE_TARGETS, ptxas_reports(requests)):
        if isinstance(report, Exception):
            return Result("gpu-build", FAIL, one_line(report), "make the kernel build for that architecture")
        for kernel, res in report.items():
            threads = 32
            if kernel == env.step_kernel:
                threads, blocks = gpu_block(env, res.max_threads_per_block, s.num_envs)
                registers.append(res.registers or 0)
                if not debug:
                    frames.append(res.stack_frame_bytes or 0)
                    problems += local_memory_problems(kernel, res, allowed_stack_bytes=1 << 30)  # spills only
            problems += launch_problems(kernel, res, threads, arch)
    if problems:
        return Result("gpu-build", FAIL, one_line(problems[0]), "lighten the kernel or bound its block "
                      "(__launch_bounds__), or loop over agents (WD_FOR_EACH_AGENT, thread_layout = AGENT_PHASES)")
    targets = ", ".join(arch for arch, debug in GATE_TARGETS if not debug) + " and sm_90 -G"
    notes = [f"{max(frames)} bytes of stack frame"] if frames and max(frames) else []
    notes += [f"{blocks} blocks per env (a cooperative launch)"] if blocks > 1 else []
    spread = f"{min(registers)}-{max(registers)}" if registers else "?"
    return Result("gpu-build", PASS, f"{env.step_kernel} on {targets}: {spread} registers, no spills, its block "
                  f"fits" + "".join(f"; {n}" for n in notes))


def _host_actions(env: Environment, agent_spaces: dict) -> dict:
    """One random action per agent for the host API, among the legal ones where the agent has a mask row."""
    arrays, out = env.single_env_arrays, {}
    rows = {agent: (f"{ACTION_MASK}_{group}", row) if f"{ACTION_MASK}_{group}" in arrays else (ACTION_MASK, agent)
            for group, agents in env.agent_groups().items() for row, agent in enumerate(agents)}
    for agent, space in agent_spaces.items():
        name, row = rows[agent]
        mask = np.asarray(arrays[name][0, row]).ravel().astype(np.int8) if name in arrays else None
        if mask is not None and isinstance(space, spaces.Discrete):
            out[agent] = int(space.sample(mask=mask))
        elif mask is not None and isinstance(space, spaces.MultiDiscrete):
            out[agent] = space.sample(mask=tuple(np.split(mask, np.cumsum(space.nvec)[:-1])))
        else:
            out[agent] = space.sample()
    return out


def check_host_api(s: Subject) -> Result:
    """One episode of the single-env host API with random legal actions: every agent observed in its space's
    shape at every step, and the episode over within ``episode_length`` steps."""
    env = s.make_env()
    observations = env.reset(seed=s.seed)
    agent_spaces = {agent: env.action_space(agent) for agent in range(env.num_agents)}
    for agent, space in agent_spaces.items():
        space.seed(s.seed + agent)
    for step in range(env.episode_length + 1):
        for agent in range(env.num_agents):
            shape, got = tuple(env.observation_space(agent).shape), observations.get(agent)
            if got is None or np.shape(got) != shape:
                return Result("host-api", FAIL, f"after {step} steps agent {agent}'s observation has shape "
                              f"{'none' if got is None else np.shape(got)}, its observation space {shape}",
                              "make the observations array match observation_space()")
        if step == env.episode_length:
            break
        observations, _rewards, done, info = env.step(_host_actions(env, agent_spaces))
        if done["__all__"]:
            how = "terminated" if info["terminated"] else "truncated"
            return Result("host-api", PASS, f"reset(seed={s.seed}), {step + 1} steps to the episode's end ({how})")
    return Result("host-api", FAIL, f"the episode did not end within episode_length={env.episode_length} steps",
                  "set _done_ to 2 (truncated) when the timestep reaches episode_length")


def has_reference(env_class: type) -> bool:
    own = getattr(env_class, "has_reference", None)
    return own() if callable(own) else env_class.reference_step is not Environment.reference_step


def check_consistency(s: Subject) -> Result:
    """The consistency checker -- every array against the NumPy reference after every step and reset -- on the
    native and the GPU-shaped cpu executor."""
    if not has_reference(s.env_class):
        return Result("consistency", SKIP, "no reference_step (optional; the rollout and the sanitizers check the "
                      "kernel without one)")
    reports = [consistency_check(s.env_class, [s.config], num_envs=s.num_envs, num_episodes=1, backend=backend,
                                 seed=s.seed, steps=s.steps)[0] for backend in ("cpu", "cpu-gpu")]
    return Result("consistency", PASS, f"cpu and cpu-gpu: {reports[0].steps} steps x {s.num_envs} envs, "
                  f"{len(reports[0].arrays)} arrays equal to the reference's")


def check_rollout(s: Subject) -> Result:
    """A random rollout with resets on the construction check's wrapper, every array scanned after each step
    and each reset (:func:`warp_drive.env.env_rollout.scan`)."""
    if s.wrapper is None:  # construction was not among the checks run
        check_construction(s)
    found: list[str] = []

    def look(when: str) -> bool:
        problem = scan(s.wrapper)
        found.extend([f"{problem} {when}"] if problem else [])
        return bool(problem)

    ended = random_rollout(s.wrapper, s.steps, s.seed, look)
    if found:
        return Result("rollout", FAIL, found[0], "find the kernel line that writes it (a division by zero, a log "
                      "or sqrt out of its domain, an index past array_ranges(), a mask row left all 0)")
    return Result("rollout", PASS, f"{s.steps} steps x {s.num_envs} envs, {ended} episodes ended: all finite, int "
                  "state in range, every mask row legal")


# --------------------------------------------------------------------------- running and printing
IN_PROCESS = {"construction": check_construction, "gpu-build": check_gpu_build, "host-api": check_host_api,
              "consistency": check_consistency, "rollout": check_rollout}
NEEDS_CONSTRUCTION = ("asan", "race", "consistency", "rollout")
RUNS_KERNEL_HERE = ("host-api", "consistency", "rollout")


def _skip_reason(s: Subject, name: str) -> str | None:
    built = s.results.get("construction")
    if name in NEEDS_CONSTRUCTION and built is not None and built.status != PASS:
        return "construction failed"
    asan = s.results.get("asan")
    if name in RUNS_KERNEL_HERE and asan is not None and asan.status == FAIL:
        return "ASan found a memory error: the kernel is not run in this process"
    return None


def _run_here(s: Subject, name: str) -> None:
    start = time.monotonic()
    try:
        s.results[name] = IN_PROCESS[name](s)
    except Exception as exc:  # noqa: BLE001 - a user's env failing is a result, not a traceback
        s.results[name] = Result(name, FAIL, failure_text(exc))
    s.results[name].seconds = time.monotonic() - start


def run(subjects: Sequence[Subject], checks: Sequence[str] = CHECKS, timeout: float = 600.0,
        report: Callable[[Subject], None] | None = None) -> None:
    """The ``checks`` of every subject, results in ``subject.results``; ``report(subject)`` once a subject is
    done. Order: construction and builds, the sanitizers' children (one per sanitizer for all subjects), then
    this process's own launches."""
    def stage(names: Sequence[str], only: Sequence[Subject] = subjects) -> list[Subject]:
        ready = []
        for s in only:
            for name in (n for n in names if n in checks):
                reason = _skip_reason(s, name)
                if reason:
                    s.results[name] = Result(name, SKIP, reason)
                elif name in IN_PROCESS:
                    _run_here(s, name)
                else:
                    ready.append(s)
        return ready

    stage(("construction", "gpu-build"))
    for kind in ("asan", "race"):
        ready = stage((kind,))
        if ready:
            run_sanitizer(kind, ready, timeout)
    for s in subjects:
        stage(("host-api", "consistency", "rollout"), [s])
        if report is not None:
            report(s)


def table(s: Subject) -> str:
    config = f" {s.config}" if s.config else ""
    lines = [f"{s.name}{config} ({s.num_envs} envs, {s.steps} steps)",
             f"  {'check':<13} {'result':<6} {'time':>6}  detail"]
    lines += [f"  {r.check:<13} {r.status:<6} {r.seconds:>5.1f}s  {r.detail}"
              for r in (s.results[name] for name in CHECKS if name in s.results)]
    return "\n".join(lines)


def first_failure(subjects: Sequence[Subject]) -> str | None:
    """The first failure (subjects in order, checks in table order) as one line naming the check and the fix."""
    for s in subjects:
        for r in (s.results[name] for name in CHECKS if name in s.results):
            if r.status == FAIL:
                fix = f" Fix: {r.fix}." if r.fix and "Fix:" not in r.detail else ""
                return f"{s.name}: check {r.check} failed: {r.detail}{fix}"
    return None


def main(names: Sequence[str], config: dict | None = None, num_envs: int = 3, steps: int | None = None,
         checks: Sequence[str] = CHECKS, seed: int = 0, timeout: float = 600.0) -> int:
    """``warp-drive check``: a table per env on stdout, then the first failure in one line on stderr. Returns
    the exit status: 0 no failure, 1 a check failed, 2 a name that leads to no env class."""
    for variable in ("WARP_DRIVE_CPU_MODE", race.SHUFFLE_VARIABLE):  # each check chooses its executor's mode
        os.environ.pop(variable, None)
    subjects = []
    for name in names:
        try:
            env_class = get_env_class(name)
        except (KeyError, ImportError) as exc:  # the registry's EnvLookupError says how to register one
            print(f"warp-drive check: error: {one_line(exc.args[0] if exc.args else exc)}", file=sys.stderr)
            return 2
        subjects.append(Subject(name, dict(config or {}), num_envs, steps or DEFAULT_STEPS, seed, env_class))
    run(subjects, checks, timeout, report=lambda s: print(table(s), flush=True))
    failure = first_failure(subjects)
    if failure:
        print(f"warp-drive check: {failure}", file=sys.stderr)
        return 1
    return 0
