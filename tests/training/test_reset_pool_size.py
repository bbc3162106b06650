"""``env.reset_pool_size``: how many host-drawn start states each reset pool holds, a run-config key.

Before, every run trained on EnvWrapper's fixed 1000 pool rows (a procedurally generated env on 1000 maps) and
the run config had no way to say otherwise.
"""

from __future__ import annotations

import pytest

from shared_runs import TINY
from warp_drive.runtime.data_values import DEFAULT_RESET_POOL_SIZE
from warp_drive.training.config import ConfigError, load_config
from warp_drive.training.run import build
from warp_drive.env.wrapper import EnvWrapper


def test_the_key_has_one_default_and_is_validated():
    config = load_config("cartpole", TINY)
    assert config.env.reset_pool_size == DEFAULT_RESET_POOL_SIZE == 1000
    assert "reset_pool_size" not in config.to_dict()["env"]  # a run saved before the key reads as it did
    assert load_config("cartpole", [*TINY, "env.reset_pool_size=0"]).to_dict()["env"]["reset_pool_size"] == 0
    for bad in ("-1", "true", "2.5"):
        with pytest.raises(ConfigError, match=r"env\.reset_pool_size"):
            load_config("cartpole", [*TINY, f"env.reset_pool_size={bad}"])


def test_the_trainers_envs_get_pools_of_that_size():
    trainer = build(load_config("cartpole", [*TINY, "env.reset_pool_size=7"]))
    dm = trainer.env.data_manager
    pools = dm.reset_target_to_pool
    assert pools and {dm.get_shape(pool)[0] for pool in pools.values()} == {7}
    twin = trainer.evaluation_twin(2, seed=3)  # mid-run evaluation envs: the same pools' size
    assert {twin.env.data_manager.get_shape(p)[0] for p in twin.env.data_manager.reset_target_to_pool.values()} == {7}


@pytest.mark.parametrize("bad", [-1, True, 2.0])
def test_the_wrapper_refuses_a_pool_size_that_is_not_a_count(bad):
    with pytest.raises(ValueError, match=r"CartPole: reset_pool_size must be an int >= 0"):
        EnvWrapper("CartPole", 2, backend="cpu", reset_pool_size=bad)
