"""Behaviour of DataFeed and DataManager: what gets on the device, and what is refused."""

from __future__ import annotations

import importlib.util
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from warp_drive.runtime.data_feed import DataFeed
from warp_drive.runtime.data_manager import DataManager

E, N, L = 4, 3, 5

HAS_CPU_BACKEND = importlib.util.find_spec("warp_drive.runtime.backends.cpu") is not None


def stand_in_backend():
    """A duck-typed backend: all the DataManager needs is ``device`` and ``name``."""
    return SimpleNamespace(device=torch.device("cpu"), name="cpu")


@pytest.fixture(
    params=[
        "stand-in",
        pytest.param(
            "cpu",
            marks=pytest.mark.skipif(not HAS_CPU_BACKEND, reason="warp_drive.runtime.backends.cpu not written yet"),
        ),
    ]
)
def dm(request):
    backend = stand_in_backend() if request.param == "stand-in" else request.param
    return DataManager(num_envs=E, num_agents=N, episode_length=L, backend=backend)


def feed(*entries, **flags):
    """A DataFeed from (name, data) pairs, all with the same flags."""
    data_feed = DataFeed()
    for name, data in entries:
        data_feed.add_data(name, data, **flags)
    return data_feed


def state(dm):
    """Everything observable about the registry, to check that a failed push changed nothing."""
    return (dm.array_names, dm.scalar_data_list, dm.reset_data_list, dm.log_data_list,
            dm.reset_target_to_pool, dm.version)


# -- construction -------------------------------------------------------------


def test_construction_creates_meta_info_and_done_timestep(dm):
    assert dm.meta_info("n_envs") == E and dm.meta_info("n_envs").dtype == np.int32
    assert dm.meta_info("n_agents") == N
    assert dm.meta_info("episode_length") == L
    for name in ("_done_", "_timestep_"):
        pulled = dm.pull_data_from_device(name)
        assert pulled.dtype == np.int32 and pulled.shape == (E,)
        assert not pulled.any()
    assert dm.data_on_device_via_torch("_done_").data_ptr() != dm.data_on_device_via_torch("_timestep_").data_ptr()
    assert (dm.num_envs, dm.num_agents, dm.episode_length) == (E, N, L)
    assert dm.device == torch.device("cpu")


@pytest.mark.parametrize("bad", [0, -1, 2.0, True, 2**31])
def test_construction_refuses_bad_sizes(bad):
    with pytest.raises((TypeError, ValueError), match="num_envs"):
        DataManager(bad, N, L, backend=stand_in_backend())


# -- round trips ----------------------------------------------------------------


@pytest.mark.parametrize("dtype", [np.float32, np.int32])
@pytest.mark.parametrize("shape", [(E,), (E, N), (E, N, 2)])
def test_push_pull_round_trip(dm, dtype, shape):
    data = (np.arange(np.prod(shape)) - 3).reshape(shape).astype(dtype)
    dm.push_data_to_device(feed(("x", data)))
    pulled = dm.pull_data_from_device("x")
    assert pulled.dtype == dtype and pulled.shape == shape
    np.testing.assert_array_equal(pulled, data)
    assert dm.get_shape("x") == shape
    assert dm.get_dtype("x") == np.dtype(dtype).name
    assert dm.is_data_on_device("x") and dm.is_data_on_device_via_torch("x")


def test_pull_returns_an_independent_copy(dm):
    dm.push_data_to_device(feed(("x", np.ones(E, np.float32))))
    pulled = dm.pull_data_from_device("x")
    pulled[:] = 7
    np.testing.assert_array_equal(dm.pull_data_from_device("x"), np.ones(E))


def test_push_snapshots_the_users_array(dm):
    source = np.ones(E, np.float32)
    dm.push_data_to_device(feed(("x", source)))
    source[:] = 9
    np.testing.assert_array_equal(dm.pull_data_from_device("x"), np.ones(E))


def test_torch_view_is_the_live_tensor(dm):
    dm.push_data_to_device(feed(("x", np.zeros((E, N), np.float32))), torch_accessible=True)
    view = dm.data_on_device_via_torch("x")
    assert view is dm.data_on_device_via_torch("x")
    assert view is dm.device_data("x")
    assert view.device == dm.device and view.is_contiguous()
    view[1, 2] = 5.0
    assert dm.pull_data_from_device("x")[1, 2] == 5.0
    assert "x" in dm.torch_accessible_list


def test_lists_become_int32_or_float32(dm):
    dm.push_data_to_device(feed(("ints", [[1, 2, 3]] * E), ("floats", [0.5] * E)))
    assert dm.get_dtype("ints") == "int32" and dm.get_shape("ints") == (E, 3)
    assert dm.get_dtype("floats") == "float32"
    np.testing.assert_array_equal(dm.pull_data_from_device("floats"), np.full(E, 0.5))


def test_list_out_of_int32_range_is_refused(dm):
    with pytest.raises(ValueError, match="'big'.*int32"):
        dm.push_data_to_device(feed(("big", [1, 2**40])))


def test_ragged_list_is_refused(dm):
    with pytest.raises(ValueError, match="'ragged'.*rectangular"):
        dm.push_data_to_device(feed(("ragged", [[1, 2], [3]])))


def test_torch_tensor_input(dm):
    dm.push_data_to_device(feed(("t", torch.arange(E, dtype=torch.int32))))
    np.testing.assert_array_equal(dm.pull_data_from_device("t"), np.arange(E))
    with pytest.raises(TypeError, match="'t64'.*int64.*dtype='int32'"):
        dm.push_data_to_device(feed(("t64", torch.arange(E))))


# -- meta scalars -------------------------------------------------------------


def test_scalars_in_a_feed_become_meta_info(dm):
    version = dm.version
    dm.push_data_to_device(feed(("i", 7), ("f", 0.25), ("b", True), ("n", np.int32(-2)), ("z", np.array(1.5, np.float32))))
    assert dm.version == version + 1
    expected = {"i": (7, np.int32), "f": (0.25, np.float32), "b": (1, np.int32),
                "n": (-2, np.int32), "z": (1.5, np.float32)}
    for name, (value, dtype) in expected.items():
        got = dm.meta_info(name)
        assert got == value and type(got) is dtype, name
        assert dm.has_meta(name) and not dm.is_data_on_device(name)
        assert dm.pull_data_from_device(name) == value
        assert dm.device_data(name) is got
        assert dm.get_shape(name) == ()
    assert dm.get_dtype("f") == "float32"
    assert {"i", "f", "b", "n", "z"} <= set(dm.scalar_data_list)


def test_int_scalar_out_of_range_is_refused(dm):
    with pytest.raises(ValueError, match="'huge'.*int32"):
        dm.add_meta_info({"huge": 2**31})


@pytest.mark.parametrize("value", [np.float64(1.5), np.int64(3)])
def test_64bit_numpy_scalar_needs_dtype(dm, value):
    with pytest.raises(TypeError, match=f"'s'.*{value.dtype.name}.*dtype="):
        dm.push_data_to_device(feed(("s", value)))
    dm.push_data_to_device(feed(("s", value), dtype="float32"))
    assert dm.meta_info("s") == np.float32(value) and dm.get_dtype("s") == "float32"


def test_add_meta_info(dm):
    version = dm.version
    dm.add_meta_info({"gravity": 9.8, "steps": 10})
    assert dm.version == version + 1
    assert dm.meta_info("gravity") == np.float32(9.8)
    with pytest.raises(ValueError, match="'steps' is already"):
        dm.add_meta_info({"steps": 11})
    with pytest.raises(TypeError, match="'arr' must be a scalar"):
        dm.add_meta_info({"arr": [1, 2]})
    with pytest.raises(TypeError, match="'arr' must be a scalar"):
        dm.add_meta_info({"arr": np.zeros(2, np.float32)})


def test_meta_info_and_array_lookups_do_not_mix(dm):
    dm.push_data_to_device(feed(("x", np.zeros(E, np.float32))))
    with pytest.raises(KeyError, match="meta_info"):
        dm.data_on_device_via_torch("n_envs")
    with pytest.raises(KeyError, match="another kind"):
        dm.meta_info("x")


def test_scalar_with_reset_flag_is_refused(dm):
    with pytest.raises(ValueError, match="'s' is a scalar"):
        dm.push_data_to_device(feed(("s", 1.0), save_copy_and_apply_at_reset=True))


# -- reset twins, logs, pools ---------------------------------------------------


def test_at_reset_twin_has_same_values_and_separate_storage(dm):
    data = np.random.default_rng(0).random((E, N)).astype(np.float32)
    dm.push_data_to_device(feed(("pos", data), save_copy_and_apply_at_reset=True))
    assert dm.reset_data_list == ["pos"]
    twin = dm.data_on_device_via_torch("pos_at_reset")
    live = dm.data_on_device_via_torch("pos")
    assert twin.data_ptr() != live.data_ptr()
    np.testing.assert_array_equal(dm.pull_data_from_device("pos_at_reset"), data)
    live.fill_(-1.0)
    np.testing.assert_array_equal(dm.pull_data_from_device("pos_at_reset"), data)


def test_reset_array_without_env_dim_is_refused(dm):
    with pytest.raises(ValueError, match=rf"'pos' has shape \({N}, 2\).*expected \({E}, \.\.\.\)"):
        dm.push_data_to_device(feed(("pos", np.zeros((N, 2), np.float32)), save_copy_and_apply_at_reset=True))


def test_log_buffer_shape_and_dtype(dm):
    dm.push_data_to_device(feed(("loc", np.ones((E, N, 2), np.int32)), log_data_across_episode=True))
    assert dm.log_data_list == ["loc"]
    log = dm.pull_data_from_device("loc_for_log")
    assert log.shape == (L + 1, N, 2) and log.dtype == np.int32 and not log.any()


def test_a_log_buffer_is_allocated_on_its_first_use_only(dm):
    """Training never logs, yet CartPole with episode_length=10**9 allocated a 16 GB log buffer at push (and
    every checkpoint saved it); now it comes when something reads or logs it, zeros as before."""
    dm.push_data_to_device(feed(("loc", np.ones((E, N, 2), np.int32)), log_data_across_episode=True))
    assert dm.log_data_list == ["loc"] and "loc_for_log" not in dm.array_names  # not allocated, not checkpointed
    assert dm.is_data_on_device("loc_for_log") and dm.get_shape("loc_for_log") == (L + 1, N, 2)
    assert "loc_for_log" not in dm.array_names
    with pytest.raises(ValueError, match="already on the device"):
        dm._require_new("loc_for_log")
    log = dm.data_on_device_via_torch("loc_for_log")
    assert "loc_for_log" in dm.array_names and dm.data_on_device_via_torch("loc_for_log") is log
    assert tuple(log.shape) == (L + 1, N, 2) and not log.any()


@pytest.mark.parametrize("shape", [(E, N + 1), (E,), (E + 1, N)])
def test_log_array_with_wrong_dims_is_refused(dm, shape):
    with pytest.raises(ValueError, match=rf"'loc'.*\({E}, {N}, \.\.\.\)"):
        dm.push_data_to_device(feed(("loc", np.zeros(shape, np.float32)), log_data_across_episode=True))


def test_reserved_suffixes_and_bad_names_are_refused(dm):
    with pytest.raises(ValueError, match="reserved suffix"):
        dm.push_data_to_device({"x_at_reset": {"data": np.zeros(E, np.float32)}})
    with pytest.raises(ValueError, match="reserved suffix"):
        DataFeed().add_data("x_for_log", np.zeros(E, np.float32))
    with pytest.raises(ValueError, match="C identifier"):
        DataFeed().add_data("2x", np.zeros(E, np.float32))
    with pytest.raises(TypeError, match="must be a str"):
        DataFeed().add_data(3, np.zeros(E, np.float32))


def test_pool_for_target_in_same_feed(dm):
    data_feed = DataFeed()
    data_feed.add_data("pos", np.zeros((E, N, 2), np.float32), save_copy_and_apply_at_reset=True)
    data_feed.add_pool_for_reset("pos_pool", np.ones((7, N, 2), np.float32), reset_target="pos")
    dm.push_data_to_device(data_feed)
    assert dm.reset_target_to_pool == {"pos": "pos_pool"}
    assert dm.get_shape("pos_pool") == (7, N, 2)
    assert "pos_pool" not in dm.reset_data_list


def test_pool_for_target_already_on_device(dm):
    dm.push_data_to_device(feed(("hp", np.zeros((E, N), np.int32))))
    pool_feed = DataFeed()
    pool_feed.add_pool_for_reset("hp_pool", np.ones((2, N), np.int64), reset_target="hp", dtype="int32")
    dm.push_data_to_device(pool_feed)
    assert dm.reset_target_to_pool == {"hp": "hp_pool"}


@pytest.mark.parametrize(
    "pool, error, match",
    [
        (np.ones((7, N + 1), np.float32), ValueError, r"must be \('P', 3\)"),
        (np.ones((7, N, 1), np.float32), ValueError, r"must be \('P', 3\)"),
        (np.ones((0, N), np.float32), ValueError, "P >= 1"),
        (np.ones((7, N), np.int32), TypeError, "'pos_pool' is int32.*float32"),
    ],
)
def test_pool_shape_and_dtype_mismatch_is_refused(dm, pool, error, match):
    data_feed = DataFeed()
    data_feed.add_data("pos", np.zeros((E, N), np.float32))
    data_feed.add_pool_for_reset("pos_pool", pool, reset_target="pos")
    before = state(dm)
    with pytest.raises(error, match=match):
        dm.push_data_to_device(data_feed)
    assert state(dm) == before


def test_pool_target_missing_is_refused(dm):
    data_feed = DataFeed()
    data_feed.add_data("pos", np.zeros((E, N), np.float32))
    data_feed.add_pool_for_reset("pool", np.ones((3, N), np.float32), reset_target="poss")
    with pytest.raises(ValueError, match="'poss'.*Did you mean 'pos'"):
        dm.push_data_to_device(data_feed)
    assert not dm.is_data_on_device("pos")


def test_pool_target_without_env_dim_is_refused(dm):
    data_feed = DataFeed()
    data_feed.add_data("table", np.zeros((E + 2, N), np.float32))
    data_feed.add_pool_for_reset("pool", np.ones((3, N), np.float32), reset_target="table")
    with pytest.raises(ValueError, match=rf"'table' has shape \({E + 2}, {N}\)"):
        dm.push_data_to_device(data_feed)


def test_second_pool_for_same_target_is_refused(dm):
    data_feed = DataFeed()
    data_feed.add_data("pos", np.zeros((E, N), np.float32))
    data_feed.add_pool_for_reset("pool_a", np.ones((3, N), np.float32), reset_target="pos")
    dm.push_data_to_device(data_feed)
    second = DataFeed()
    second.add_pool_for_reset("pool_b", np.ones((3, N), np.float32), reset_target="pos")
    with pytest.raises(ValueError, match="already has the reset pool 'pool_a'"):
        dm.push_data_to_device(second)


# -- dtype, layout and name errors ------------------------------------------------


def test_duplicate_name_on_device_is_refused(dm):
    dm.push_data_to_device(feed(("x", np.zeros(E, np.float32))))
    with pytest.raises(ValueError, match="'x' is already on the device"):
        dm.push_data_to_device(feed(("x", np.zeros(E, np.float32))))
    with pytest.raises(ValueError, match="'_done_' is already on the device"):
        dm.push_data_to_device(feed(("_done_", np.zeros(E, np.int32))))


def test_duplicate_name_within_feed_is_refused():
    data_feed = DataFeed()
    data_feed.add_data("x", np.zeros(E, np.float32))
    with pytest.raises(ValueError, match="'x' is already in this DataFeed"):
        data_feed.add_data("x", np.ones(E, np.float32))


def test_unknown_name_suggests_close_matches(dm):
    dm.push_data_to_device(feed(("agent_positions", np.zeros(E, np.float32))))
    with pytest.raises(KeyError, match="did you mean 'agent_positions'"):
        dm.pull_data_from_device("agent_position")
    with pytest.raises(KeyError, match="no array named 'zzz'"):
        dm.data_on_device_via_torch("zzz")
    with pytest.raises(KeyError):
        dm.reset_device("agent_positionz")


@pytest.mark.parametrize(
    "dtype, fix", [(np.float64, "dtype='float32'.*astype\\(np.float32\\)"), (np.int64, "dtype='int32'.*astype\\(np.int32\\)")]
)
def test_64bit_array_without_dtype_is_refused(dm, dtype, fix):
    with pytest.raises(TypeError, match=f"'wide' has dtype {np.dtype(dtype).name}.*{fix}"):
        dm.push_data_to_device(feed(("wide", np.zeros(E, dtype))))
    assert not dm.is_data_on_device("wide")


def test_other_dtypes_are_refused(dm):
    with pytest.raises(TypeError, match="'flags' has dtype bool"):
        dm.push_data_to_device(feed(("flags", np.zeros(E, bool))))


def test_explicit_cast_works(dm):
    dm.push_data_to_device(
        feed(("f", np.linspace(0, 1, E)), dtype="float32") | feed(("i", np.arange(E, dtype=np.int64)), dtype="int32")
        | feed(("g", np.array([1.0, -2.0, 3.0, 4.0])), dtype=np.int32)
    )
    assert dm.get_dtype("f") == "float32"
    np.testing.assert_allclose(dm.pull_data_from_device("f"), np.linspace(0, 1, E), rtol=1e-6)
    assert dm.get_dtype("i") == "int32"
    np.testing.assert_array_equal(dm.pull_data_from_device("g"), [1, -2, 3, 4])


def test_int_cast_out_of_range_is_refused(dm):
    with pytest.raises(ValueError, match="'big'.*outside the int32 range"):
        dm.push_data_to_device(feed(("big", np.array([0, 2**31], np.int64)), dtype="int32"))


@pytest.mark.parametrize("values", [[0.0, 1.5], [0.0, np.nan]])
def test_non_integral_float_to_int_is_refused(dm, values):
    with pytest.raises(ValueError, match="'frac'.*non-integral.*truncate"):
        dm.push_data_to_device(feed(("frac", np.array(values)), dtype="int32"))


def test_float_cast_overflow_is_refused(dm):
    with pytest.raises(ValueError, match="'huge'.*inf"):
        dm.push_data_to_device(feed(("huge", np.array([1e300])), dtype="float32"))


def test_unsupported_dtype_request_is_refused():
    with pytest.raises(ValueError, match="'float64' given for 'x' is not supported"):
        DataFeed().add_data("x", np.zeros(E), dtype="float64")


@pytest.mark.parametrize("dtype", [None, "float32"])
def test_non_contiguous_is_refused(dm, dtype):
    transposed = np.zeros((N, E), np.float32).T
    with pytest.raises(ValueError, match="'tr' is not C-contiguous.*np.ascontiguousarray"):
        dm.push_data_to_device(feed(("tr", transposed), dtype=dtype))


def test_misspelt_attribute_is_refused():
    with pytest.raises(TypeError, match="did you mean 'save_copy_and_apply_at_reset'"):
        DataFeed().add_data("x", np.zeros(E, np.float32), save_copy_and_apply_at_rest=True)


def test_non_bool_flag_is_refused():
    with pytest.raises(TypeError, match="log_data_across_episode.*True or False"):
        DataFeed().add_data("x", np.zeros(E, np.float32), log_data_across_episode="False")


# -- atomicity, reset, version ----------------------------------------------------


def test_nothing_half_pushed(dm):
    data_feed = DataFeed()
    data_feed.add_data("good", np.ones((E, N), np.float32), save_copy_and_apply_at_reset=True,
                       log_data_across_episode=True)
    data_feed.add_data("meta_ok", 3)
    data_feed.add_data("bad", np.ones(E, np.float64))
    before = state(dm)
    with pytest.raises(TypeError, match="'bad'"):
        dm.push_data_to_device(data_feed)
    assert state(dm) == before
    for name in ("good", "good_at_reset", "good_for_log"):
        assert not dm.is_data_on_device(name)
    assert not dm.has_meta("meta_ok")
    del data_feed["bad"]
    dm.push_data_to_device(data_feed)
    assert dm.is_data_on_device("good_for_log") and dm.has_meta("meta_ok")


def test_reset_device_restores_in_place(dm):
    initial = np.arange(E * N, dtype=np.float32).reshape(E, N)
    dm.push_data_to_device(feed(("pos", initial), ("zero", np.zeros(E, np.int32)),
                                save_copy_and_apply_at_reset=True))
    dm.push_data_to_device(feed(("loc", np.ones((E, N), np.int32)), log_data_across_episode=True))
    tensors = {name: dm.data_on_device_via_torch(name) for name in dm.array_names}
    pointers = {name: tensor.data_ptr() for name, tensor in tensors.items()}
    for tensor in tensors.values():
        tensor.fill_(42)

    dm.reset_device("pos")
    np.testing.assert_array_equal(dm.pull_data_from_device("pos"), initial)
    assert dm.pull_data_from_device("zero")[0] == 42

    dm.reset_device()
    np.testing.assert_array_equal(dm.pull_data_from_device("pos"), initial)
    np.testing.assert_array_equal(dm.pull_data_from_device("pos_at_reset"), initial)
    np.testing.assert_array_equal(dm.pull_data_from_device("loc"), np.ones((E, N)))
    for name in ("zero", "loc_for_log", "_done_", "_timestep_"):
        assert not dm.pull_data_from_device(name).any(), name
    for name, tensor in tensors.items():
        assert dm.data_on_device_via_torch(name) is tensor
        assert tensor.data_ptr() == pointers[name]


def test_reset_device_on_meta_is_a_noop(dm):
    dm.reset_device("n_envs")
    assert dm.meta_info("n_envs") == E


def test_version_increments_on_every_push(dm):
    version = dm.version
    dm.push_data_to_device(feed(("a", np.zeros(E, np.float32))))
    assert dm.version == version + 1
    dm.push_data_to_device(feed(("b", np.zeros(E, np.float32))))
    assert dm.version == version + 2
    with pytest.raises(ValueError):
        dm.push_data_to_device(feed(("b", np.zeros(E, np.float32))))
    assert dm.version == version + 2
    dm.reset_device()
    assert dm.version == version + 2


# -- shared constants and DataFeed helpers ---------------------------------------


def test_shared_constants(dm):
    table = np.array([[0, 1], [1, 0]], np.int32)
    dm.add_shared_constants({"kIndexToAction": table, "kScale": 0.5, "kList": [1, 2]})
    table[0, 0] = 9
    np.testing.assert_array_equal(dm.shared_constant("kIndexToAction"), [[0, 1], [1, 0]])
    assert dm.shared_constant("kScale") == np.float32(0.5)
    assert dm.shared_constant("kList").dtype == np.int32
    assert dm.shared_constant_names == ["kIndexToAction", "kScale", "kList"]
    assert not dm.is_data_on_device("kScale")
    with pytest.raises(ValueError, match="'kScale' is already registered"):
        dm.add_shared_constants({"kScale": 1.0})
    with pytest.raises(TypeError, match="'k64'.*float64"):
        dm.add_shared_constants({"k64": np.zeros(2)})
    with pytest.raises(KeyError, match="did you mean 'kScale'"):
        dm.shared_constant("kScal")


def test_add_data_list_accepts_tuples_and_dicts():
    data_feed = DataFeed()
    data_feed.add_data_list([
        ("a", [1] * E),
        ("b", [1.0] * E, True),
        ("c", [0] * E, False, True),
        {"name": "d", "data": 2.0, "dtype": "float32"},
    ])
    assert list(data_feed) == ["a", "b", "c", "d"]
    assert data_feed["b"]["attributes"]["save_copy_and_apply_at_reset"] is True
    assert data_feed["c"]["attributes"]["log_data_across_episode"] is True
    assert data_feed["d"]["attributes"]["dtype"] == np.float32
    with pytest.raises(TypeError, match="add_data_list"):
        data_feed.add_data_list([("only_name",)])


def test_add_pool_for_reset_attributes():
    data_feed = DataFeed()
    data_feed.add_pool_for_reset("p", np.zeros((2, 3), np.float32), reset_target="pos")
    attributes = data_feed["p"]["attributes"]
    assert attributes["is_reset_pool"] is True and attributes["reset_target"] == "pos"


def test_plain_dict_feed_is_accepted(dm):
    dm.push_data_to_device({"x": {"data": np.zeros(E, np.float32), "attributes": {}}})
    assert dm.is_data_on_device("x")
    with pytest.raises(TypeError, match="'y' must be"):
        dm.push_data_to_device({"y": np.zeros(E, np.float32)})
