"""What tests/runtime/test_race_mode.py runs in a process started for race mode
(``warp_drive.runtime.backends.race.race_environment()``: libtsan preloaded). Prints
one JSON line: what each launch or check did, errors as their messages, so the
test sees every result, not only the first failure.

    python tests/runtime/race_child.py [planted] [envs] [framework]   # all three by default
"""

from __future__ import annotations

import dataclasses
import json
import sys
from pathlib import Path

import torch

from warp_drive.runtime.backends.cpu import CpuBackend, GpuShapedCpuBackend
from warp_drive.runtime.backends.race import KernelRaceError

PLANTED = Path(__file__).resolve().parent.parent / "kernels" / "race_planted.cu"


class ThreadCapped(GpuShapedCpuBackend):
    """The GPU shape with an env step kernel's block capped at ``cap`` threads, as a
    register-hungry kernel is on a GPU: each thread then steps several agents."""

    def __init__(self, cap: int):
        super().__init__()
        self.cap = cap

    def kernel_resources(self, module):
        own = super().kernel_resources(module)
        if not any("example_envs" in str(source) for source in module.sources):
            return own  # the framework's kernels keep their own limits
        return {name: dataclasses.replace(r, max_threads_per_block=min(r.max_threads_per_block, self.cap))
                for name, r in own.items()}


def _outcome(run) -> dict:
    try:
        return {"error": None, "result": run()}
    except KernelRaceError as exc:
        return {"error": str(exc), "race": True, "result": None}
    except Exception as exc:  # noqa: BLE001 - reported to the parent, which fails on it
        return {"error": f"{type(exc).__name__}: {exc}", "race": False, "result": None}


def planted() -> dict:
    backend = GpuShapedCpuBackend()
    out = {}
    for fixed in (0, 1):
        module = backend.build([PLANTED], defines={"FIXED": str(fixed)})
        ints = torch.arange(4 * 8, dtype=torch.int32) * 3 + 1
        wide = torch.arange(2 * 64, dtype=torch.int32)

        def launch(name, args, grid, block, result):
            def run():
                module._kernel(name).bind(*args).launch(grid, block)
                return result.tolist()
            return _outcome(run)

        neighbours = torch.zeros_like(ints)
        totals = torch.zeros(4, dtype=torch.int32)
        sums = torch.zeros(2, dtype=torch.int32)
        counter = torch.zeros(1, dtype=torch.int32)
        out[f"neighbour_sum/{fixed}"] = launch("neighbour_sum", (ints, neighbours), 4, 8, neighbours)
        out[f"block_total/{fixed}"] = launch("block_total", (ints, totals), 4, 8, totals)
        out[f"warp_reduce/{fixed}"] = launch("warp_reduce", (wide, sums), 2, 64, sums)
        out[f"count_blocks/{fixed}"] = launch("count_blocks", (counter,), 6, 2, counter)
    return out


# Small configs of every example env; AGENT_PHASES envs run at three thread counts
# (one per agent, and fewer threads than agents), the others as they launch.
ENVS = {
    "TagContinuous": ("TagContinuous", dict(num_taggers=2, num_runners=5, episode_length=6, use_full_observation=False,
                                            num_other_agents_observed=3, tagging_distance=0.3, seed=2)),
    "TagContinuousFull": ("TagContinuous", dict(num_taggers=2, num_runners=4, episode_length=5, tagging_distance=0.3,
                                                seed=1)),
    "TagGridWorld": ("TagGridWorld", dict(num_taggers=3, grid_length=4, episode_length=6, random_starts=True,
                                          use_full_observation=False)),
    "SimpleSpread": ("SimpleSpread", dict(num_agents=5, num_landmarks=3, episode_length=6)),
    "SimpleSpreadContinuous": ("SimpleSpread", dict(num_agents=4, num_landmarks=3, episode_length=6,
                                                    continuous_actions=True)),
    "PandemicEconomy": ("PandemicEconomy", {"num_regions": 5, "episode_length": 6, "filter_memory": 5,
                                            "num_filters": 3, "delay": 2, "cooldown": 2, "subsidy_period": 3,
                                            "vaccination_start": 2, "vaccination_rate": 0.02, "seed": 3}),
}
CAPS = (64, 3, 2)


def envs() -> dict:
    from warp_drive.env.consistency import check
    from warp_drive.env.registry import get_env_class

    out = {}
    capped = {cap: ThreadCapped(cap) for cap in CAPS}  # one backend each: modules are built once per backend
    native, shaped = CpuBackend(), GpuShapedCpuBackend()
    for label, (name, config) in ENVS.items():
        env_class = get_env_class(name)
        for cap in CAPS:
            out[f"{label}/threads<={cap}"] = _outcome(
                lambda: check(env_class, [config], num_envs=2, num_episodes=1, backend=capped[cap], seed=1)[0].steps)
    # Natively (one host thread loops over an env's agents): the phase kernels' serial path, once.
    out["TagContinuous/native"] = _outcome(lambda: check(
        get_env_class("TagContinuous"), [ENVS["TagContinuous"][1]], num_envs=2, num_episodes=1, backend=native,
        seed=1)[0].steps)
    for agents in (1, 3, 7):  # thread per agent: the agent count is the thread count
        out[f"DummyEnv/agents={agents}"] = _outcome(lambda: check(
            get_env_class("DummyEnv"), [dict(num_agents=agents, episode_length=5)], num_envs=3, num_episodes=1,
            backend=shaped, seed=1)[0].steps)
    for name in ("CartPole", "Acrobot", "MountainCar", "ContinuousMountainCar", "Pendulum"):
        out[name] = _outcome(lambda: check(get_env_class(name), [dict(episode_length=5)], num_envs=3,
                                           num_episodes=1, backend=shaped, seed=1)[0].steps)
    return out


def framework() -> dict:
    """The framework's kernels as the demo (categorical sampling, resets, done
    flags, the episode log) and DDPG's rollout (Ornstein-Uhlenbeck sampling) run
    them, and its test probes (Philox, math, RNG)."""
    import warp_drive.env.demo as demo
    from warp_drive.runtime.function_manager import FunctionManager
    from warp_drive.training.config import load_config
    from warp_drive.training.run import build

    def probes():
        fm = FunctionManager(1, 1, backend=GpuShapedCpuBackend())
        n = 37
        fm.launch_flat("wd_philox_kat", [torch.arange(6 * n, dtype=torch.int32).view(torch.uint32),
                                         torch.zeros((n, 4), dtype=torch.int32).view(torch.uint32), n], n)
        fm.launch_flat("wd_math_probe", [torch.linspace(-3, 3, n), torch.zeros((n, 6)), n], n, 16)
        fm.launch_flat("wd_rng_probe", [torch.zeros((n, 3)), n, 7, 0, 1], n)
        return n

    def ddpg():
        trainer = build(load_config("pendulum_ddpg", [
            "trainer.backend=cpu-gpu", "trainer.num_envs=3", "trainer.rollout_length=4", "trainer.total_steps=48",
            "env.config.episode_length=6", "policy.shared.warmup_steps=0"]))
        for _ in range(3):
            trainer.collect_rollout()
        return 3

    def device_resets():  # an env's own reset kernel, and the forced reset that marks every env for it
        sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "services"))
        from random_start_env import RandomStart
        from warp_drive.env.wrapper import EnvWrapper

        wrapper = EnvWrapper(RandomStart, 3, backend=GpuShapedCpuBackend(), seed=0)
        for _ in range(6):
            wrapper.step_all_envs()
            wrapper.reset_only_done_envs()
        wrapper.reset_all_envs()
        return 6

    return {"demo": _outcome(lambda: demo.run(num_envs=3, num_agents=5, steps=60, backend=GpuShapedCpuBackend(),
                                              seed=0)["episodes"]),
            "probes": _outcome(probes), "ddpg_pendulum": _outcome(ddpg), "device_resets": _outcome(device_resets)}


_UNRECORDED_LAUNCH = CpuBackend._launch


def record_launches(launched: set) -> None:
    """Note the name of every kernel the cpu executor launches from now on (the test checks that all of them ran)."""
    original = _UNRECORDED_LAUNCH

    def launch(self, kernel, argv_address, geometry):
        launched.add(kernel.name)
        return original(self, kernel, argv_address, geometry)

    CpuBackend._launch = launch


if __name__ == "__main__":
    torch.set_num_threads(1)
    parts = {"planted": planted, "envs": envs, "framework": framework}
    results = {}
    for part in sys.argv[1:] or parts:
        launched: set = set()
        record_launches(launched)
        results[part] = parts[part]()
        results[part]["launched"] = sorted(launched)
    print(json.dumps(results))
