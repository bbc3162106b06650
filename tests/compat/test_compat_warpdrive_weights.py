"""Tutorial 5's step: WarpDrive 2.7's own saved weights (its ``FullyConnected``: ``fc``,
``policy_head``, ``vf_head``) load into the equivalent model here and compute what
WarpDrive's model computed (a ReLU MLP trunk, one softmax head per action
component, a value head), checked against that forward pass written out."""

from __future__ import annotations

import torch

from warp_drive.compat.weights import convert, is_warpdrive_state


def warpdrive_state(obs_dim: int, fc_dims: list[int], heads: list[int], seed: int = 0) -> dict:
    """Random weights under WarpDrive's names and shapes (as its state_dict files hold them)."""
    g = torch.Generator().manual_seed(seed)
    state, last = {}, obs_dim
    for i, width in enumerate(fc_dims):
        state[f"fc.{i}.0.weight"] = torch.randn(width, last, generator=g) * 0.2
        state[f"fc.{i}.0.bias"] = torch.randn(width, generator=g) * 0.1
        last = width
    for k, n in enumerate(heads):
        state[f"policy_head.{k}.weight"] = torch.randn(n, last, generator=g) * 0.2
        state[f"policy_head.{k}.bias"] = torch.randn(n, generator=g) * 0.1
    state["vf_head.weight"] = torch.randn(1, last, generator=g) * 0.2
    state["vf_head.bias"] = torch.randn(1, generator=g)
    return state


def warpdrive_forward(state: dict, obs: torch.Tensor, n_layers: int, n_heads: int):
    """WarpDrive's FullyConnected.forward: ReLU layers, softmax per head, the value."""
    h = obs
    for i in range(n_layers):
        h = torch.relu(h @ state[f"fc.{i}.0.weight"].T + state[f"fc.{i}.0.bias"])
    probs = [torch.softmax(h @ state[f"policy_head.{k}.weight"].T + state[f"policy_head.{k}.bias"], dim=-1)
             for k in range(n_heads)]
    return probs, (h @ state["vf_head.weight"].T + state["vf_head.bias"]).squeeze(-1)


def test_tutorial_5_loads_warpdrive_weights_into_the_equivalent_model(tmp_path):
    from example_envs.tag_continuous.tag_continuous import TagContinuous
    from warp_drive.env_wrapper import EnvWrapper
    from warp_drive.training.trainer import Trainer

    env_config = dict(num_taggers=2, num_runners=3, episode_length=10, use_full_observation=False,
                      num_other_agents_observed=2, num_acceleration_levels=4, num_turn_levels=4, seed=1)
    run_config = {
        "name": "tag_continuous", "env": env_config,
        "trainer": {"num_envs": 2, "train_batch_size": 20, "num_episodes": 2},
        "policy": {tag: {"to_train": True, "algorithm": "A2C", "gamma": 0.98, "lr": 0.001,
                         "model": {"type": "fully_connected", "fc_dims": [16, 16], "model_ckpt_filepath": ""}}
                   for tag in ("tagger", "runner")},
        "saving": {"metrics_log_freq": 10, "model_params_save_freq": 10, "basedir": str(tmp_path),
                   "name": "tag_continuous", "tag": "t"},
    }
    wrapper = EnvWrapper(env_obj=TagContinuous(**env_config), num_envs=2, env_backend="cpu")
    env = wrapper.env
    trainer = Trainer(wrapper, run_config, {"tagger": list(env.tagger_ids), "runner": list(env.runner_ids)},
                      verbose=False)
    model = trainer.policies["tagger"].model
    obs_dim, heads = model.obs_dim, [5, 5]  # levels + 1 (the no-op) per component
    state = warpdrive_state(obs_dim, [16, 16], heads)
    path = tmp_path / "tagger_1000.state_dict"
    torch.save(state, path)
    trainer.load_model_checkpoint({"tagger": str(path)})

    obs = torch.randn(7, obs_dim, generator=torch.Generator().manual_seed(1))
    probs, value = warpdrive_forward(state, obs, 2, 2)
    with torch.no_grad():
        distribution, ours = model(obs)
    for k, p in enumerate(probs):
        torch.testing.assert_close(torch.softmax(distribution.logits[k], dim=-1), p)
    torch.testing.assert_close(ours, value)
    trainer.graceful_close()


def test_the_conversion_fills_a_shared_trunk_or_both_trunks():
    state = warpdrive_state(6, [4], [3])
    assert is_warpdrive_state(state) and not is_warpdrive_state({"fc.0.weight": state["fc.0.0.weight"]})
    shared = convert(state, ["trunk.0.weight"])
    assert set(shared) == {"trunk.0.weight", "trunk.0.bias", "actor_head.heads.0.weight", "actor_head.heads.0.bias",
                           "value_head.weight", "value_head.bias"}
    both = convert(state, ["actor_trunk.0.weight", "critic_trunk.0.weight"])
    assert torch.equal(both["actor_trunk.0.weight"], both["critic_trunk.0.weight"])
    assert both["actor_trunk.0.weight"].data_ptr() != both["critic_trunk.0.weight"].data_ptr()
