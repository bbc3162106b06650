"""PettingZoo conformance of PettingZooParallelEnv on every built-in example env (cpu executor):
PettingZoo's own parallel API, seed and state tests, roles that follow reset(seed=), agents that
leave at the step their episode ends, the global state, and the install hint without PettingZoo."""

from __future__ import annotations

import subprocess
import sys
import warnings

import numpy as np
import pytest

pytest.importorskip("pettingzoo")
from gymnasium.utils.env_checker import data_equivalence  # noqa: E402
from pettingzoo.test import parallel_api_test, parallel_seed_test, state_test  # noqa: E402
from pettingzoo.utils.conversions import parallel_to_aec  # noqa: E402

from warp_drive.adapters import PettingZooParallelEnv  # noqa: E402
from warp_drive.env.registry import BUILTIN_ENVS  # noqa: E402

# Small configs: few agents, short episodes. TagContinuous tags from afar so runners do leave.
SMALL = {
    "TagContinuous": {"num_taggers": 2, "num_runners": 3, "episode_length": 30, "grid_length": 5.0,
                      "tagging_distance": 0.2},
    "TagGridWorld": {"num_taggers": 2, "grid_length": 5, "episode_length": 20},
    "DummyEnv": {"num_agents": 3, "episode_length": 20},
    # 4 regions and the planner: the two groups, their spaces and the global state as at 51 regions.
    "PandemicEconomy": {"num_regions": 4, "episode_length": 30},
}
TAG = SMALL["TagContinuous"]


def make(name, seed=None, **config):
    return PettingZooParallelEnv(name, seed=seed, env_config={**SMALL.get(name, {}), **config})


@pytest.fixture
def strict():
    """PettingZoo's tests report some contract breaches (an agent given a reward after it
    left, ...) only as warnings: make them errors. Unbounded Boxes and MultiDiscrete
    actions are merely unusual, not wrong."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        warnings.filterwarnings("ignore", message=".*infinity.*")
        warnings.filterwarnings("ignore", message="Action space for each agent probably")
        yield


# ============================================================================ PettingZoo's own tests
@pytest.mark.parametrize("name", sorted(BUILTIN_ENVS))
def test_pettingzoo_parallel_api_test(name, strict):
    parallel_api_test(make(name, seed=0), num_cycles=40)


@pytest.mark.parametrize("name", sorted(BUILTIN_ENVS))
def test_pettingzoo_parallel_seed_test(name, strict):
    # Each adapter built with its own random seed: reset(seed=42) alone must decide the run.
    parallel_seed_test(lambda: make(name), num_cycles=40)


@pytest.mark.parametrize("name", sorted(BUILTIN_ENVS))
def test_pettingzoo_state_test(name, strict):
    state_test(parallel_to_aec(make(name, seed=1)), make(name, seed=1))


# ============================================================================ seeding covers the roles
def trajectory(env, seed, steps=12):
    """Observations, rewards and flags of a seeded episode under seeded random actions."""
    out = [env.reset(seed=seed)[0], dict(env.agent_index)]
    for i, agent in enumerate(env.possible_agents):
        env.action_space(agent).seed(100 + i)
    for _ in range(steps):
        if not env.agents:
            break
        out.append(env.step({a: env.action_space(a).sample() for a in env.agents}))
        out.append(env.state())
    return out


def test_reset_seed_decides_the_roles_and_the_whole_run():
    roles = {seed: tuple(make("TagContinuous", seed=seed).agent_index.values()) for seed in range(6)}
    assert len(set(roles.values())) > 1, "the seeds should draw different taggers (else this test proves nothing)"

    env = make("TagContinuous", seed=0)
    spaces = {a: (env.observation_space(a), env.action_space(a)) for a in env.possible_agents}
    names = list(env.possible_agents)
    for seed in range(6):
        run = trajectory(env, seed)
        assert env.agent_index == make("TagContinuous", seed=seed).agent_index  # a fresh adapter's roles
        assert data_equivalence(run, trajectory(make("TagContinuous", seed=seed + 50), seed), exact=True)
        # Names and their very space objects stay, whatever the roles.
        assert env.possible_agents == names
        assert all(env.observation_space(a) is s[0] and env.action_space(a) is s[1] for a, s in spaces.items())
        types = env.wrapper.env.agent_types  # 1 = tagger
        assert all(types[env.agent_index[a]] == (1 if a.startswith("tagger") else 0) for a in names)


def test_unseeded_resets_continue_the_seeded_stream_without_rebuilding():
    a, b = make("TagContinuous", seed=1), make("TagContinuous", seed=2)
    a.reset(seed=9)
    b.reset(seed=9)
    wrapper = a.wrapper
    assert data_equivalence([a.reset()[0] for _ in range(3)], [b.reset()[0] for _ in range(3)], exact=True)
    a.reset(seed=9)
    assert a.wrapper is wrapper  # same construction seed: reseeded, not rebuilt


def test_an_env_given_as_an_instance_keeps_its_roles():
    from example_envs.tag_continuous.tag_continuous import TagContinuous

    env = PettingZooParallelEnv(TagContinuous(**TAG, seed=3), seed=0)
    index, wrapper = dict(env.agent_index), env.wrapper
    for seed in range(4):
        env.reset(seed=seed)
        assert env.agent_index == index and env.wrapper is wrapper


def test_a_seed_that_changes_the_agents_is_refused_on_reset():
    from example_envs.dummy_env.dummy_env import DummyEnv

    class SeedSizedEnv(DummyEnv):
        """A (bad) env whose number of agents depends on its construction seed."""

        def __init__(self, seed=None, **config):
            super().__init__(num_agents=2 + (seed or 0) % 2, **config)

    env = PettingZooParallelEnv(SeedSizedEnv, seed=0)
    env.reset(seed=2)  # two agents again: fine
    with pytest.raises(RuntimeError, match="other agent names or spaces.*agent_groups"):
        env.reset(seed=1)


# ============================================================================ agents leave when done
def tag_on_the_spot(num_runners, **config):
    """TagContinuous with no moves (no-op actions, zero start speed) and runner_0 on top of the
    tagger: it is tagged at step 1; the others sit out of reach."""
    from example_envs.tag_continuous.tag_continuous import TagContinuous

    base = dict(num_taggers=1, num_runners=num_runners, episode_length=5, grid_length=10.0, tagging_distance=0.1,
                seed=4, starting_directions=[0.0] * (num_runners + 1), **config)
    probe = TagContinuous(**base)
    x = np.zeros(num_runners + 1)
    y = np.zeros(num_runners + 1)
    x[probe.runner_ids[1:]] = 10.0  # the other runners in the far corner(s)
    y[probe.runner_ids[1:]] = np.linspace(5.0, 10.0, num_runners - 1) if num_runners > 1 else []
    env = PettingZooParallelEnv("TagContinuous", seed=0,
                                env_config=dict(base, starting_location_x=x, starting_location_y=y))
    assert env.agent_index["tagger_0"] == probe.tagger_ids[0] and env.agent_index["runner_0"] == probe.runner_ids[0]
    return env


def noop(env):
    return {a: np.zeros(2, np.int64) for a in env.agents}


def test_a_tagged_runner_leaves_the_agents_at_the_step_it_is_tagged():
    env = tag_on_the_spot(num_runners=2)
    env.reset()
    obs, rew, term, trunc, _ = env.step(noop(env))
    assert set(obs) == set(rew) == set(term) == {"tagger_0", "runner_0", "runner_1"}  # reported once...
    assert term == {"tagger_0": False, "runner_0": True, "runner_1": False} and not any(trunc.values())
    assert rew == {"tagger_0": 1.0, "runner_0": -1.0, "runner_1": 0.0}
    assert env.agents == ["tagger_0", "runner_1"]  # ...then absent
    for step in range(2, 6):
        obs, rew, term, trunc, _ = env.step(noop(env))
        assert set(obs) == set(rew) == set(term) == set(trunc) == {"tagger_0", "runner_1"}
    assert trunc == {"tagger_0": True, "runner_1": True} and not any(term.values())
    assert rew["runner_1"] == 1.0 and env.agents == []  # end-of-game reward of a runner still in
    env.reset()
    assert env.agents == env.possible_agents  # back in the game


def test_the_last_runner_tagged_terminates_everyone():
    env = tag_on_the_spot(num_runners=1)
    env.reset()
    _, _, term, trunc, _ = env.step(noop(env))
    assert term == {"tagger_0": True, "runner_0": True} and not any(trunc.values()) and env.agents == []


def test_runners_stay_when_they_do_not_exit_the_game():
    env = tag_on_the_spot(num_runners=2, runner_exits_game_after_tagged=False)
    env.reset()
    _, rew, term, _, _ = env.step(noop(env))
    assert rew["runner_0"] == -1.0 and not any(term.values())
    assert env.agents == env.possible_agents


def test_parallel_api_test_with_runners_leaving(strict):
    env = make("TagContinuous", seed=5)
    parallel_api_test(env, num_cycles=30)
    left = 0
    for seed in range(3):
        env.reset(seed=seed)
        while env.agents:
            before = set(env.agents)
            _, _, term, trunc, _ = env.step({a: env.action_space(a).sample() for a in env.agents})
            if env.agents:
                left += len(before) - len(env.agents)
                assert set(env.agents) == {a for a in before if not term[a] and not trunc[a]}
    assert left > 0, "some runner should have left mid-episode (else this test proves nothing)"


# ============================================================================ global state
def test_state_is_the_replicas_declared_state_arrays():
    env = PettingZooParallelEnv("DummyEnv", seed=0, env_config={"num_agents": 2, "random_starts": False,
                                                                "step_size": 0.5, "episode_length": 5})
    assert env.state_names == ["values"] and env.state_space.shape == (2,)  # DummyEnv.state_arrays
    env.reset()
    np.testing.assert_array_equal(env.state(), [0.0, 0.0])
    env.step({"agent_0": 2, "agent_1": 0})  # up, down
    state = env.state()
    assert state.dtype == np.float32 and state in env.state_space
    np.testing.assert_array_equal(state, [0.5, -0.5])


def test_tag_continuous_state_holds_positions_and_flags():
    env = tag_on_the_spot(num_runners=2)
    env.reset()
    n = env.wrapper.num_agents
    start = env.state()
    # TagContinuous.state_arrays: 5 numbers per agent
    assert env.state_names == ["loc_x", "loc_y", "speed", "direction", "still_in_the_game"]
    assert env.state_space.shape == start.shape == (5 * n,)
    np.testing.assert_array_equal(start[:n], env.wrapper.env.starting_location_x)
    flags = slice(4 * n, 5 * n)
    np.testing.assert_array_equal(start[flags], np.ones(n))
    env.step(noop(env))
    state = env.state()
    assert state[flags][env.agent_index["runner_0"]] == 0 and state[flags].sum() == n - 1


@pytest.mark.slow
# ============================================================================ without PettingZoo
def test_importing_without_pettingzoo_names_the_extra_to_install():
    code = (
        "import sys\n"
        "sys.modules['pettingzoo'] = None  # as if not installed\n"
        "import warp_drive.adapters  # needs no PettingZoo\n"
        "for attempt in ('import warp_drive.adapters.pettingzoo',\n"
        "                'from warp_drive.adapters import PettingZooParallelEnv'):\n"
        "    try:\n"
        "        exec(attempt)\n"
        "    except ModuleNotFoundError as error:\n"
        "        print(error.name, '|', error)\n"
        "    else:\n"
        "        print('imported')\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.strip().splitlines()
    assert len(lines) == 2
    for line in lines:
        assert line.startswith("pettingzoo |") and "pip install 'warp_drive[pettingzoo]'" in line
