"""Random rollouts of an env for ``warp-drive check`` (:mod:`warp_drive.env.env_check`): scanned for values no
kernel should write, or run under a sanitizer in a child process.

Why children: race mode (ThreadSanitizer) and ASan need their runtime loaded before Python starts, and ASan
ends the process at its first report. So :func:`run_sanitizer` re-executes this module
(``python -m warp_drive.env.env_rollout --child race|asan SPECS``) with ``LD_PRELOAD`` set to the runtime that
``g++`` ships -- the user sets nothing -- and one child checks every env, printing one JSON line per env. A
child that dies or times out fails the env it was on, with the sanitizer's first report in one line (the
kernel and ``file.cu:line``), and the envs after it go to a fresh child.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import traceback
from dataclasses import asdict, dataclass, field
from typing import Any, Callable, Sequence

import numpy as np
import torch
from gymnasium import spaces

from warp_drive.runtime.backends import race
from warp_drive.env.consistency import host_arrays, random_action_arrays
from warp_drive.env.environment import ACTION_MASK, Environment
from warp_drive.env.registry import get_env_class
from warp_drive.env.wrapper import EnvWrapper

PASS, FAIL, SKIP = "PASS", "FAIL", "SKIP"
DEFAULT_STEPS = 100
RACE_STEPS, RACE_ENVS = 32, 2  # race mode costs ~0.5 ms per CUDA thread and launch: its first steps only
RESULT_TAG = "WD_CHECK_RESULT "
SANITIZER_FIX = {"race": "put a wd_sync_env() between the write and the other thread's read, or make the update "
                         "an atomic (atomicAdd)",
                 "asan": "keep every index inside its array (the bounds of the line named)"}


@dataclass
class Result:
    """One check of one env: PASS, FAIL or SKIP, a one-line detail, the fix of a failure."""

    check: str
    status: str
    detail: str
    fix: str = ""
    seconds: float = 0.0


@dataclass
class Subject:
    """One env under check: its name as given (a registered name or ``package.module:Class``, which a child
    process resolves the same way), its constructor arguments, and the sizes of the runs."""

    name: str
    config: dict = field(default_factory=dict)
    num_envs: int = 3
    steps: int = DEFAULT_STEPS
    seed: int = 0
    env_class: Any = None
    wrapper: EnvWrapper | None = None  # the construction check's, for the rollout
    results: dict[str, Result] = field(default_factory=dict)

    def make_env(self) -> Environment:
        """The construction check's env instance when there is one (some envs calibrate for seconds in their
        constructor), else a new one."""
        return self.wrapper.env if self.wrapper is not None else self.env_class(**self.config)

    def spec(self) -> dict:
        """What a child needs to check it; the class as ``module:Class`` (one registered by ``register_env``
        in this process is not registered in the child), else the name."""
        cls = self.env_class
        name = f"{cls.__module__}:{cls.__qualname__}" if cls is not None and cls.__module__ != "__main__" else self.name
        return dict(name=name, config=self.config, num_envs=self.num_envs, steps=self.steps, seed=self.seed)


def one_line(text: Any, limit: int = 600) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[:limit - 3] + "..."


def failure_text(exc: BaseException) -> str:
    """An exception as one line: the message of the errors that explain themselves (the framework's say what
    and how to fix it); anything else with its type and the line it was raised at (a bug in the env's code)."""
    if isinstance(exc, (ValueError, AssertionError, RuntimeError)) and str(exc):
        return one_line(exc)
    frames = traceback.extract_tb(exc.__traceback__)
    at = f" (at {os.path.basename(frames[-1].filename)}:{frames[-1].lineno}, in {frames[-1].name})" if frames else ""
    return one_line(f"{type(exc).__name__}: {exc}{at}")


# --------------------------------------------------------------------------- rollouts and the scan
def random_rollout(wrapper: EnvWrapper, steps: int, seed: int, look: Callable[[str], bool] | None = None) -> int:
    """``steps`` steps with random legal actions, done envs reset after each; ``look(when)`` after each step and
    each reset stops the rollout by returning True. Returns how many episodes ended."""
    rng, ended = np.random.default_rng(seed), 0
    wrapper.reset_all_envs()
    for step in range(1, steps + 1):
        for name, actions in random_action_arrays(wrapper, rng).items():
            wrapper.data_manager.data_on_device_via_torch(name).copy_(torch.from_numpy(actions))
        wrapper.step_all_envs()
        ended += int((wrapper.done != 0).sum())
        if look is not None and look(f"after step {step}"):
            break
        wrapper.reset_only_done_envs()
        if look is not None and look(f"after the reset that followed step {step}"):
            break
    return ended


def _where(wrapper: EnvWrapper, name: str, shape: tuple, index: tuple) -> str:
    """``env 1, agent 2`` (a group's own array: its row's agent id), then any index left."""
    owned = {g.names[kind]: g.agents for g in wrapper.group_arrays.values() for kind, own in g.owned.items() if own}
    owned.update({g.mask: g.agents for g in wrapper.group_arrays.values() if g.mask})
    parts = []
    if shape and shape[0] == wrapper.num_envs:
        parts.append(f"env {index[0]}")
        index = index[1:]
        if name in owned and len(shape) > 1:
            parts.append(f"agent {owned[name][index[0]]}")
            index = index[1:]
        elif len(shape) > 1 and shape[1] == wrapper.num_agents:
            parts.append(f"agent {index[0]}")
            index = index[1:]
    return ", ".join(parts + ([f"index {index}"] if index else []))


def _mask_problem(wrapper: EnvWrapper, arrays: dict) -> str | None:
    """The first (env, agent, head) of an action mask with no legal action, if any."""
    masks = [(ACTION_MASK, wrapper.agents_on_shared("sampled_actions"), True)] if ACTION_MASK in arrays else []
    masks += [(g.mask, list(g.agents), False) for g in wrapper.group_arrays.values() if g.mask]
    for name, agents, shared in masks:
        for row, agent in enumerate(agents):
            space = wrapper.env.action_space(agent)
            sizes = [int(space.n)] if isinstance(space, spaces.Discrete) else [int(n) for n in space.nvec]
            rows = arrays[name][:, agent if shared else row].reshape(wrapper.num_envs, -1)
            for head, part in enumerate(np.split(rows, np.cumsum(sizes)[:-1], axis=1)):
                empty = np.flatnonzero(~part.any(axis=1))
                if empty.size:
                    return f"{name!r} env {empty[0]}, agent {agent}: no legal action" + (
                        f" in head {head}" if len(sizes) > 1 else "")
    return None


def scan(wrapper: EnvWrapper) -> str | None:
    """The first value no kernel should leave: NaN/inf in a float array, int32 state outside the env's
    ``array_ranges()`` (and ``_done_``, ``_timestep_``), an action-mask row with no legal action; or None."""
    arrays, ranges = host_arrays(wrapper), wrapper.state_ranges()
    for name, value in arrays.items():
        if not isinstance(value, np.ndarray):
            continue
        if np.issubdtype(value.dtype, np.floating):
            bad, what = np.argwhere(~np.isfinite(value)), "not finite"
        elif name in ranges:
            low, high = ranges[name]
            bad, what = np.argwhere((value < low) | (value > high)), f"outside array_ranges() [{low}, {high}]"
        else:
            continue
        if bad.size:
            index = tuple(int(i) for i in bad[0])
            return f"{name!r} {_where(wrapper, name, value.shape, index)} is {value[index].item()!r}: {what}"
    return _mask_problem(wrapper, arrays)


# --------------------------------------------------------------------------- the sanitizers' children
def libasan_path(cxx: str = "g++") -> str | None:
    """The host compiler's AddressSanitizer runtime, or None when it has none."""
    return race.runtime_library_path("libasan.so", cxx)


def sanitizer_environment(kind: str) -> dict | None:
    """The environment of a child that runs the cpu executor under ``kind`` (None: no runtime on this machine).
    Its ``PYTHONPATH`` is this process's ``sys.path``, so it imports a user's env as this process did."""
    base = dict(os.environ, PYTHONPATH=os.pathsep.join(p or os.getcwd() for p in sys.path))
    if kind == "race":
        return race.race_environment(base) if race.libtsan_path() else None
    libasan = libasan_path()
    return dict(base, WARP_DRIVE_CPU_MODE="asan", LD_PRELOAD=libasan, ASAN_OPTIONS="detect_leaks=0") if libasan \
        else None


def first_report_line(stderr: str) -> str:
    """ASan's report in one line (its kind, the access, the innermost frame in a ``.cu``, the region), or the
    child's last line of stderr."""
    lines = stderr.splitlines()
    for i, line in enumerate(lines):
        if "ERROR: AddressSanitizer:" not in line:
            continue
        kind = line.split("AddressSanitizer:", 1)[1].split(" on ")[0].strip()
        access = next((x.split(" at 0x")[0].strip() for x in lines[i + 1:i + 3] if " of size " in x), "")
        frame = next((x.split(" in ", 1)[1] for x in lines[i + 1:] if x.strip().startswith("#") and ".cu:" in x), "")
        region = next((x.split("is located", 1)[1].split("[")[0].strip() for x in lines[i:] if "is located" in x), "")
        function, _, where = frame.rpartition(" ")
        parts = [f"AddressSanitizer: {kind}:", access, f"in {function} at {os.path.basename(where)}" if frame else "",
                 f"({region})" if region else ""]
        return one_line(" ".join(p for p in parts if p))
    tail = [x for x in lines if x.strip()]
    return one_line(tail[-1] if tail else "no message")


def run_sanitizer(kind: str, subjects: Sequence[Subject], timeout: float) -> None:
    """The ``kind`` check ("race" or "asan") of every subject, in as few child processes as crashes allow."""
    env = sanitizer_environment(kind)
    if env is None:
        what = "libtsan (Debian: apt install libtsan2)" if kind == "race" else "libasan (Debian: apt install libasan8)"
        for s in subjects:
            s.results[kind] = Result(kind, SKIP, f"g++ has no {what}")
        return
    pending = list(subjects)
    while pending:
        command = [sys.executable, "-m", "warp_drive.env.env_rollout", "--child", kind,
                   json.dumps([s.spec() for s in pending])]
        start = time.monotonic()
        try:
            proc = subprocess.run(command, env=env, capture_output=True, text=True, timeout=timeout)
            out, err, ended = proc.stdout, proc.stderr, f"exited {proc.returncode}"
        except subprocess.TimeoutExpired as exc:
            out, err = (x.decode(errors="replace") if isinstance(x, bytes) else x or ""
                        for x in (exc.stdout, exc.stderr))
            ended = f"timed out after {timeout:g} s (--timeout)"
        done = [json.loads(line[len(RESULT_TAG):]) for line in out.splitlines() if line.startswith(RESULT_TAG)]
        for s, found in zip(pending, done):
            s.results[kind] = Result(**found)
        if len(done) == len(pending):
            return
        detail = f"{first_report_line(err)} (the {kind} child {ended})"  # it died, or hung, on this subject
        pending[len(done)].results[kind] = Result(kind, FAIL, detail, SANITIZER_FIX[kind], time.monotonic() - start)
        pending = pending[len(done) + 1:]


def _child_wrapper(kind: str, spec: dict) -> tuple[Subject, EnvWrapper]:
    """A subject's wrapper on the executor of ``kind``: GPU-shaped in race mode (every agent a CUDA thread of
    its own, which the shuffle orders), at race mode's small sizes."""
    s = Subject(**spec, env_class=get_env_class(spec["name"]))
    if kind == "race":
        s.steps, s.num_envs = min(s.steps, RACE_STEPS), min(s.num_envs, RACE_ENVS)
    backend = "cpu-gpu" if kind == "race" else "cpu"
    return s, EnvWrapper(s.env_class, s.num_envs, backend=backend, seed=s.seed, env_config=s.config)


def child_check(kind: str, s: Subject, wrapper: EnvWrapper) -> Result:
    """In a sanitizer's child: a random rollout with resets (ASan ends the process at a memory error)."""
    try:
        ended = random_rollout(wrapper, s.steps, s.seed)
    except race.KernelRaceError as exc:
        return Result(kind, FAIL, one_line(exc), SANITIZER_FIX[kind])
    tool = "ThreadSanitizer, threads shuffled" if kind == "race" else "AddressSanitizer"
    return Result(kind, PASS, f"{s.steps} steps x {s.num_envs} envs on {wrapper.backend.name} under {tool}, "
                  f"{ended} episodes ended")


def _child_main(kind: str, specs: str) -> int:
    """Every env's wrapper first, then each env's rollout, one result line each in order. All kernels are
    loaded before the first launch because gcc 12's TSan names no source line in a library loaded after its
    first report."""
    torch.set_num_threads(1)
    prepared: list = []
    for spec in json.loads(specs):
        start = time.monotonic()
        try:
            prepared.append((*_child_wrapper(kind, spec), time.monotonic() - start))
        except Exception as exc:  # noqa: BLE001 - reported to the parent as this env's failure
            prepared.append((None, Result(kind, FAIL, failure_text(exc)), time.monotonic() - start))
    for s, wrapper, built in prepared:
        start = time.monotonic()
        try:
            result = wrapper if s is None else child_check(kind, s, wrapper)
        except Exception as exc:  # noqa: BLE001 - a launch that failed otherwise (a fault, a bad argument)
            result = Result(kind, FAIL, failure_text(exc))
        result.seconds = built + time.monotonic() - start
        print(RESULT_TAG + json.dumps(asdict(result)), flush=True)
    return 0


if __name__ == "__main__":
    if len(sys.argv) != 4 or sys.argv[1] != "--child" or sys.argv[2] not in SANITIZER_FIX:
        sys.exit("usage: python -m warp_drive.env.env_rollout --child race|asan SPECS_JSON (warp-drive check runs it)")
    sys.exit(_child_main(sys.argv[2], sys.argv[3]))
