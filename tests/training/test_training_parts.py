"""Unit tests of the training layer's parts: schedules, models, metrics, checkpoints, rendering.

All CPU, all fast: no environment or trainer is built here.
"""

from __future__ import annotations

import csv
import math
import os
from dataclasses import dataclass, field

import numpy as np
import pytest
import torch
from gymnasium import spaces

from warp_drive.training import models
from warp_drive.training.runs import checkpoint as ckpt
from warp_drive.training.runs import dirs, layout
from warp_drive.training.runs.metrics import MetricsWriter, Progress, format_summary, format_value
from warp_drive.training.schedules import Schedule

try:
    from warp_drive.training.config import ModelConfig
except ImportError:  # config.py is written separately; the models only need these attributes

    @dataclass
    class ModelConfig:
        type: str = "fully_connected"
        fc_dims: list = field(default_factory=lambda: [64, 64])
        activation: str = "tanh"
        shared_trunk: bool = False
        obs_normalization: bool = False
        log_std_init: float = 0.0
        extra: dict = field(default_factory=dict)


# ====================================================================== schedules
class TestSchedule:
    def test_constant(self):
        s = Schedule.parse(3e-4, total_steps=1000)
        assert s.value(0) == s.value(500) == s.value(10**9) == 3e-4
        assert s.is_constant
        assert Schedule.parse(2, 10).value(5) == 2.0

    def test_linear(self):
        s = Schedule.parse({"type": "linear", "start": 1.0, "end": 0.0}, total_steps=100)
        assert s.value(0) == 1.0
        assert s.value(25) == pytest.approx(0.75)
        assert s.value(50) == pytest.approx(0.5)
        assert s.value(100) == 0.0
        assert s.value(1000) == 0.0  # clamped past the end of the run
        assert s.value(-10) == 1.0
        assert not s.is_constant

    def test_piecewise_interpolates_and_clamps(self):
        s = Schedule.parse([[100, 1.0], [200, 0.5], [400, 0.0]], total_steps=10**6)
        assert s.value(0) == 1.0  # before the first point: its value
        assert s.value(100) == 1.0
        assert s.value(150) == pytest.approx(0.75)
        assert s.value(200) == pytest.approx(0.5)
        assert s.value(300) == pytest.approx(0.25)
        assert s.value(400) == 0.0
        assert s.value(10**7) == 0.0
        assert Schedule.parse([[0, 0.3]], 10).value(99) == 0.3
        assert Schedule.parse(((0, 1), (10, 2)), 10).value(5) == pytest.approx(1.5)

    def test_parse_is_idempotent(self):
        s = Schedule.parse(0.1, 10)
        assert Schedule.parse(s, 10) is s

    @pytest.mark.parametrize(
        "spec, match",
        [
            ("fast", "must be a number"),
            (True, "bool"),
            (None, "must be a number"),
            ({}, "needs a 'type'"),
            ({"type": "cosine", "start": 1, "end": 0}, "unknown schedule type 'cosine'"),
            ({"type": "linear", "start": 1}, r"missing \['end'\]"),
            ({"type": "linear", "start": 1, "end": 0, "steps": 5}, r"unknown keys \['steps'\]"),
            ({"type": "linear", "start": "a", "end": 0}, r"\.start must be a number"),
            ([], "at least one point"),
            ([[0, 1], [0, 2]], "strictly increasing"),
            ([[10, 1], [5, 2]], "strictly increasing"),
            ([[0, 1, 2]], r"\[step, value\] pair"),
            ([0.1, 0.2], r"\[step, value\] pair"),
            ([[0, "x"]], "value must be a number"),
            ([[-1, 1.0]], "step must be >= 0"),
            (float("nan"), "finite"),
        ],
    )
    def test_bad_specs(self, spec, match):
        with pytest.raises(ValueError, match=match):
            Schedule.parse(spec, total_steps=100)

    def test_error_names_the_key_and_linear_needs_total(self):
        with pytest.raises(ValueError, match=r"policy\.tagger\.lr"):
            Schedule.parse("x", 100, name="policy.tagger.lr")
        with pytest.raises(ValueError, match="total_steps > 0"):
            Schedule.parse({"type": "linear", "start": 1, "end": 0}, total_steps=0)


# ====================================================================== models
SPACES = {
    "discrete": spaces.Discrete(5),
    "multidiscrete": spaces.MultiDiscrete([3, 4, 2]),
    "box": spaces.Box(-1.0, 1.0, shape=(3,), dtype=np.float32),
}
OBS_DIM, BATCH = 6, 7


def _model(space_key="discrete", **cfg):
    torch.manual_seed(0)
    return models.create_model(ModelConfig(**cfg), OBS_DIM, SPACES[space_key])


def _check_orthogonal(weight: torch.Tensor, gain: float) -> None:
    """An orthogonal (out, in) matrix times ``gain``: W W^T = g^2 I (out <= in) or W^T W = g^2 I."""
    w = weight.detach().double()
    gram = w @ w.T if w.shape[0] <= w.shape[1] else w.T @ w
    torch.testing.assert_close(gram, gain**2 * torch.eye(gram.shape[0], dtype=torch.float64), atol=1e-5, rtol=1e-4)


@pytest.fixture
def clean_registry():
    saved = dict(models._MODEL_REGISTRY)
    yield
    models._MODEL_REGISTRY.clear()
    models._MODEL_REGISTRY.update(saved)


class TestActorCritic:
    @pytest.mark.parametrize("shared", [False, True])
    def test_discrete_shapes_and_probs(self, shared):
        model = _model("multidiscrete", fc_dims=[16, 16], shared_trunk=shared)
        obs = torch.randn(BATCH, OBS_DIM)
        dist, value = model(obs)
        assert value.shape == (BATCH,)
        torch.testing.assert_close(model.value(obs), value)
        probs = dist.probs_per_head()
        assert [tuple(p.shape) for p in probs] == [(BATCH, 3), (BATCH, 4), (BATCH, 2)]
        for p in probs:
            assert p.dtype == torch.float32 and p.is_contiguous()
            torch.testing.assert_close(p.sum(-1), torch.ones(BATCH))
        actions = dist.sample()
        assert actions.shape == (BATCH, 3) and actions.dtype == torch.int64
        assert (actions >= 0).all() and (actions < torch.tensor([3, 4, 2])).all()
        assert dist.mode().shape == (BATCH, 3) and dist.mode().dtype == torch.int64
        assert dist.log_prob(actions).shape == (BATCH,) and dist.entropy().shape == (BATCH,)

    def test_discrete_single_head(self):
        model = _model("discrete")
        dist, _ = model(torch.randn(BATCH, OBS_DIM))
        actions = dist.sample()
        assert actions.shape == (BATCH, 1) and actions.dtype == torch.int64
        assert [tuple(p.shape) for p in dist.probs_per_head()] == [(BATCH, 5)]
        # (B,) and int32 actions are accepted for a single head and give the same result
        torch.testing.assert_close(dist.log_prob(actions[:, 0].int()), dist.log_prob(actions))
        with pytest.raises(ValueError, match="do not match"):
            dist.log_prob(torch.zeros(BATCH, 2, dtype=torch.int64))
        with pytest.raises(TypeError, match="discrete"):
            _model("box")(torch.randn(2, OBS_DIM))[0].probs_per_head()

    def test_leading_dims_match_the_sampler_layout(self):
        """(E, N, obs_dim) in -> (E, N, n_h) probabilities and (E, N) values, ready for the device sampler."""
        model = _model("multidiscrete", fc_dims=[8])
        dist, value = model(torch.randn(4, 3, OBS_DIM))
        assert value.shape == (4, 3)
        assert [tuple(p.shape) for p in dist.probs_per_head()] == [(4, 3, 3), (4, 3, 4), (4, 3, 2)]
        assert dist.sample().shape == (4, 3, 3)
        assert dist.log_prob(dist.sample()).shape == (4, 3)

    def test_discrete_log_prob_and_entropy_match_torch(self):
        model = _model("multidiscrete")
        dist, _ = model(torch.randn(BATCH, OBS_DIM) * 3)
        actions = dist.sample()
        heads = [torch.distributions.Categorical(logits=lg) for lg in dist.logits]
        expected_lp = sum(h.log_prob(actions[:, i]) for i, h in enumerate(heads))
        expected_ent = sum(h.entropy() for h in heads)
        torch.testing.assert_close(dist.log_prob(actions), expected_lp)
        torch.testing.assert_close(dist.entropy(), expected_ent)
        # probabilities are the softmax of the logits, head by head
        for p, lg in zip(dist.probs_per_head(), dist.logits):
            torch.testing.assert_close(p, torch.softmax(lg, -1))

    def test_box_gaussian(self):
        model = _model("box", log_std_init=-0.5)
        assert isinstance(model.actor_head.log_std, torch.nn.Parameter)
        torch.testing.assert_close(model.actor_head.log_std.detach(), torch.full((3,), -0.5))
        dist, value = model(torch.randn(BATCH, OBS_DIM))
        assert value.shape == (BATCH,)
        actions = dist.sample()
        assert actions.shape == (BATCH, 3) and actions.is_floating_point()
        normal = torch.distributions.Normal(dist.mean, torch.exp(torch.tensor(-0.5)).expand(BATCH, 3))
        torch.testing.assert_close(dist.log_prob(actions), normal.log_prob(actions).sum(-1))
        torch.testing.assert_close(dist.entropy(), normal.entropy().sum(-1))
        torch.testing.assert_close(dist.mode(), dist.mean)
        # the log-std is learned: the log-prob's gradient reaches it
        dist.log_prob(actions).sum().backward()
        assert model.actor_head.log_std.grad is not None and model.actor_head.log_std.grad.abs().sum() > 0

    def test_parameter_counts_shared_vs_separate(self):
        trunk = (OBS_DIM * 16 + 16) + (16 * 16 + 16)
        heads = (16 * 5 + 5) + (16 + 1)
        separate = _model("discrete", fc_dims=[16, 16])
        shared = _model("discrete", fc_dims=[16, 16], shared_trunk=True)
        assert sum(p.numel() for p in separate.parameters()) == 2 * trunk + heads
        assert sum(p.numel() for p in shared.parameters()) == trunk + heads
        # no hidden layers: heads straight on the observation
        flat = _model("discrete", fc_dims=[])
        assert sum(p.numel() for p in flat.parameters()) == (OBS_DIM * 5 + 5) + (OBS_DIM + 1)

    @pytest.mark.parametrize("space_key", ["multidiscrete", "box"])
    def test_orthogonal_init(self, space_key):
        model = _model(space_key, fc_dims=[32, 8])  # 8 < 32: exercises both orthogonality directions
        hidden = [m for m in model.actor_trunk if isinstance(m, torch.nn.Linear)]
        hidden += [m for m in model.critic_trunk if isinstance(m, torch.nn.Linear)]
        assert len(hidden) == 4
        for layer in hidden:
            _check_orthogonal(layer.weight, math.sqrt(2))
        policy_heads = list(model.actor_head.heads) if space_key == "multidiscrete" else [model.actor_head.mean]
        for layer in policy_heads:
            _check_orthogonal(layer.weight, 0.01)
        _check_orthogonal(model.value_head.weight, 1.0)
        for layer in hidden + policy_heads + [model.value_head]:
            assert torch.count_nonzero(layer.bias) == 0

    def test_activation(self):
        assert any(isinstance(m, torch.nn.ReLU) for m in _model(activation="relu").modules())
        assert any(isinstance(m, torch.nn.Tanh) for m in _model(activation="tanh").modules())
        with pytest.raises(ValueError, match="activation"):
            _model(activation="gelu")

    def test_unsupported_spaces(self):
        for space in (spaces.Box(-1, 1, shape=(2, 2)), spaces.Tuple([spaces.Discrete(2)])):
            with pytest.raises(ValueError, match="action space"):
                models.ActorCritic(OBS_DIM, space, ModelConfig())
        with pytest.raises(ValueError, match="obs_dim"):
            models.ActorCritic(0, spaces.Discrete(2), ModelConfig())
        with pytest.raises(ValueError, match="last dimension"):
            _model()(torch.randn(2, OBS_DIM + 1))

    def test_obs_normalization_stats_match_numpy(self):
        model = _model("discrete", obs_normalization=True)
        rng = np.random.default_rng(1)
        batches = [rng.normal(loc=i, scale=1 + i, size=(n, OBS_DIM)).astype(np.float32)
                   for i, n in enumerate([5, 17, 1, 40])]
        for b in batches:
            model.update_obs_normalization(torch.from_numpy(b))
        # (E, N, obs_dim) batches are folded in row by row too
        extra = rng.normal(size=(3, 4, OBS_DIM)).astype(np.float32)
        model.update_obs_normalization(torch.from_numpy(extra))
        everything = np.concatenate([*batches, extra.reshape(-1, OBS_DIM)]).astype(np.float64)
        rms = model.obs_rms
        assert rms.mean.dtype == torch.float64
        assert rms.count.item() == len(everything)
        np.testing.assert_allclose(rms.mean.numpy(), everything.mean(0), rtol=1e-10, atol=1e-12)
        np.testing.assert_allclose(rms.var.numpy(), everything.var(0), rtol=1e-10)
        # forward sees (obs - mean) / sqrt(var + 1e-8), clipped to +-10
        x = torch.from_numpy(rng.normal(scale=50, size=(BATCH, OBS_DIM)).astype(np.float32))
        expected = np.clip((x.double().numpy() - everything.mean(0)) / np.sqrt(everything.var(0) + 1e-8), -10, 10)
        np.testing.assert_allclose(model._prepare(x).numpy(), expected, rtol=1e-5, atol=1e-5)
        assert model._prepare(x).abs().max() <= 10

    def test_obs_normalization_off_is_a_noop(self):
        model = _model("discrete")
        model.update_obs_normalization(torch.randn(4, OBS_DIM))
        assert model.obs_rms is None
        assert not any("obs_rms" in k for k in model.state_dict())
        x = torch.randn(3, OBS_DIM)
        torch.testing.assert_close(model._prepare(x), x)

    def test_state_dict_round_trip(self):
        cfg = dict(fc_dims=[8, 8], obs_normalization=True, log_std_init=-1.0)
        a = _model("box", **cfg)
        a.update_obs_normalization(torch.randn(20, OBS_DIM) * 4 + 2)
        with torch.no_grad():
            a.actor_head.log_std.add_(0.3)
        state = a.state_dict()
        assert {"obs_rms.mean", "obs_rms.var", "obs_rms.count", "actor_head.log_std"} <= set(state)
        torch.manual_seed(123)
        b = models.create_model(ModelConfig(**cfg), OBS_DIM, SPACES["box"])
        b.load_state_dict(state)
        obs = torch.randn(BATCH, OBS_DIM)
        (da, va), (db, vb) = a(obs), b(obs)
        torch.testing.assert_close(va, vb)
        torch.testing.assert_close(da.mean, db.mean)
        torch.testing.assert_close(da.log_std, db.log_std)


class TestRegistry:
    def test_builtin_and_unknown(self):
        assert "fully_connected" in models.registered_models()
        assert isinstance(models.create_model(ModelConfig(), 4, spaces.Discrete(2)), models.ActorCritic)
        with pytest.raises(ValueError, match=r"unknown model type 'lstm'.*fully_connected"):
            models.create_model(ModelConfig(type="lstm"), 4, spaces.Discrete(2))

    def test_register_errors(self, clean_registry):
        with pytest.raises(ValueError, match="already registered"):
            models.register_model("fully_connected", type("Other", (models.ActorCritic,), {}))
        with pytest.raises(TypeError, match="nn.Module subclass"):
            models.register_model("not_a_module", dict)

        class NoArgs(torch.nn.Module):
            def __init__(self):
                super().__init__()

        with pytest.raises(TypeError, match=r"\(obs_dim, action_space, config\)"):
            models.register_model("no_args", NoArgs)
        with pytest.raises(ValueError, match="non-empty"):
            models.register_model("", models.ActorCritic)

    def test_user_model(self, clean_registry):
        @models.register_model("tiny")
        class Tiny(torch.nn.Module):
            """A user model: its own trunk, the library's action head."""

            def __init__(self, obs_dim, action_space, config):
                super().__init__()
                width = config.extra.get("width", 4)
                self.body = torch.nn.Linear(obs_dim, width)
                self.head = models.ActionHead(width, action_space)
                self.v = torch.nn.Linear(width, 1)

            def forward(self, obs):
                h = torch.relu(self.body(obs))
                return self.head(h), self.v(h).squeeze(-1)

            def value(self, obs):
                return self.forward(obs)[1]

        model = models.create_model(ModelConfig(type="tiny", extra={"width": 5}), 3, spaces.MultiDiscrete([2, 3]))
        assert isinstance(model, Tiny) and model.body.out_features == 5
        dist, value = model(torch.randn(4, 3))
        assert value.shape == (4,) and [p.shape[-1] for p in dist.probs_per_head()] == [2, 3]
        # re-registering needs overwrite=True
        with pytest.raises(ValueError, match="overwrite=True"):
            models.register_model("tiny", models.ActorCritic)
        models.register_model("tiny", models.ActorCritic, overwrite=True)
        assert isinstance(models.create_model(ModelConfig(type="tiny"), 3, spaces.Discrete(2)), models.ActorCritic)


# ====================================================================== metrics
def _read_csv(path):
    with open(path, newline="") as f:
        return list(csv.reader(f))


class TestMetrics:
    def test_csv_rows_and_header_expansion(self, tmp_path):
        with MetricsWriter(tmp_path) as w:
            w.write(10, {"charts/SPS": 1234.5, "losses/value_loss/a": 1 / 3})
            w.write(20, {"charts/SPS": 99, "charts/episodic_return/a": torch.tensor(-0.25, dtype=torch.float64)})
            w.write(30, {"losses/value_loss/a": np.float64(0.1)})
        rows = _read_csv(tmp_path / "metrics.csv")
        assert rows[0] == ["global_step", "charts/SPS", "losses/value_loss/a", "charts/episodic_return/a"]
        assert rows[1] == ["10", "1234.5", repr(1 / 3), ""]
        assert float(rows[1][2]) == 1 / 3  # repr precision round-trips exactly
        assert rows[2] == ["20", "99", "", "-0.25"]
        assert rows[3] == ["30", "", "0.1", ""]
        assert len(rows) == 4
        assert not [p for p in os.listdir(tmp_path) if p.startswith(".")]  # no temp files left

    def test_resume_appends_and_purges(self, tmp_path):
        with MetricsWriter(tmp_path) as w:
            for step in (10, 20, 30):
                w.write(step, {"x": step / 10})
        with MetricsWriter(tmp_path, purge_step=20) as w:
            assert w.keys == ["x"]
            w.write(20, {"x": 2.5})
        rows = _read_csv(tmp_path / "metrics.csv")
        assert rows == [["global_step", "x"], ["10", "1.0"], ["20", "2.5"]]

    def test_write_after_close(self, tmp_path):
        w = MetricsWriter(tmp_path)
        w.close()
        w.close()  # idempotent
        with pytest.raises(RuntimeError):
            w.write(1, {"x": 1})

    def test_tensorboard_events(self, tmp_path):
        pytest.importorskip("tensorboard")
        from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

        from warp_drive.training.runs.loggers import TensorBoardLogger

        tb = TensorBoardLogger(tmp_path)
        assert tb.tb is not None
        tb.log_metrics(5, {"charts/SPS": 10.0, "losses/policy_loss/tagger": -0.5})
        tb.log_metrics(9, {"charts/SPS": 12.0})
        tb.close()
        assert list(tmp_path.glob("events.out.tfevents.*"))
        acc = EventAccumulator(str(tmp_path))
        acc.Reload()
        assert set(acc.Tags()["scalars"]) == {"charts/SPS", "losses/policy_loss/tagger"}
        assert [(e.step, e.value) for e in acc.Scalars("charts/SPS")] == [(5, 10.0), (9, 12.0)]

    def test_without_tensorboard_warns_once(self, tmp_path, monkeypatch):
        import sys
        import warnings

        from warp_drive.training.runs import loggers

        monkeypatch.setitem(sys.modules, "torch.utils.tensorboard", None)  # import now raises ImportError
        monkeypatch.setattr(loggers, "_TB_WARNED", False)
        with pytest.warns(RuntimeWarning, match="TensorBoard logging is off"):
            first = loggers.TensorBoardLogger(tmp_path / "a")
        assert first.tb is None
        first.log_metrics(1, {"x": 1.0})
        first.close()
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            loggers.TensorBoardLogger(tmp_path / "b").close()  # warned once per process, not per logger
        assert not list(tmp_path.glob("**/events*"))

    def test_progress(self, capsys):
        with Progress(3, enabled=False) as bar:
            bar.update(1, {"SPS": 1000.0})
        assert capsys.readouterr().err == ""
        with Progress(3, enabled=True) as bar:
            bar.update(1, {"SPS": 12345.678, "ret": -0.123456})
            bar.update(2)
        err = capsys.readouterr().err
        assert "SPS=12345.7" in err and "ret=-0.1235" in err and "3/3" in err

    def test_format_value_and_summary(self):
        assert format_value(0.123456) == "0.1235"
        assert format_value(12345.678) == "12345.7"
        assert format_value(1.5e-6) == "1.500e-06"
        assert format_value(3.2e9) == "3.200e+09"
        assert format_value(7) == "7" and format_value(0.0) == "0" and format_value(float("nan")) == "nan"
        assert format_value(torch.tensor(2.5)) == "2.5"
        table = format_summary([
            {"policy": "tagger", "episodic_return": 12.3456, "steps": 1000},
            {"policy": "runner", "episodic_return": -0.5, "steps": 20000},
        ])
        lines = table.splitlines()
        assert lines[0].split() == ["policy", "episodic_return", "steps"]
        assert set(lines[1]) <= {"-", " "}
        assert lines[2].split() == ["tagger", "12.35", "1000"]
        assert lines[3].split() == ["runner", "-0.5", "20000"]
        assert len({len(line) for line in lines}) == 1  # numeric last column right-aligned
        assert format_summary([]) == ""


# ====================================================================== checkpoints
class TestCheckpoint:
    def test_save_load_latest(self, tmp_path):
        run = tmp_path / "run"
        p1 = ckpt.save_checkpoint(run, 1, {"iteration": 1, "w": torch.arange(3)})
        p10 = ckpt.save_checkpoint(run, 10, {"iteration": 10, "w": torch.arange(4), "rng": np.random.get_state()})
        assert p1 == run / "checkpoints" / "ckpt_000001.pt" and p10.name == "ckpt_000010.pt"
        assert sorted(os.listdir(run / "checkpoints")) == ["ckpt_000001.pt", "ckpt_000010.pt", "latest"]
        assert (run / "checkpoints" / "latest").read_text().strip() == "ckpt_000010.pt"
        assert layout.latest_checkpoint(run) == p10
        assert layout.list_checkpoints(run) == [p1, p10]
        state = ckpt.load_checkpoint(run)  # a run dir -> its latest
        assert state["iteration"] == 10 and torch.equal(state["w"], torch.arange(4))
        assert ckpt.load_checkpoint(p1)["iteration"] == 1
        assert ckpt.load_checkpoint(run / "checkpoints")["iteration"] == 10

    def test_failed_save_leaves_nothing_behind(self, tmp_path):
        ckpt.save_checkpoint(tmp_path, 1, {"ok": True})
        with pytest.raises(Exception):
            ckpt.save_checkpoint(tmp_path, 2, {"bad": lambda: None})  # lambdas do not pickle
        assert sorted(os.listdir(tmp_path / "checkpoints")) == ["ckpt_000001.pt", "latest"]
        assert layout.latest_checkpoint(tmp_path).name == "ckpt_000001.pt"

    def test_stale_pointer_falls_back(self, tmp_path):
        ckpt.save_checkpoint(tmp_path, 3, {"i": 3})
        last = ckpt.save_checkpoint(tmp_path, 7, {"i": 7})
        last.unlink()
        assert layout.latest_checkpoint(tmp_path).name == "ckpt_000003.pt"
        (tmp_path / "checkpoints" / "latest").unlink()
        assert ckpt.load_checkpoint(tmp_path)["i"] == 3

    def test_errors(self, tmp_path):
        assert layout.latest_checkpoint(tmp_path) is None
        with pytest.raises(FileNotFoundError, match="has no checkpoint"):
            ckpt.load_checkpoint(tmp_path)
        with pytest.raises(FileNotFoundError, match="no checkpoint or run directory"):
            ckpt.load_checkpoint(tmp_path / "missing")
        with pytest.raises(ValueError, match="non-negative"):
            ckpt.save_checkpoint(tmp_path, -1, {})

    def test_resolve_run_dir(self, tmp_path):
        base = tmp_path / "runs"
        old, new = base / "tag" / "exp" / "20250101-000000", base / "tag" / "exp" / "20250102-000000"
        other = base / "gridworld" / "exp" / "20240101-000000"
        for i, run in enumerate((old, new, other)):
            (run / "checkpoints").mkdir(parents=True)
            (run / "config.yaml").write_text("name: x\n")
        (base / "not_a_run" / "deeper").mkdir(parents=True)
        stamps = {old: 3000, new: 2000, other: 1000}  # "old" was written last (e.g. resumed)
        for run, t in stamps.items():
            for p in (run / "config.yaml", run / "checkpoints", run):
                os.utime(p, (t, t))
        assert dirs.resolve_run_dir("latest", base) == old
        os.utime(new / "config.yaml", (5000, 5000))
        assert dirs.resolve_run_dir("latest", base) == new
        assert set(dirs.find_run_dirs(base)) == {old, new, other}
        assert dirs.resolve_run_dir(str(other), base) == other
        assert dirs.resolve_run_dir("gridworld/exp/20240101-000000", base) == other  # relative to basedir
        with pytest.raises(FileNotFoundError, match="does not exist"):
            dirs.resolve_run_dir(str(tmp_path / "nope"), base)
        with pytest.raises(FileNotFoundError, match="no run directory"):
            dirs.resolve_run_dir("latest", base / "not_a_run")
        with pytest.raises(FileNotFoundError, match="does not exist"):
            dirs.resolve_run_dir("latest", tmp_path / "missing")


# ====================================================================== rendering
class TestRender:
    def test_tag_episode_gif(self, tmp_path):
        from PIL import Image

        from warp_drive.env.rendering import render_tag_episode

        T, N = 6, 5
        rng = np.random.default_rng(0)
        xs, ys = rng.uniform(0, 10, (T + 1, N)), rng.uniform(0, 10, (T + 1, N))
        xs[3:] = xs[3]  # agents standing still: frames must still be kept apart
        ys[3:] = ys[3]
        active = np.ones((T + 1, N), dtype=bool)
        active[4:, 3] = False
        out = render_tag_episode(tmp_path / "sub" / "tag.gif", xs, ys, np.arange(N) < 2, active, 10.0,
                                 title="TagContinuous")
        assert out == tmp_path / "sub" / "tag.gif" and out.stat().st_size > 0
        with Image.open(out) as im:
            assert im.format == "GIF" and im.n_frames == T + 1
            assert im.size == (320, 320)
        out2 = render_tag_episode(tmp_path / "b.gif", xs, ys, np.arange(N) < 2, None, 10.0, fps=4)
        with Image.open(out2) as im:
            assert im.n_frames == T + 1

    def test_gridworld_episode_gif(self, tmp_path):
        from PIL import Image

        from warp_drive.env.rendering import render_gridworld_episode

        T = 4
        xs = np.array([[5, 5, 5, 0], [5, 6, 4, 1], [5, 6, 4, 2], [5, 7, 3, 2], [5, 7, 3, 3]])
        ys = np.array([[5, 5, 5, 0]] * (T + 1))
        out = render_gridworld_episode(tmp_path / "grid.gif", xs, ys, [True, True, True, False], grid_length=10)
        with Image.open(out) as im:
            assert im.n_frames == T + 1

    def test_polylines_episode_gif_draws_each_part_where_it_is(self, tmp_path):
        from PIL import Image

        from warp_drive.env.rendering import POLYLINE_COLORS, render_polylines_episode

        # A vertical bar that moves right one unit a step, over a 0..10 x 0..10 view; 31 steps, 10 frames at most.
        def draw(t):
            return [([t / 3, t / 3], [2.0, 8.0])]

        out = render_polylines_episode(tmp_path / "p.gif", 31, draw, (0, 10, 0, 10), background=[([0, 10], [1, 1])],
                                       max_frames=10)
        red, green, blue = bytes.fromhex(POLYLINE_COLORS[0][1:])
        with Image.open(out) as im:
            assert im.n_frames == 9  # every 4th step (0, 4, ..., 28), and the last (30)
            columns = []
            for index in (0, im.n_frames - 1):
                im.seek(index)
                rgb = np.asarray(im.convert("RGB")).astype(int)
                hit = (rgb == [red, green, blue]).all(axis=2)
                columns.append(np.flatnonzero(hit.any(axis=0)).mean())
                rows = np.flatnonzero(hit.any(axis=1))
                assert rows.max() - rows.min() > 0.5 * rgb.shape[0] * 6 / 10 * 0.8  # the bar spans y 2..8
            width = rgb.shape[1]
            assert columns[0] < 0.1 * width and columns[1] > 0.9 * width  # from x = 0 to x = 10

    def test_polylines_episode_gif_refuses_a_drawing_that_changes_its_parts(self, tmp_path):
        from warp_drive.env.rendering import render_polylines_episode

        with pytest.raises(ValueError, match=r"draw\(1\) returned 2 polylines, draw\(0\) 1"):
            render_polylines_episode(tmp_path / "p.gif", 3, lambda t: [([0, 1], [0, 1])] * (1 + (t > 0)), (0, 1, 0, 1))
        with pytest.raises(ValueError, match="limits"):
            render_polylines_episode(tmp_path / "p.gif", 3, lambda t: [([0, 1], [0, 1])], (0, 0, 0, 1))
        assert not (tmp_path / "p.gif").exists()

    def test_bad_inputs(self, tmp_path):
        from warp_drive.env.rendering import render_gridworld_episode, render_tag_episode

        with pytest.raises(ValueError, match=r"\(T\+1, N\)"):
            render_tag_episode(tmp_path / "x.gif", np.zeros((3, 2)), np.zeros((3, 3)), [1, 0], None, 1.0)
        with pytest.raises(ValueError, match="is_tagger"):
            render_tag_episode(tmp_path / "x.gif", np.zeros((3, 2)), np.zeros((3, 2)), [1, 0, 0], None, 1.0)
        with pytest.raises(ValueError, match="active"):
            render_tag_episode(tmp_path / "x.gif", np.zeros((3, 2)), np.zeros((3, 2)), [1, 0], np.ones((2, 2)), 1.0)
        with pytest.raises(ValueError, match="grid_length"):
            render_gridworld_episode(tmp_path / "x.gif", np.zeros((3, 2)), np.zeros((3, 2)), [1, 0], 2.5)
        assert not (tmp_path / "x.gif").exists()
