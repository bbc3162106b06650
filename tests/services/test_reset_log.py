"""``EnvironmentReset`` (reset twins and reset pools) and ``LogController``.

Every behavioural test runs on each executor (``backend_name``).
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from warp_drive.runtime.data_feed import DataFeed
from warp_drive.runtime.data_manager import DataManager
from warp_drive.runtime.function_manager import FunctionManager
from warp_drive.services.log import LogController
from warp_drive.services.reset import EnvironmentReset

P_MIN = 1e-6


def chi2_sf(statistic: float, dof: int) -> float:
    return float(torch.special.gammaincc(torch.tensor(dof / 2, dtype=torch.float64),
                                         torch.tensor(statistic / 2, dtype=torch.float64)))


def managers(backend_name, num_envs, num_agents, episode_length=10):
    dm = DataManager(num_envs, num_agents, episode_length, backend=backend_name)
    fm = FunctionManager(num_envs, num_agents, backend=backend_name)
    return dm, fm


def host(dm, name) -> np.ndarray:
    return dm.pull_data_from_device(name)


# --------------------------------------------------------------------------- reset twins

E, N, F = 7, 3, 2


def _reset_arrays(rng) -> dict[str, np.ndarray]:
    """1-D, 2-D and 3-D arrays in float32 and int32 (one wide enough that a
    block strides over it), all distinct per env."""
    return {
        "f1": rng.normal(size=(E,)).astype(np.float32),
        "i1": rng.integers(-100, 100, size=(E,)).astype(np.int32),
        "f2": rng.normal(size=(E, N)).astype(np.float32),
        "i2": rng.integers(-100, 100, size=(E, N)).astype(np.int32),
        "f3": rng.normal(size=(E, N, F)).astype(np.float32),
        "i3": rng.integers(-100, 100, size=(E, N, F)).astype(np.int32),
        "wide": rng.normal(size=(E, N, 300)).astype(np.float32),  # 900 words per env
        "zeros": np.zeros((E, N), np.float32),
    }


def _push_for_reset(dm, arrays):
    names = list(arrays)
    for torch_accessible, part in ((True, names[::2]), (False, names[1::2])):
        feed = DataFeed()
        for name in part:
            feed.add_data(name, arrays[name], save_copy_and_apply_at_reset=True)
        dm.push_data_to_device(feed, torch_accessible=torch_accessible)


def _scramble(dm, names, rng):
    """Change every element of every array through torch (in place)."""
    for name in names:
        tensor = dm.data_on_device_via_torch(name)
        noise = torch.from_numpy(rng.integers(1, 50, size=tuple(tensor.shape))).to(tensor.dtype).to(tensor.device)
        tensor.add_(noise)


def test_reset_when_done_restores_exactly_the_done_envs(backend_name):
    rng = np.random.default_rng(0)
    arrays = _reset_arrays(rng)
    dm, fm = managers(backend_name, E, N)
    _push_for_reset(dm, arrays)
    resetter = EnvironmentReset(fm, seed=1)
    for cycle in range(3):  # the cached launch table stays valid across resets
        _scramble(dm, arrays, rng)
        before = {name: host(dm, name) for name in arrays}
        done_envs = [[0, 2, 6], [1], [3, 4, 5]][cycle]
        done = dm.data_on_device_via_torch("_done_")
        done[done_envs] = torch.tensor([1, 2, 1][: len(done_envs)], dtype=torch.int32, device=dm.device)
        timestep = dm.data_on_device_via_torch("_timestep_")
        timestep.copy_(torch.arange(10, 10 + E, dtype=torch.int32))
        resetter.reset_when_done(dm)
        for name, initial in arrays.items():
            after = host(dm, name)
            for e in range(E):
                want = initial[e] if e in done_envs else before[name][e]
                np.testing.assert_array_equal(after[e], want, err_msg=f"cycle {cycle}, {name}, env {e}")
        assert host(dm, "_done_").tolist() == [0] * E
        assert host(dm, "_timestep_").tolist() == [0 if e in done_envs else 10 + e for e in range(E)]
        # The twins themselves are untouched.
        for name, initial in arrays.items():
            np.testing.assert_array_equal(host(dm, name + "_at_reset"), initial)


def test_reset_tracks_arrays_pushed_later(backend_name):
    dm, fm = managers(backend_name, E, N)
    rng = np.random.default_rng(3)
    first = {"a": rng.normal(size=(E, N)).astype(np.float32)}
    _push_for_reset(dm, first)
    resetter = EnvironmentReset(fm, seed=0)
    resetter.reset_when_done(dm, mode="force_reset")
    later = {"b": rng.integers(0, 9, size=(E, N, 4)).astype(np.int32)}
    _push_for_reset(dm, later)
    _scramble(dm, ["a", "b"], rng)
    resetter.reset_when_done(dm, mode="force_reset")
    np.testing.assert_array_equal(host(dm, "a"), first["a"])
    np.testing.assert_array_equal(host(dm, "b"), later["b"])


def test_force_reset_restores_every_env(backend_name):
    rng = np.random.default_rng(1)
    arrays = _reset_arrays(rng)
    dm, fm = managers(backend_name, E, N)
    _push_for_reset(dm, arrays)
    feed = DataFeed()
    feed.add_data("no_twin", np.ones((E, N), np.float32))
    dm.push_data_to_device(feed)
    _scramble(dm, [*arrays, "no_twin"], rng)
    no_twin = host(dm, "no_twin")
    dm.data_on_device_via_torch("_done_")[2] = 1
    dm.data_on_device_via_torch("_timestep_").fill_(5)
    EnvironmentReset(fm, seed=0).reset_when_done(dm, mode="force_reset")
    for name, initial in arrays.items():
        np.testing.assert_array_equal(host(dm, name), initial, err_msg=name)
    np.testing.assert_array_equal(host(dm, "no_twin"), no_twin)  # arrays without a twin are left alone
    assert host(dm, "_done_").tolist() == [0] * E
    assert host(dm, "_timestep_").tolist() == [0] * E


def test_reset_keeps_done_flags_when_asked(backend_name):
    dm, fm = managers(backend_name, E, N)
    initial = np.arange(E * N, dtype=np.int32).reshape(E, N)
    _push_for_reset(dm, {"x": initial})
    dm.data_on_device_via_torch("x").fill_(-1)
    dm.data_on_device_via_torch("_done_")[[1, 4]] = 1
    dm.data_on_device_via_torch("_timestep_").fill_(3)
    EnvironmentReset(fm, seed=0).reset_when_done(dm, undo_done_after_reset=False)
    x = host(dm, "x")
    np.testing.assert_array_equal(x[[1, 4]], initial[[1, 4]])
    assert np.all(np.delete(x, [1, 4], axis=0) == -1)
    assert host(dm, "_done_").tolist() == [1 if e in (1, 4) else 0 for e in range(E)]
    assert host(dm, "_timestep_").tolist() == [3] * E


def test_reset_unknown_mode_raises(backend_name):
    dm, fm = managers(backend_name, E, N)
    _push_for_reset(dm, {"x": np.ones((E, N), np.float32)})
    dm.data_on_device_via_torch("x").fill_(7)
    dm.data_on_device_via_torch("_done_").fill_(1)
    with pytest.raises(ValueError, match="reset mode"):
        EnvironmentReset(fm).reset_when_done(dm, mode="if_dne")
    assert np.all(host(dm, "x") == 7) and np.all(host(dm, "_done_") == 1)  # nothing happened


def test_reset_with_nothing_registered_clears_flags(backend_name):
    dm, fm = managers(backend_name, E, N)
    dm.data_on_device_via_torch("_done_")[3] = 1
    dm.data_on_device_via_torch("_timestep_").fill_(4)
    EnvironmentReset(fm).reset_when_done(dm)
    assert host(dm, "_done_").tolist() == [0] * E
    assert host(dm, "_timestep_").tolist() == [0 if e == 3 else 4 for e in range(E)]


# --------------------------------------------------------------------------- reset pools

PE, PN, PF, P = 40, 3, 2, 7


def _pool_setup(backend_name, seed, pool_size=P, second_pool_size=P):
    """Targets ``state`` (E, N, F) float32 and ``ids`` (E, N) int32, each with a
    pool whose rows are recognisable: row p holds p*1000 + agent*10 + feature."""
    dm, fm = managers(backend_name, PE, PN)
    pool = (np.arange(pool_size)[:, None, None] * 1000 + np.arange(PN)[None, :, None] * 10
            + np.arange(PF)[None, None, :]).astype(np.float32)
    ids_pool = (np.arange(second_pool_size)[:, None] * 1000 + np.arange(PN)[None, :] * 10).astype(np.int32)
    feed = DataFeed()
    feed.add_data("state", np.full((PE, PN, PF), -1, np.float32))
    feed.add_data("ids", np.full((PE, PN), -1, np.int32))
    feed.add_data("other", np.full((PE, PN), -5, np.float32), save_copy_and_apply_at_reset=True)
    feed.add_pool_for_reset("state_pool", pool, reset_target="state")
    feed.add_pool_for_reset("ids_pool", ids_pool, reset_target="ids")
    dm.push_data_to_device(feed)
    return dm, fm, EnvironmentReset(fm, seed=seed), pool, ids_pool


def _rows_of(dm, pool, ids_pool) -> tuple[np.ndarray, np.ndarray]:
    """The pool row each env holds (checking it holds exactly one whole row), or -1."""
    state, ids = host(dm, "state"), host(dm, "ids")
    rows, id_rows = np.full(PE, -1), np.full(PE, -1)
    for e in range(PE):
        if state[e, 0, 0] >= 0:
            r = int(state[e, 0, 0]) // 1000
            np.testing.assert_array_equal(state[e], pool[r], err_msg=f"env {e}: not one pool row for all agents")
            rows[e] = r
        if ids[e, 0] >= 0:
            r = int(ids[e, 0]) // 1000
            np.testing.assert_array_equal(ids[e], ids_pool[r], err_msg=f"env {e}: not one ids_pool row")
            id_rows[e] = r
    return rows, id_rows


def test_pool_reset_copies_one_row_per_done_env(backend_name):
    dm, fm, resetter, pool, ids_pool = _pool_setup(backend_name, seed=5)
    done_envs = np.array([0, 3, 4, 17, 39])
    dm.data_on_device_via_torch("_done_")[done_envs] = 1
    dm.data_on_device_via_torch("other").fill_(9)
    resetter.reset_when_done(dm)
    rows, id_rows = _rows_of(dm, pool, ids_pool)
    assert np.all(rows[done_envs] >= 0) and np.all(rows[done_envs] < P)
    not_done = np.setdiff1d(np.arange(PE), done_envs)
    assert np.all(host(dm, "state")[not_done] == -1) and np.all(host(dm, "ids")[not_done] == -1)
    np.testing.assert_array_equal(rows[done_envs], id_rows[done_envs])  # paired pools agree
    other = host(dm, "other")  # twins still work beside pools
    assert np.all(other[done_envs] == -5) and np.all(other[not_done] == 9)
    assert host(dm, "_done_").tolist() == [0] * PE


def test_pool_rows_are_uniform_paired_reproducible_and_fresh(backend_name):
    calls = 150  # 150 x 40 = 6000 draws over 7 rows
    dm, fm, resetter, pool, ids_pool = _pool_setup(backend_name, seed=11)
    history = []
    for _ in range(calls):
        resetter.reset_when_done(dm, mode="force_reset")
        rows, id_rows = _rows_of(dm, pool, ids_pool)
        np.testing.assert_array_equal(rows, id_rows)
        history.append(rows)
    history = np.array(history)
    assert history.min() >= 0
    counts = np.bincount(history.ravel(), minlength=P)
    expected = history.size / P
    statistic = float(np.sum((counts - expected) ** 2 / expected))
    assert chi2_sf(statistic, P - 1) > P_MIN, counts
    # Per env too: every env sees every row.
    for e in range(PE):
        assert len(set(history[:, e])) == P
    # Successive calls draw different rows; envs draw different rows within a call.
    assert np.mean(history[1:] == history[:-1]) < 1 / P + 0.05
    assert np.mean(history[:, 1:] == history[:, :-1]) < 1 / P + 0.05
    # A fixed seed reproduces the sequence, on fresh managers.
    dm2, _, resetter2, _, _ = _pool_setup(backend_name, seed=11)
    for t in range(5):
        resetter2.reset_when_done(dm2, mode="force_reset")
        np.testing.assert_array_equal(_rows_of(dm2, pool, ids_pool)[0], history[t])
    # init_reset_pool restarts the stream; another seed gives other rows.
    resetter2.init_reset_pool(dm2, seed=11)
    resetter2.reset_when_done(dm2, mode="force_reset")
    np.testing.assert_array_equal(_rows_of(dm2, pool, ids_pool)[0], history[0])
    resetter2.init_reset_pool(dm2, seed=12)
    resetter2.reset_when_done(dm2, mode="force_reset")
    assert np.mean(_rows_of(dm2, pool, ids_pool)[0] == history[0]) < 0.5


def test_pool_state_dict_continues_the_same_rows(backend_name):
    dm, fm, resetter, pool, ids_pool = _pool_setup(backend_name, seed=2)
    resetter.reset_when_done(dm, mode="force_reset")
    state = resetter.state_dict()
    resetter.reset_when_done(dm, mode="force_reset")
    expected = _rows_of(dm, pool, ids_pool)[0]
    other = EnvironmentReset(fm, seed=99)
    other.load_state_dict(state)
    other.reset_when_done(dm, mode="force_reset")
    np.testing.assert_array_equal(_rows_of(dm, pool, ids_pool)[0], expected)


def test_pool_of_one_row_and_pools_of_different_sizes(backend_name):
    dm, fm, resetter, pool, ids_pool = _pool_setup(backend_name, seed=3, pool_size=1, second_pool_size=5)
    seen = set()
    for _ in range(20):
        resetter.reset_when_done(dm, mode="force_reset")
        rows, id_rows = _rows_of(dm, pool, ids_pool)
        assert np.all(rows == 0)
        assert np.all((id_rows >= 0) & (id_rows < 5))
        seen |= set(id_rows.tolist())
    assert seen == set(range(5))


def test_pool_decides_even_when_the_target_has_a_twin(backend_name):
    dm, fm = managers(backend_name, 6, 2)
    feed = DataFeed()
    feed.add_data("x", np.full((6, 2), -1, np.float32), save_copy_and_apply_at_reset=True)
    feed.add_pool_for_reset("x_pool", (np.arange(6, dtype=np.float32).reshape(3, 2) + 1) * 10, reset_target="x")
    dm.push_data_to_device(feed)
    EnvironmentReset(fm, seed=0).reset_when_done(dm, mode="force_reset")
    x = host(dm, "x")
    pool = host(dm, "x_pool")
    for e in range(6):
        assert any(np.array_equal(x[e], row) for row in pool), (e, x[e])


# --------------------------------------------------------------------------- log

LE, LN, LT = 4, 3, 6


def _log_setup(backend_name):
    dm, fm = managers(backend_name, LE, LN, episode_length=LT)
    rng = np.random.default_rng(0)
    feed = DataFeed()
    feed.add_data("positions", rng.integers(0, 100, size=(LE, LN)).astype(np.int32), log_data_across_episode=True)
    feed.add_data("velocity", rng.normal(size=(LE, LN, 2)).astype(np.float32), log_data_across_episode=True)
    feed.add_data("hidden", np.zeros((LE, LN), np.float32))
    dm.push_data_to_device(feed)
    return dm, fm, LogController(fm), rng


def _modify(dm, rng):
    """New values everywhere, different for every env, through torch."""
    for name in ("positions", "velocity", "hidden"):
        tensor = dm.data_on_device_via_torch(name)
        new = rng.integers(0, 10_000, size=tuple(tensor.shape))
        tensor.copy_(torch.from_numpy(new).to(tensor.dtype))


@pytest.mark.parametrize("env_id", [0, 2, LE - 1])
def test_log_records_the_chosen_env_at_every_step(backend_name, env_id):
    dm, fm, log, rng = _log_setup(backend_name)
    expected = {"positions": [host(dm, "positions")[env_id]], "velocity": [host(dm, "velocity")[env_id]]}
    log.reset_log(dm, env_id=env_id)
    for t in range(1, LT + 1):
        _modify(dm, rng)
        for name in expected:
            expected[name].append(host(dm, name)[env_id])
        log.update_log(dm, t)
    out = log.fetch_log(dm)
    assert set(out) == {"positions_for_log", "velocity_for_log"}
    for name, rows in expected.items():
        got = out[name + "_for_log"]
        assert got.shape == (LT + 1, *rows[0].shape) and got.dtype == rows[0].dtype
        np.testing.assert_array_equal(got, np.stack(rows), err_msg=name)
    # A prefix and a subset.
    part = log.fetch_log(dm, ["velocity"], last_step=2)
    assert list(part) == ["velocity_for_log"]
    np.testing.assert_array_equal(part["velocity_for_log"], np.stack(expected["velocity"][:3]))


def test_log_skipped_steps_and_a_new_episode(backend_name):
    dm, fm, log, rng = _log_setup(backend_name)
    log.reset_log(dm, env_id=1)
    log.update_log(dm, 3)  # steps may skip ahead
    want3 = host(dm, "positions")[1]
    np.testing.assert_array_equal(log.fetch_log(dm)["positions_for_log"][3], want3)
    assert len(log.fetch_log(dm)["positions_for_log"]) == 4
    # A new episode of another env starts over at step 0.
    _modify(dm, rng)
    log.reset_log(dm, env_id=3)
    out = log.fetch_log(dm)["positions_for_log"]
    assert out.shape == (1, LN)
    np.testing.assert_array_equal(out[0], host(dm, "positions")[3])


def test_log_step_errors(backend_name):
    dm, fm, log, rng = _log_setup(backend_name)
    with pytest.raises(ValueError):
        log.fetch_log(dm)  # nothing logged yet
    log.reset_log(dm, env_id=0)
    log.update_log(dm, 1)
    log.update_log(dm, 2)
    with pytest.raises(ValueError):
        log.update_log(dm, 2)  # the same step again
    with pytest.raises(ValueError):
        log.update_log(dm, 1)  # backwards
    with pytest.raises(ValueError):
        log.update_log(dm, LT + 1)  # past episode_length
    with pytest.raises(ValueError):
        log.fetch_log(dm, last_step=3)  # not logged yet
    with pytest.raises(KeyError, match="hidden"):
        log.fetch_log(dm, ["hidden"])
    with pytest.raises(KeyError, match="nothing_here"):
        log.fetch_log(dm, ["nothing_here"])
    with pytest.raises(ValueError):
        log.reset_log(dm, env_id=LE)
    log.update_log(dm, LT)  # the last step is still allowed
    assert log.fetch_log(dm)["positions_for_log"].shape == (LT + 1, LN)


def test_log_without_logged_arrays_raises(backend_name):
    dm, fm = managers(backend_name, LE, LN, episode_length=LT)
    with pytest.raises(ValueError, match="log_data_across_episode"):
        LogController(fm).reset_log(dm)
