"""WarpDrive 2.7's training-side import paths: ``training.utils.param_scheduler`` and ``training.models.factory``.

Both are layers over this project's one implementation (``schedules.Schedule`` and the model registry); the
values below are WarpDrive's semantics (piecewise linear in env steps, clamped at the ends; ``create`` returns
the class), and a model added through the factory trains in a Trainer.
"""

from __future__ import annotations

import pytest
import torch
from gymnasium import spaces
from torch import nn

from warp_drive.training import models
from warp_drive.training.config import load_config
from warp_drive.training.models import ActionHead, ActorCritic
from warp_drive.training.models.factory import ModelFactory
from warp_drive.training.utils.param_scheduler import LRScheduler, ParamScheduler


# ----------------------------------------------------------------------------- param_scheduler
def test_param_scheduler_constant_and_piecewise_linear():
    constant = ParamScheduler(0.05)
    assert constant.type == "constant" and constant.schedule == 0.05
    assert [constant.get_param_value(t) for t in (0, 10, 10**9)] == [0.05] * 3

    # WarpDrive's docstring example: 0.1 up to 1000 steps, 0.05 from 2000, linear between.
    schedule = ParamScheduler([[1000, 0.1], [2000, 0.05]])
    assert schedule.type == "piecewise_linear"
    values = [schedule.get_param_value(t) for t in (0, 999, 1000, 1250, 1500, 2000, 2001, 10**7)]
    assert values == pytest.approx([0.1, 0.1, 0.1, 0.0875, 0.075, 0.05, 0.05, 0.05])

    three = ParamScheduler([[0, 1.0], [100, 0.0], [300, 2.0]])
    assert [three.get_param_value(t) for t in (50, 100, 200, 400)] == pytest.approx([0.5, 0.0, 1.0, 2.0])


def test_param_scheduler_refuses_bad_schedules_by_name():
    with pytest.raises(ValueError, match="strictly increasing"):
        ParamScheduler([[100, 0.1], [50, 0.2]])
    with pytest.raises(ValueError, match=r"\[step, value\] pair"):
        ParamScheduler([[100, 0.1, 3]])
    with pytest.raises(ValueError, match="total_steps"):
        ParamScheduler({"type": "linear", "start": 1, "end": 0})
    with pytest.raises(ValueError, match="timestep must be a number >= 0"):
        ParamScheduler(0.1).get_param_value(-1)


def test_lr_scheduler_follows_the_schedule_per_iteration():
    model = nn.Linear(2, 1)
    optimizer = torch.optim.Adam(model.parameters(), lr=0.01)
    # 250 env steps per iteration from step 500: lr 0.01 -> 0 between steps 500 and 1500, then 0.
    scheduler = LRScheduler([[500, 0.01], [1500, 0.0]], optimizer, init_timestep=500, timesteps_per_iteration=250)
    assert isinstance(scheduler, torch.optim.lr_scheduler.LambdaLR)
    lrs = []
    for _ in range(6):
        lrs.append(optimizer.param_groups[0]["lr"])
        optimizer.step()
        scheduler.step()
    assert lrs == pytest.approx([0.01, 0.0075, 0.005, 0.0025, 0.0, 0.0])
    with pytest.raises(ValueError, match="optimizer"):
        LRScheduler(0.1)
    with pytest.raises(ValueError, match="needs it > 0"):
        LRScheduler([[0, 0.0], [10, 0.1]], optimizer)
    with pytest.raises(ValueError, match="timesteps_per_iteration"):
        LRScheduler(0.1, optimizer, timesteps_per_iteration=0)


# ----------------------------------------------------------------------------- models.factory
class TinyModel(nn.Module):
    """A user model in this project's form: (obs_dim, action_space, config); forward -> (distribution, value)."""

    def __init__(self, obs_dim, action_space, config):
        super().__init__()
        self.trunk = nn.Sequential(nn.Linear(obs_dim, 8), nn.Tanh())
        self.head = ActionHead(8, action_space)
        self.critic = nn.Linear(8, 1)

    def forward(self, obs):
        h = self.trunk(obs)
        return self.head(h), self.critic(h).squeeze(-1)

    def value(self, obs):
        return self.critic(self.trunk(obs)).squeeze(-1)


class WarpDriveStyleModel(nn.Module):
    def __init__(self, env, model_config, policy, policy_tag_to_agent_id_map):
        super().__init__()


@pytest.fixture
def clean_registry():
    saved, pool = dict(models._MODEL_REGISTRY), dict(ModelFactory.model_pool)
    yield
    models._MODEL_REGISTRY.clear()
    models._MODEL_REGISTRY.update(saved)
    ModelFactory.model_pool.clear()
    ModelFactory.model_pool.update(pool)


def test_model_factory_builtin_keys_resolve_to_ours():
    from warp_drive.training.ddpg import DDPGModel

    assert ModelFactory.create("fully_connected") is ActorCritic
    assert ModelFactory.create("fully_connected_actor") is DDPGModel
    assert ModelFactory.create("fully_connected_action_value_critic") is DDPGModel
    model = ModelFactory.create("fully_connected")(4, spaces.Discrete(3), None)
    dist, value = model(torch.zeros(5, 4))
    assert dist.probs_per_head()[0].shape == (5, 3) and value.shape == (5,)
    with pytest.raises(ValueError, match="not registered.*ModelFactory.add"):
        ModelFactory.create("lstm")


def test_a_model_added_to_the_factory_trains_in_a_trainer(clean_registry):
    from warp_drive.training.run import build

    assert ModelFactory.add("tiny_factory_model", __name__, "TinyModel") is TinyModel
    assert ModelFactory.create("tiny_factory_model") is TinyModel
    assert "tiny_factory_model" in models.registered_models()
    assert ModelFactory.model_pool["tiny_factory_model"] == f"{__name__}:TinyModel"

    config = load_config("cartpole", ["trainer.backend=cpu", "trainer.num_envs=4", "trainer.rollout_length=8",
                                      "trainer.total_steps=64", "policy.shared.model.type=tiny_factory_model"])
    trainer = build(config)
    model = trainer.policies["shared"].model
    assert isinstance(model, TinyModel)
    before = [p.detach().clone() for p in model.parameters()]
    metrics = trainer.iterate()
    assert all(torch.isfinite(torch.tensor(v)) for k, v in metrics.items() if k.startswith("losses/"))
    assert any(not torch.equal(a, b) for a, b in zip(before, model.parameters()))


def test_model_factory_add_refuses_with_the_reason(clean_registry):
    with pytest.raises(ValueError, match="already used"):
        ModelFactory.add("fully_connected", __name__, "TinyModel")
    with pytest.raises(ValueError, match="already used"):
        ModelFactory.add("fully_connected_actor", __name__, "TinyModel")
    with pytest.raises(ImportError, match="cannot import the module 'no_such_module_here'"):
        ModelFactory.add("x1", "no_such_module_here", "TinyModel")
    with pytest.raises(AttributeError, match="has no 'Missing'"):
        ModelFactory.add("x2", __name__, "Missing")
    with pytest.raises(TypeError, match=r"WarpDrive.s model arguments .* WarpDriveStyleModel\(obs_dim, action_space"):
        ModelFactory.add("x3", __name__, "WarpDriveStyleModel")
    ModelFactory.add("tiny_once", __name__, "TinyModel")
    with pytest.raises(ValueError, match="already used"):
        ModelFactory.add("tiny_once", __name__, "TinyModel")
    assert "x3" not in models.registered_models()
