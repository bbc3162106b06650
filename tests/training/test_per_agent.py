"""Per-agent weights (a policy's ``share: agent``): one batched set of layers with a weight matrix per
agent, each agent's samples reaching only its own weights; and what is refused."""

from __future__ import annotations

import pytest
import torch
from gymnasium import spaces
from torch import nn

from warp_drive.training.config import load_config
from warp_drive.training.models import ActorCritic, RecurrentActorCritic, register_model
from warp_drive.training.models.layers import AgentLinear
from warp_drive.training.run import build


def test_agent_linear_is_one_linear_layer_per_agent():
    torch.manual_seed(0)
    layer = AgentLinear(3, 5, 4)
    x = torch.randn(7, 3, 5)
    for i in range(3):
        own = nn.Linear(5, 4)
        own.weight.data.copy_(layer.weight[i])
        own.bias.data.copy_(layer.bias[i])
        assert torch.allclose(layer(x)[:, i], own(x[:, i]), atol=1e-6)
    assert not torch.allclose(layer.weight[0], layer.weight[1])  # drawn independently
    with pytest.raises(ValueError, match=r"inputs of shape \(7, 2, 5\) must end with \(3, 5\)"):
        layer(torch.randn(7, 2, 5))


@pytest.mark.parametrize("model_cls", [ActorCritic, RecurrentActorCritic])
def test_an_agents_samples_reach_only_its_own_weights(model_cls):
    model = model_cls(6, spaces.Discrete(4), {"fc_dims": [16], "gru_hidden": 8}, agents=3)
    x = torch.randn(10, 3, 6)
    if model_cls is RecurrentActorCritic:
        dist, value, _ = model(x, torch.randn(10, 3, *model.hidden_shape))
    else:
        dist, value = model(x)
    assert dist.batch_shape == (10, 3) and value.shape == (10, 3)
    (dist.logits[0][:, 1].sum() + value[:, 1].sum()).backward()  # a loss of agent 1's samples only
    agent_layers = [m for m in model.modules() if isinstance(m, AgentLinear)]
    assert agent_layers and not any(isinstance(m, nn.Linear) for m in model.modules())
    for layer in agent_layers:
        grads = layer.weight.grad
        assert grads is not None and torch.count_nonzero(grads[1]) > 0
        assert torch.count_nonzero(grads[0]) == 0 and torch.count_nonzero(grads[2]) == 0


def test_agents_with_their_own_weights_act_differently_on_the_same_observation():
    trainer = build(load_config("simple_spread_mappo", [
        "trainer.backend=cpu", "trainer.num_envs=4", "trainer.rollout_length=25", "trainer.total_steps=200",
        "policy.shared.share=agent", "policy.shared.agent_id_input=false"]))
    p = trainer.policies["shared"]
    assert p.per_agent and p.model.actor.actor_trunk[0].weight.shape == (3, 64, 18)
    same = torch.randn(1, 18).repeat(4 * 3, 1)  # every agent of every env sees the same thing
    with torch.no_grad():
        dist, _ = trainer.algorithm.forward(p, same)
    logits = dist.logits[0].reshape(4, 3, 5)
    assert torch.equal(logits[0], logits[3])  # the same agent in two envs: the same weights
    assert not torch.allclose(logits[0, 0], logits[0, 1])  # two agents: different weights
    trainer.iterate()  # the update runs on env-steps of all agents together


def test_a_model_without_per_agent_weights_is_refused_at_construction():
    class Plain(nn.Module):
        def __init__(self, obs_dim, action_space, config):
            super().__init__()

    register_model("plain_for_share_test", Plain, overwrite=True)
    with pytest.raises(TypeError, match=r"model 'plain_for_share_test' \(Plain\) has no per-agent weights: share: "
                                        r"agent needs a model constructible as Plain\(obs_dim, action_space, config, "
                                        r"agents=n\)"):
        build(load_config("simple_spread_ippo", ["trainer.backend=cpu", "trainer.num_envs=2", "trainer.total_steps=100",
                                                 "trainer.rollout_length=25", "policy.shared.share=agent",
                                                 "policy.shared.model.type=plain_for_share_test"]))
