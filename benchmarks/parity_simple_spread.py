"""Parity of ``SimpleSpread`` with JaxMARL's ``MPE_simple_spread_v3``: same start states, same actions.

    python -m benchmarks.parity_simple_spread [--episodes 1000] [--variants discrete,continuous]
        [--agents 3] [--landmarks 3] [--atol 1e-5] [--free-atol X] [--seed 0]

For each action variant, JaxMARL draws ``--episodes`` start states (``reset`` under
``jax.vmap``); they are copied into the device arrays of one ``EnvWrapper`` of as many
replicas on the cpu executor (agent and landmark positions, zero velocities, and the
observations and global state of those positions). Both sides then step through a
whole JaxMARL episode (``max_steps + 1`` = 26 transitions: the env is built with
``jaxmarl_done_step=True``) under the same uniformly random action sequences, JaxMARL
through ``step_env`` (its step without the auto-reset, so the last transition is
compared too). Two comparisons at every transition, of the observations, agent
positions and velocities, rewards, our global ``state`` (against JaxMARL's positions
and velocities) and the done flags:

* **one step** (the check, tolerance ``--atol``): JaxMARL's transition from *our*
  state before the step (our agents' positions, velocities and step counter, its own
  landmarks) against ours. Like the consistency checker, this checks the step
  function itself: float32 rounding cannot accumulate into a false alarm.
* **free running** (reported): JaxMARL's own trajectory from the same start against
  ours. The two float32 computations round differently in the last bit now and then
  (XLA's ``exp``/``log1p`` and summation order are not ours), and the stiff contact
  forces (100 per unit of penetration, over a 0.1 step) amplify such differences
  while agents overlap, so the largest free-running differences grow with the
  number of agents (about 1e-5 for N = 3, 1e-3 for N = 6) -- as large as
  JaxMARL's float32 run differs from its own float64 run. ``--free-atol`` makes them
  a check too.

The done step of every episode must be the same on both sides. Prints the largest
absolute difference per quantity and the episodes over the tolerances; exits 1 on any
mismatch. Without JaxMARL it prints how to install it in a side environment and
exits 0 (skipped); JaxMARL is not a requirement of this project.
"""

from __future__ import annotations

import argparse
import sys
import time

import numpy as np
import torch

INSTALL_HINT = """\
JaxMARL is not importable here: parity check skipped.
To run it, install JaxMARL and this package in a side virtual environment
(not into the project's own; torch's CPU build first, so pip does not pull a CUDA torch):

    python -m venv /tmp/jaxmarl-venv
    /tmp/jaxmarl-venv/bin/pip install torch==2.13.0      # CPU build
    /tmp/jaxmarl-venv/bin/pip install jaxmarl
    /tmp/jaxmarl-venv/bin/pip install -e /work/main       # this repository
    cd /work/main && /tmp/jaxmarl-venv/bin/python -m benchmarks.parity_simple_spread
"""

QUANTITIES = ("observations", "positions", "velocities", "rewards", "state")


def jaxmarl_available() -> bool:
    try:
        import jax  # noqa: F401
        from jaxmarl.environments.mpe.simple_spread import SimpleSpreadMPE  # noqa: F401
    except ImportError:
        return False
    return True


class Tally:
    """Largest differences and the episodes over the tolerance, per quantity, for one comparison mode
    (and, for information, the episodes over a second, stricter tolerance)."""

    def __init__(self, episodes: int, atol: float, strict_atol: float | None = None):
        self.atol, self.strict_atol = atol, atol if strict_atol is None else strict_atol
        self.max_diff = dict.fromkeys(QUANTITIES, 0.0)
        self.over = {q: np.zeros(episodes, bool) for q in QUANTITIES + ("done",)}
        self.over_strict = {q: np.zeros(episodes, bool) for q in QUANTITIES}

    def compare(self, quantity: str, ours: np.ndarray, theirs: np.ndarray) -> None:
        diff = np.abs(ours.astype(np.float64) - np.asarray(theirs, np.float64)).reshape(ours.shape[0], -1)
        diff = np.where(np.isnan(diff), np.inf, diff)
        self.max_diff[quantity] = max(self.max_diff[quantity], float(diff.max()))
        self.over[quantity] |= (diff > self.atol).any(axis=1)
        self.over_strict[quantity] |= (diff > self.strict_atol).any(axis=1)

    def compare_done(self, ours: np.ndarray, theirs: np.ndarray) -> None:
        self.over["done"] |= ours != theirs

    def bad_episodes(self) -> np.ndarray:
        return np.any(list(self.over.values()), axis=0)


def run_variant(continuous: bool, episodes: int, num_agents: int, num_landmarks: int, seed: int,
                atol: float, free_atol: float | None) -> dict:
    """Both envs through one JaxMARL episode of ``episodes`` replicas; returns the tallies."""
    import jax
    import jax.numpy as jnp
    from jaxmarl.environments.mpe.default_params import CONTINUOUS_ACT, DISCRETE_ACT
    from jaxmarl.environments.mpe.simple_spread import SimpleSpreadMPE

    from example_envs.simple_spread import SimpleSpread
    from warp_drive.env.wrapper import EnvWrapper

    n, e = num_agents, episodes
    theirs = SimpleSpreadMPE(num_agents=n, num_landmarks=num_landmarks,
                             action_type=CONTINUOUS_ACT if continuous else DISCRETE_ACT)
    names = theirs.agents
    reset = jax.jit(jax.vmap(theirs.reset))
    step = jax.jit(jax.vmap(theirs.step_env))

    key = jax.random.PRNGKey(seed)
    key, reset_key = jax.random.split(key)
    obs_j, free = reset(jax.random.split(reset_key, e))

    wrapper = EnvWrapper(SimpleSpread, e, backend="cpu", seed=seed, reset_pool_size=16,
                         env_config=dict(num_agents=n, num_landmarks=num_landmarks, continuous_actions=continuous,
                                         episode_length=theirs.max_steps, jaxmarl_done_step=True))
    ours, dm = wrapper.env, wrapper.data_manager
    p_pos = np.asarray(free.p_pos, np.float32)
    for name, value in ours.start_arrays(p_pos[:, :n], p_pos[:, n:]).items():
        dm.data_on_device_via_torch(name).copy_(torch.from_numpy(np.ascontiguousarray(value)))
    for name in ("agent_vel", "_timestep_", "_done_"):
        dm.data_on_device_via_torch(name).zero_()

    free_gate = np.inf if free_atol is None else free_atol
    tallies = {"one_step": Tally(e, atol), "free": Tally(e, free_gate, strict_atol=atol)}
    done_step = {"ours": np.full(e, -1), "theirs": np.full(e, -1)}

    def stacked(per_agent) -> np.ndarray:
        return np.stack([np.asarray(per_agent[a]) for a in names], axis=1)

    def compare_all(tally: Tally, obs, state, reward) -> None:
        pos, vel = np.asarray(state.p_pos), np.asarray(state.p_vel)
        tally.compare("observations", dm.pull_data_from_device("observations"), stacked(obs))
        tally.compare("positions", dm.pull_data_from_device("agent_pos"), pos[:, :n])
        tally.compare("velocities", dm.pull_data_from_device("agent_vel"), vel[:, :n])
        tally.compare("rewards", dm.pull_data_from_device("rewards"), stacked(reward))
        their_state = np.concatenate([np.concatenate([pos[:, :n], vel[:, :n]], axis=2).reshape(e, -1),
                                      pos[:, n:].reshape(e, -1)], axis=1)
        tally.compare("state", dm.pull_data_from_device("state"), their_state)

    for tally in tallies.values():
        tally.compare("observations", dm.pull_data_from_device("observations"), stacked(obs_j))
    rng = np.random.default_rng(seed)
    for t in range(1, wrapper.episode_length + 1):
        if continuous:
            actions = rng.uniform(0.0, 1.0, size=(e, n, 5)).astype(np.float32)
        else:
            actions = rng.integers(0, 5, size=(e, n)).astype(np.int32)
        their_actions = {a: jnp.asarray(actions[:, i]) for i, a in enumerate(names)}
        # JaxMARL's transition from our state (the check of one step) and from its own (free running).
        # Its own landmarks (they never move): ours must match them for the observations to.
        synced = free.replace(
            p_pos=jnp.asarray(np.concatenate([dm.pull_data_from_device("agent_pos"),
                                              np.asarray(free.p_pos)[:, n:]], axis=1)),
            p_vel=jnp.asarray(np.concatenate([dm.pull_data_from_device("agent_vel"),
                                              np.zeros((e, num_landmarks, 2), np.float32)], axis=1)),
            step=jnp.asarray(dm.pull_data_from_device("_timestep_"), free.step.dtype))
        key, step_key = jax.random.split(key)
        step_keys = jax.random.split(step_key, e)
        obs_s, state_s, reward_s, done_s, _ = step(step_keys, synced, their_actions)
        obs_j, free, reward_j, done_j, _ = step(step_keys, free, their_actions)
        wrapper.actions.copy_(torch.from_numpy(actions))
        wrapper.step_all_envs()

        compare_all(tallies["one_step"], obs_s, state_s, reward_s)
        compare_all(tallies["free"], obs_j, free, reward_j)
        done_ours = dm.pull_data_from_device("_done_") != 0
        tallies["one_step"].compare_done(done_ours, np.asarray(done_s["__all__"]).astype(bool))
        done_theirs = np.asarray(done_j["__all__"]).astype(bool)
        tallies["free"].compare_done(done_ours, done_theirs)
        for done, who in ((done_ours, "ours"), (done_theirs, "theirs")):
            done_step[who][done & (done_step[who] < 0)] = t
    for tally in tallies.values():
        tally.over["done"] |= (done_step["ours"] < 0) | (done_step["ours"] != done_step["theirs"])
    return {"tallies": tallies, "done_step": done_step, "transitions": e * wrapper.episode_length}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--episodes", type=int, default=1000, help="episodes (replicas stepped at once) per variant")
    parser.add_argument("--variants", default="discrete,continuous", help="comma-separated: discrete, continuous")
    parser.add_argument("--agents", type=int, default=3)
    parser.add_argument("--landmarks", type=int, default=3)
    parser.add_argument("--atol", type=float, default=1e-5, help="tolerance of each transition (from the same state)")
    parser.add_argument("--free-atol", type=float, default=None,
                        help="also fail when the free-running trajectories differ by more (default: report only)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    variants = [v.strip() for v in args.variants.split(",") if v.strip()]
    unknown = sorted(set(variants) - {"discrete", "continuous"})
    if unknown:
        parser.error(f"unknown variant(s) {unknown}; choose from discrete, continuous")

    if not jaxmarl_available():
        print(INSTALL_HINT)
        return 0
    import jax
    import jaxmarl

    print(f"SimpleSpread (cpu executor) vs JaxMARL {getattr(jaxmarl, '__version__', '?')} MPE_simple_spread_v3 "
          f"(jax {jax.__version__}, {jax.default_backend()}): N={args.agents}, L={args.landmarks}, "
          f"{args.episodes} episodes per variant")
    free_rule = "reported only" if args.free_atol is None else f"tolerance {args.free_atol:g}"
    print(f"one step: JaxMARL stepped from our state before each transition, tolerance {args.atol:g}; "
          f"free running: each side on its own from the same start, {free_rule}")
    failed = False
    for variant in variants:
        began = time.perf_counter()
        result = run_variant(variant == "continuous", args.episodes, args.agents, args.landmarks, args.seed,
                             args.atol, args.free_atol)
        seconds = time.perf_counter() - began
        one, free = result["tallies"]["one_step"], result["tallies"]["free"]
        bad_one, bad_free = int(one.bad_episodes().sum()), int(free.bad_episodes().sum())
        failed |= bad_one > 0 or bad_free > 0
        strict = f"> {args.atol:g}"
        loose = "" if args.free_atol is None else f"> {args.free_atol:g}"
        print(f"\n{variant}: {args.episodes} episodes, {result['transitions']} transitions, {seconds:.1f} s")
        print(f"  {'':<14}{'one step':^30}  {'free running':^30}")
        print(f"  {'quantity':<14}{'max |diff|':>12}{'episodes ' + strict:>18}  {'max |diff|':>12}"
              f"{'episodes ' + strict:>18}{loose:>10}")
        for q in QUANTITIES:
            gate = "" if args.free_atol is None else int(free.over[q].sum())
            print(f"  {q:<14}{one.max_diff[q]:>12.3g}{int(one.over[q].sum()):>18}  {free.max_diff[q]:>12.3g}"
                  f"{int(free.over_strict[q].sum()):>18}{gate:>10}")
        ours, theirs = result["done_step"]["ours"], result["done_step"]["theirs"]
        print(f"  done step: ours {sorted(set(ours.tolist()))}, JaxMARL's {sorted(set(theirs.tolist()))}, "
              f"{int((ours != theirs).sum())} episodes differ")
        print(f"  episodes with a mismatch: {bad_one} (one step and done steps)"
              + ("" if args.free_atol is None else f", {bad_free} (free running)"))
    print("\nparity: " + ("MISMATCH" if failed else "ok"))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
