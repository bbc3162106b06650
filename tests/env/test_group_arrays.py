"""Agent groups with their own arrays (warp_drive/env/group_arrays.py): a group of 4-number observations
and Discrete(5) actions beside one of 7-number observations and Box(2) actions, each in arrays of its
own shape; checked at construction, stepped against a NumPy reference and trained by PPO on both cpu
executors (real kernels)."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
import torch
from gymnasium import spaces

from warp_drive.runtime.data_feed import DataFeed
from warp_drive.env.environment import TRUNCATED, Environment
from warp_drive.env.registry import register_env
from warp_drive.training.config import RunConfig
from warp_drive.training.run import build
from warp_drive.env.wrapper import EnvWrapper

KERNEL = Path(__file__).parents[1] / "kernels" / "two_groups.cu"


class TwoGroups(Environment):
    """Pickers (agents 0..n_pickers-1) and movers; see tests/kernels/two_groups.cu."""

    name = "TwoGroups"
    cuda_source = str(KERNEL)
    step_kernel = "TwoGroupsStep"

    def __init__(self, n_pickers: int = 3, n_movers: int = 2, episode_length: int = 20,
                 picker_obs_width: int = 4):
        self.n_pickers, self.n_movers = int(n_pickers), int(n_movers)
        self.num_agents, self.episode_length = self.n_pickers + self.n_movers, int(episode_length)
        self.picker_obs_width = int(picker_obs_width)  # a wrong one for the construction error

    def agent_groups(self):
        return {"pickers": list(range(self.n_pickers)), "movers": list(range(self.n_pickers, self.num_agents))}

    def observation_space(self, agent_id: int):
        width = 4 if agent_id < self.n_pickers else 7
        return spaces.Box(-np.inf, np.inf, shape=(width,), dtype=np.float32)

    def action_space(self, agent_id: int):
        return spaces.Discrete(5) if agent_id < self.n_pickers else spaces.Box(-1.0, 1.0, shape=(2,), dtype=np.float32)

    def get_data_dictionary(self, num_envs: int) -> DataFeed:
        E, P, M = num_envs, self.n_pickers, self.n_movers
        feed = DataFeed()
        feed.add_data("sampled_actions_pickers", np.zeros((E, P), np.int32))
        feed.add_data("sampled_actions_movers", np.zeros((E, M, 2), np.float32))
        feed.add_data("observations_pickers", np.zeros((E, P, self.picker_obs_width), np.float32),
                      save_copy_and_apply_at_reset=True)
        feed.add_data("observations_movers", np.zeros((E, M, 7), np.float32), save_copy_and_apply_at_reset=True)
        feed.add_data("rewards_pickers", np.zeros((E, P), np.float32))
        feed.add_data("rewards_movers", np.zeros((E, M), np.float32))
        feed.add_data("picker_target", np.zeros((E, P), np.int32), save_copy_and_apply_at_reset=True)
        feed.add_data("mover_pos", np.zeros((E, M, 2), np.float32), save_copy_and_apply_at_reset=True)
        feed.add_data("mover_goal", np.zeros((E, M, 2), np.float32), save_copy_and_apply_at_reset=True)
        feed.add_data("n_pickers", self.n_pickers)
        return feed

    def get_reset_pools(self, pool_size: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
        return {"picker_target": rng.integers(0, 5, size=(pool_size, self.n_pickers)).astype(np.int32),
                "mover_goal": rng.uniform(-1, 1, size=(pool_size, self.n_movers, 2)).astype(np.float32)}

    def reference_step(self, a: dict) -> None:
        a["_timestep_"] += 1
        t = a["_timestep_"]
        phase = (t.astype(np.float32) / np.float32(a["episode_length"]))
        E, P = a["picker_target"].shape
        action, target = a["sampled_actions_pickers"], a["picker_target"]
        a["rewards_pickers"][...] = (action == target).astype(np.float32)
        env, agent = np.arange(E)[:, None], np.arange(P)[None, :]
        target[...] = (target + 1 + (env + agent + t[:, None]) % 3) % 5
        obs = a["observations_pickers"]
        obs[..., 0] = target.astype(np.float32) / np.float32(4.0)
        obs[..., 1] = phase[:, None]
        obs[..., 2] = action.astype(np.float32) / np.float32(4.0)
        obs[..., 3] = 1.0
        force = np.clip(a["sampled_actions_movers"], -1.0, 1.0).astype(np.float32)
        pos, goal = a["mover_pos"], a["mover_goal"]
        pos += np.float32(0.1) * force
        a["rewards_movers"][...] = -np.abs(pos - goal).sum(-1, dtype=np.float32)
        mo = a["observations_movers"]
        mo[..., 0:2], mo[..., 2:4], mo[..., 4:6], mo[..., 6] = pos, goal, force, phase[:, None]
        a["_done_"][...] = np.where(t >= a["episode_length"], TRUNCATED, 0)


register_env("TwoGroups", TwoGroups, overwrite=True)


def test_each_group_gets_its_own_arrays_and_no_shared_one_is_needed(env_backend):
    wrapper = EnvWrapper(TwoGroups(), 4, backend=env_backend, seed=0)
    pickers, movers = wrapper.group_arrays["pickers"], wrapper.group_arrays["movers"]
    assert pickers.names == {"observations": "observations_pickers", "sampled_actions": "sampled_actions_pickers",
                             "rewards": "rewards_pickers"} and all(pickers.owned.values())
    assert movers.agents == (3, 4) and all(movers.owned.values())
    assert not wrapper.data_manager.is_data_on_device("observations")


def test_a_declaration_that_does_not_match_its_array_fails_at_construction_naming_group_and_array():
    with pytest.raises(ValueError, match=r"group 'pickers''s 'observations_pickers' is float32 \(2, 3, 5\); its 3 "
                                         r"agents and their space Box\(-inf, inf, \(4,\), float32\) need float32 "
                                         r"\(2, 3, 4\)"):
        EnvWrapper(TwoGroups(picker_obs_width=5), 2, backend="cpu")


def test_agents_with_no_array_of_a_kind_are_named():
    class NoRewards(TwoGroups):
        def get_data_dictionary(self, num_envs):
            feed = super().get_data_dictionary(num_envs)
            del feed["rewards_movers"]
            return feed

    with pytest.raises(ValueError, match=r"must define 'rewards' \(2, 5, \.\.\.\) for the agents of group\(s\) "
                                         r"\['movers'\], or each of those groups its own 'rewards_movers'"):
        EnvWrapper(NoRewards(), 2, backend="cpu")


def test_the_kernel_matches_its_reference(env_backend):
    from warp_drive.env.consistency import check

    report, = check(TwoGroups, {"n_pickers": 3, "n_movers": 4}, num_envs=5, num_episodes=2, backend=env_backend)
    assert report.truncated == 10 and "observations_movers" in report.arrays


def two_group_config(backend: str, total_steps: int = 4096, share: str = "group") -> RunConfig:
    ppo = {"algorithm": "PPO", "lr": 3e-3, "num_epochs": 2, "num_minibatches": 2, "share": share,
           "model": {"fc_dims": [32, 32]}}
    return RunConfig.from_dict({
        "name": "two_groups", "env": {"name": "TwoGroups", "config": {}},
        "trainer": {"num_envs": 32, "rollout_length": 16, "total_steps": total_steps, "seed": 1, "backend": backend},
        "policy": {"pickers": dict(ppo), "movers": dict(ppo)},
    })


@pytest.mark.parametrize("share", ["group", "agent"])
@pytest.mark.parametrize("backend", ["cpu", "cpu-gpu"])
@pytest.mark.slow  # trains (over ~1.5 s: the full suite, not the fast tier)
def test_a_discrete_and_a_box_group_train_side_by_side(backend, share):
    """Also with per-agent weights (``share: agent``): each picker and each mover its own network."""
    trainer = build(two_group_config(backend, 4096 if share == "group" else 12288, share=share))
    pickers, movers = trainer.policies["pickers"], trainer.policies["movers"]
    assert (pickers.obs_dim, movers.obs_dim) == (4, 7) and pickers.discrete and not movers.discrete
    before = {t: [q.detach().clone() for q in p.model.parameters()] for t, p in trainer.policies.items()}
    first = trainer.run_episodes(greedy=True)["mean_return"]
    metrics = [trainer.iterate() for _ in range(trainer.num_iterations)]
    for tag, p in trainer.policies.items():
        assert all(math.isfinite(m[f"losses/policy_loss/{tag}"]) for m in metrics)
        assert any(not torch.equal(a, b) for a, b in zip(before[tag], p.model.parameters()))
    # The pickers' actions went where the kernel reads them: their reward (hitting a moving target, 1 in 5
    # by chance) rises as they learn to read it from their observation.
    last = trainer.run_episodes(greedy=True)["mean_return"]
    assert last["pickers"] > first["pickers"] + 2.0, (first, last)
    assert float(trainer.env.data_manager.data_on_device_via_torch("sampled_actions_movers").abs().max()) <= 1.0


def test_pettingzoo_reads_and_writes_each_agent_in_its_groups_arrays():
    pytest.importorskip("pettingzoo")
    from warp_drive.adapters import PettingZooParallelEnv

    env = PettingZooParallelEnv(TwoGroups(), backend="cpu", seed=0)
    obs, _ = env.reset(seed=0)
    assert obs["pickers_0"].shape == (4,) and obs["movers_1"].shape == (7,)
    actions = {name: env.action_space(name).sample() for name in env.agents}
    obs, rewards, *_ = env.step(actions)
    device = env.wrapper.data_manager.data_on_device_via_torch
    assert int(device("sampled_actions_pickers")[0, 2]) == int(actions["pickers_2"])
    assert np.allclose(device("sampled_actions_movers")[0, 1].numpy(), actions["movers_1"])
    assert np.array_equal(obs["movers_1"], device("observations_movers")[0, 1].numpy())
    assert np.array_equal(obs["pickers_2"], device("observations_pickers")[0, 2].numpy())
    assert rewards["pickers_2"] == float(device("rewards_pickers")[0, 2])
    assert rewards["movers_0"] == float(device("rewards_movers")[0, 0])


class MaskedPickers(TwoGroups):
    """TwoGroups whose pickers may never pick actions 3 and 4 (a fixed mask of their own)."""

    def __init__(self, mask_width: int = 5, **kwargs):
        super().__init__(**kwargs)
        self.mask_width = mask_width

    def get_data_dictionary(self, num_envs):
        feed = super().get_data_dictionary(num_envs)
        mask = np.ones((num_envs, self.n_pickers, self.mask_width), np.int32)
        mask[..., 3:] = 0
        feed.add_data("action_mask_pickers", mask, save_copy_and_apply_at_reset=True)
        return feed


register_env("MaskedPickers", MaskedPickers, overwrite=True)


def test_pettingzoo_gives_a_groups_masks_in_the_infos():
    pytest.importorskip("pettingzoo")
    from warp_drive.adapters import PettingZooParallelEnv

    env = PettingZooParallelEnv(MaskedPickers(), backend="cpu", seed=0)
    _, infos = env.reset(seed=0)
    assert infos["pickers_1"]["action_mask"].tolist() == [1, 1, 1, 0, 0] and "action_mask" not in infos["movers_0"]
    _, _, _, _, infos = env.step({name: env.action_space(name).sample(infos[name].get("action_mask"))
                                  for name in env.agents})
    assert infos["pickers_0"]["action_mask"].dtype == np.int8


def test_a_group_masks_its_own_actions():
    from warp_drive.env.consistency import random_action_arrays

    with pytest.raises(ValueError, match=r"group 'pickers''s 'action_mask_pickers' is int32 \(2, 3, 4\); expected "
                                         r"int32 \(2, 3, 5\)"):
        EnvWrapper(MaskedPickers(mask_width=4), 2, backend="cpu")
    wrapper = EnvWrapper(MaskedPickers(), 64, backend="cpu", seed=0)
    assert wrapper.group_arrays["pickers"].mask == "action_mask_pickers" and wrapper.group_arrays["movers"].mask is None
    drawn = random_action_arrays(wrapper, np.random.default_rng(0))["sampled_actions_pickers"]
    assert drawn.max() <= 2 and set(np.unique(drawn)) == {0, 1, 2}  # the checker draws legal actions only
    raw = two_group_config("cpu").to_dict()
    raw["env"]["name"] = "MaskedPickers"
    trainer = build(RunConfig.from_dict(raw))
    trainer.collect_rollout()
    actions = trainer.rollout.buffers["pickers"]["actions"]
    assert int(actions.max()) <= 2 and actions.numel() == 16 * 32 * 3  # never a masked one, over the rollout
