"""Environment throughput: kernel vs the NumPy reference (issue: environments).

    python -m benchmarks.envs [--quick] [--backends cpu,pycuda] [--out DIR]

For each workload, env steps per second (one step of one replica with all its
agents; agent steps/s beside it) of:
* the kernel through ``EnvWrapper`` (step + on-device reset of done envs), per executor;
* the env's NumPy reference stepped one replica at a time, as a user of a CPU
  simulator would; and vectorised over all replicas where the reference is.
Writes ``envs.csv`` into ``benchmarks/results/`` (or ``--out``).
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import torch
from gymnasium import spaces

from benchmarks.common import (
    backend_names,
    machine_description,
    print_table,
    results_dir_set_to,
    time_per_call,
    write_csv,
)
from warp_drive.runtime.backends import get_backend
from warp_drive.env.consistency import host_arrays, random_action_arrays
from warp_drive.env.wrapper import EnvWrapper
from warp_drive.services.sampler import Sampler
from warp_drive.training.run import limit_torch_threads

# (label, env name, config, num_envs, targets on the 2-core machine: (env steps/s or None, x the reference
# one replica at a time or None[, x the vectorised reference]))
WORKLOADS = [
    ("TagContinuous partial obs K=4, 2000 envs x 5 agents", "TagContinuous",
     {"num_taggers": 1, "num_runners": 4, "use_full_observation": False, "num_other_agents_observed": 4},
     2000, (500_000, 200)),
    ("TagContinuous partial obs K=10, 100 envs x 1000 agents", "TagContinuous",
     {"num_taggers": 50, "num_runners": 950, "use_full_observation": False, "num_other_agents_observed": 10},
     100, (50, 100)),
    ("TagGridWorld partial obs, 2000 envs x 5 agents", "TagGridWorld",
     {"num_taggers": 4, "use_full_observation": False}, 2000, None),
    ("CartPole, 100,000 envs", "CartPole", {}, 100_000, (20_000_000, None)),
] + [
    # The paper's third workload: the dense unemployment filter (5 x 600 taps per region) is the default and
    # most of a step's cost. The paper's own figure ("24x total at 60 envs, A100 vs a 16-vCPU CPU
    # implementation") compares other machines and code: the README gives it as context only.
    (f"PandemicEconomy 51 regions + planner, dense filter, {n} envs", "PandemicEconomy", {}, n,
     (None, 80, 15) if n == 60 else None)
    for n in (1, 10, 60, 100, 1000)
]
QUICK_ENVS = {2000: 500, 100: 20, 100_000: 20_000}


ACTION_SETS = 8


def kernel_rate(wrapper: EnvWrapper, seconds: float) -> float:
    """Env steps/s of the kernel: new actions, step every env, reset the done ones on the device.

    Actions change every step, as under a policy: the step cycles through
    ``ACTION_SETS`` random action arrays already on the device, and the copy
    into ``wrapper.actions`` is timed with it. (One fixed action array would
    make every agent repeat its move, which in Tag drives them in circles and
    into the walls: an unrepresentative state for envs whose cost depends on
    where the agents are.)
    """
    rng = np.random.default_rng(0)
    dm = wrapper.data_manager
    # Every action array the kernel reads (the shared one and groups' own), as (device array, its sets).
    drawn = [random_action_arrays(wrapper, rng) for _ in range(ACTION_SETS)]
    targets = [(dm.data_on_device_via_torch(name), [torch.from_numpy(d[name]).to(dm.device)
                                                    for d in drawn]) for name in drawn[0]]
    calls = 0

    def step():
        nonlocal calls
        for array, sets in targets:
            array.copy_(sets[calls % ACTION_SETS])
        calls += 1
        wrapper.step_all_envs()
        wrapper.reset_only_done_envs()

    return wrapper.num_envs / time_per_call(step, seconds, wrapper.backend.synchronize)


def rollout_rate(wrapper: EnvWrapper, seconds: float) -> float:
    """Env steps/s of a rollout step as training takes it, without the model:
    the sampler kernel draws every agent's action on the device (from uniform
    probabilities, one Discrete head), one launch steps every env, and the
    done ones are reset on the device. Needs an env with Discrete actions.
    """
    space = wrapper.env.action_space(0)
    if not isinstance(space, spaces.Discrete):
        raise ValueError(f"{wrapper.name}: a sampled rollout needs Discrete actions, not {space}")
    sampler = Sampler(wrapper.function_manager, seed=0)
    sampler.register_actions(wrapper.data_manager, "sampled_actions", int(space.n))
    probs = torch.full((wrapper.num_envs, wrapper.num_agents, int(space.n)), 1.0 / int(space.n),
                       device=wrapper.actions.device)

    def step():
        sampler.sample(wrapper.data_manager, probs, "sampled_actions")
        wrapper.step_all_envs()
        wrapper.reset_only_done_envs()

    return wrapper.num_envs / time_per_call(step, seconds, wrapper.backend.synchronize)


def reference_rates(wrapper: EnvWrapper, seconds: float, replicas: int = 8,
                    max_call_seconds: float = 5.0) -> tuple[float, float | None]:
    """(one replica at a time, vectorised over replicas) env steps/s of the NumPy reference.

    One-by-one steps ``replicas`` replicas per timed call, so its cost does not
    grow with the env count. The vectorised step over every replica is timed
    once first; when that one call took longer than ``max_call_seconds`` it
    is the measurement (repeating so slow a reference would dominate the run).
    """
    arrays = host_arrays(wrapper)
    env = wrapper.env
    singles = [{k: (v[e:e + 1] if isinstance(v, np.ndarray) and v.shape[:1] == (wrapper.num_envs,) else v)
                for k, v in arrays.items()} for e in range(min(replicas, wrapper.num_envs))]

    def one_at_a_time():
        for single in singles:
            env.run_reference_step(single)
            single["_timestep_"][...] = 0
            single["_done_"][...] = 0

    single_rate = len(singles) / time_per_call(one_at_a_time, seconds)

    def vectorised():
        env.run_reference_step(arrays)
        arrays["_timestep_"][...] = 0
        arrays["_done_"][...] = 0

    try:
        started = time.perf_counter()
        vectorised()
        first_call = time.perf_counter() - started
    except Exception:  # a reference that only handles one replica
        return single_rate, None
    if first_call > max_call_seconds:
        return single_rate, wrapper.num_envs / first_call
    return single_rate, wrapper.num_envs / time_per_call(vectorised, seconds)


def measure_workload(label: str, env_name: str, config: dict, num_envs: int, backends: list[str],
                     seconds: float, extra: dict | None = None, sampled: bool = False) -> list[dict]:
    """One row per executor: the kernel's env steps/s beside the NumPy reference's.

    The reference runs once per workload (on the first executor's arrays); its
    rate does not depend on the executor. ``extra`` columns (targets, the
    paper's figure) go before the wall time. ``sampled``: the timed step draws
    the actions with the sampler kernel (:func:`rollout_rate`) instead of
    copying prepared ones (:func:`kernel_rate`).
    """
    rows, reference = [], None
    for backend in backends:
        # As in training: on the cpu executor torch gets one thread, or its
        # idle intra-op threads spin against the kernels' worker pool (the
        # per-step action copy alone cost CartPole a third of its rate).
        limit_torch_threads(get_backend(backend).name)
        started = time.perf_counter()
        wrapper = EnvWrapper(env_name, num_envs, backend=backend, seed=0, env_config=config)
        rate = rollout_rate(wrapper, seconds) if sampled else kernel_rate(wrapper, seconds)
        if reference is None:
            reference = reference_rates(wrapper, seconds)
        single, vector = reference
        rows.append({
            "workload": label,
            "backend": get_backend(backend).name,
            "envs": num_envs,
            "agents": wrapper.num_agents,
            "env steps/s": rate,
            "agent steps/s": rate * wrapper.num_agents,
            "numpy 1-by-1 steps/s": single,
            "numpy vectorised steps/s": vector if vector is not None else "n/a",
            "x numpy 1-by-1": rate / single,
            "x numpy vectorised": rate / vector if vector is not None else "n/a",
            **(extra or {}),
            "wall s": time.perf_counter() - started,
        })
        del wrapper  # free a large workload's arrays before the next executor builds its own
    return rows


def main(argv=None) -> list[dict]:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--backends", default=None, help="comma-separated; default: cpu, plus pycuda with a GPU")
    parser.add_argument("--only", default=None, help="run workloads whose label contains this text")
    parser.add_argument("--out", default=None, help="folder for the CSV (default: benchmarks/results/)")
    args = parser.parse_args(argv)
    names = backend_names(args.backends)
    seconds = 0.3 if args.quick else 1.5
    rows = []
    for label, env_name, config, num_envs, targets in WORKLOADS:
        if args.only and args.only not in label:
            continue
        if args.quick and num_envs in QUICK_ENVS:
            num_envs = QUICK_ENVS[num_envs]
            label = f"{label} (quick: {num_envs} envs)"
        target = "" if targets is None else ", ".join(part for part in (
            f">= {targets[0]:,}" if targets[0] else "", f">= {targets[1]}x 1-by-1" if targets[1] else "",
            f">= {targets[2]}x vectorised" if len(targets) > 2 else "") if part)
        rows += measure_workload(label, env_name, config, num_envs, names, seconds, {"target": target})
    print_table(f"Environment throughput on {machine_description()}", rows)
    with results_dir_set_to(args.out):
        print(f"\nwrote {write_csv('envs', rows)}")
    return rows


if __name__ == "__main__":
    main()
