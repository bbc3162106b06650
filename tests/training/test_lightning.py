"""The Lightning integration on the cpu executor: same results as the plain Trainer, logs, checkpoints, DDP.

Every run here is deterministic (cpu executor, one seed), so a Lightning run
and a plain ``Trainer.iterate()`` run of the same config must produce the same
parameters, losses and episodic returns; the tolerance only absorbs float
round-off.
"""

from __future__ import annotations

import csv
import importlib
import json
import math
import subprocess
import sys
import textwrap

import pytest
import torch

lightning = pytest.importorskip("lightning")
from lightning.pytorch.callbacks import Callback, ModelCheckpoint  # noqa: E402
from lightning.pytorch.loggers import CSVLogger  # noqa: E402

from warp_drive.training.runs.callbacks import Callback as RunCallback  # noqa: E402
from warp_drive.training.runs.dirs import RunLock  # noqa: E402
from warp_drive.training.config import ConfigError, RunError, load_config  # noqa: E402
from warp_drive.training.lightning import RolloutDataModule, WarpDriveCallbacks, WarpDriveModule  # noqa: E402
from warp_drive.training.run import build, evaluate, train  # noqa: E402

NUM_ENVS, ROLLOUT = 8, 16
COMPARED = ("losses/", "charts/episodic_return/", "charts/episodes/", "charts/learning_rate/")


def config(name="cartpole", iterations=3, *extra):
    # CartPole's shipped settings are tuned for time to solved (an early stop): these tests count
    # gradient steps and rows of a fixed-length run, so they pin 4 epochs and no early stop.
    pinned = ["policy.shared.num_epochs=4", "trainer.stop_at_return=null",
              "trainer.stop_eval_episodes=null"] if name == "cartpole" else []
    return load_config(name, ["trainer.backend=cpu", f"trainer.num_envs={NUM_ENVS}",
                              f"trainer.rollout_length={ROLLOUT}",
                              f"trainer.total_steps={NUM_ENVS * ROLLOUT * iterations}", *pinned, *extra])


def tag_config(iterations=2):
    # Short episodes so that some end within the run; both sides trained: two optimizers.
    return config("tag_continuous_small", iterations, "env.config.episode_length=10", "policy.runner.to_train=true")


class Recorder(Callback):
    """What a user callback sees: the logged metrics after each rollout, and every backward pass."""

    def __init__(self):
        self.rows: list[dict[str, float]] = []
        self.backward_calls = 0
        self.batches: list[tuple[int, list[str]]] = []

    def on_before_backward(self, trainer, pl_module, loss):
        self.backward_calls += 1

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        self.rows.append({k: float(v) for k, v in trainer.callback_metrics.items()})
        self.batches.append((batch.iteration, sorted(batch.policies)))


def fit(module, tmp_path, datamodule=None, ckpt_path=None, callbacks=(), **options):
    recorder = Recorder()
    settings = dict(accelerator="cpu", devices=1, max_epochs=1, logger=False, enable_checkpointing=False,
                    enable_progress_bar=False, enable_model_summary=False, log_every_n_steps=1,
                    default_root_dir=tmp_path)
    settings.update(options)
    trainer = lightning.Trainer(callbacks=[recorder, *callbacks], **settings)
    trainer.fit(module, datamodule=datamodule, ckpt_path=ckpt_path)
    return trainer, recorder.rows, recorder


def plain_run(cfg, log_every=1):
    """The plain loop, with episode metrics gathered every ``log_every`` iterations (``metrics_log_freq``)."""
    trainer, rows = build(cfg), []
    while trainer.iteration < trainer.num_iterations:
        metrics = trainer.iterate()
        if trainer.iteration % log_every == 0:
            rows.append({**metrics, **trainer.episode_metrics()})
    return trainer, rows


def assert_same_metrics(plain_rows, lightning_rows):
    assert len(plain_rows) == len(lightning_rows)
    for plain, logged in zip(plain_rows, lightning_rows):
        keys = [k for k in plain if k.startswith(COMPARED)]
        assert keys and all(k in logged for k in keys), sorted(set(keys) - set(logged))
        for key in keys:
            assert logged[key] == pytest.approx(plain[key], rel=1e-6, abs=1e-9, nan_ok=True), key


def assert_same_parameters(plain, warp):
    for tag, policy in plain.policies.items():
        for (name, p), q in zip(policy.model.named_parameters(), warp.policies[tag].model.parameters()):
            torch.testing.assert_close(q, p, rtol=1e-6, atol=1e-7, msg=f"{tag}.{name}")


def test_cartpole_matches_the_plain_trainer_and_logs_to_csv(tmp_path):
    plain, plain_rows = plain_run(config())
    module = WarpDriveModule(config())
    trainer, rows, recorder = fit(module, tmp_path, datamodule=RolloutDataModule(module),
                                  logger=CSVLogger(tmp_path / "logs", name="cartpole"))
    warp = module.warp_trainer
    assert warp.iteration == 3 and warp.env_steps == plain.env_steps
    assert_same_parameters(plain, warp)
    assert_same_metrics(plain_rows, rows)
    assert any(not math.isnan(r["charts/episodic_return/shared"]) for r in rows)  # episodes did end
    # Callbacks saw every gradient step of the PPO update; global_step counts optimizer steps.
    assert recorder.backward_calls == trainer.global_step == 3 * 4 * 4  # iterations x epochs x minibatches
    assert recorder.batches == [(0, ["shared"]), (1, ["shared"]), (2, ["shared"])]  # each batch is a rollout
    # The CSV logger got one row per rollout with the plain trainer's keys and values.
    with open(trainer.logger.log_dir + "/metrics.csv") as handle:
        written = list(csv.DictReader(handle))
    assert len(written) == 3
    for key in ("losses/policy_loss/shared", "charts/episodic_return/shared", "charts/SPS", "charts/env_steps",
                "time/env_step"):
        assert key in written[0], key
    assert [float(r["charts/env_steps"]) for r in written] == [NUM_ENVS * ROLLOUT * i for i in (1, 2, 3)]
    assert [float(r["losses/value_loss/shared"]) for r in written] == pytest.approx(
        [r["losses/value_loss/shared"] for r in plain_rows], rel=1e-6)


@pytest.mark.slow  # trains twice (over ~1.5 s: the full suite, not the fast tier)
def test_a_recurrent_per_agent_policy_matches_the_plain_trainer(tmp_path):
    """GRU states on the device and per-agent weights go through Lightning's loop unchanged."""
    extra = ("policy.shared.model.type=gru", "policy.shared.share=agent", "env.config.episode_length=5")
    plain, plain_rows = plain_run(config("simple_spread_mappo", 3, *extra))
    module = WarpDriveModule(config("simple_spread_mappo", 3, *extra))
    fit(module, tmp_path, datamodule=RolloutDataModule(module))
    assert module.warp_trainer.algorithm.states["shared"].recurrence.hidden is not None
    assert_same_parameters(plain, module.warp_trainer)
    assert torch.equal(plain.algorithm.states["shared"].recurrence.hidden, module.warp_trainer.algorithm.states["shared"].recurrence.hidden)


def test_two_policy_tag_from_a_built_trainer_matches_the_plain_trainer(tmp_path):
    plain, plain_rows = plain_run(tag_config())
    module = WarpDriveModule(build(tag_config()))  # an existing Trainer; the module's own data loader
    trainer, rows, recorder = fit(module, tmp_path)
    assert_same_parameters(plain, module.warp_trainer)
    assert_same_metrics(plain_rows, rows)
    assert {"losses/policy_loss/tagger", "losses/policy_loss/runner"} <= set(rows[-1])
    assert recorder.batches == [(0, ["runner", "tagger"]), (1, ["runner", "tagger"])]
    assert not math.isnan(rows[-1]["charts/episodic_return/tagger"])


def test_log_every_n_steps_aggregates_episodes_like_metrics_log_freq(tmp_path):
    _, plain_rows = plain_run(config(iterations=4), log_every=2)
    module = WarpDriveModule(config(iterations=4))
    trainer, _, _ = fit(module, tmp_path, log_every_n_steps=2, logger=CSVLogger(tmp_path, name="every2"))
    with open(trainer.logger.log_dir + "/metrics.csv") as handle:
        written = list(csv.DictReader(handle))
    assert [float(r["charts/env_steps"]) for r in written] == [NUM_ENVS * ROLLOUT * i for i in (2, 4)]
    for plain, row in zip(plain_rows, written):  # the mean over every episode of the two rollouts
        assert float(row["charts/episodes/shared"]) == plain["charts/episodes/shared"]
        assert float(row["charts/episodic_return/shared"]) == pytest.approx(plain["charts/episodic_return/shared"])


def test_checkpoint_resumes_exactly_and_loads_into_a_plain_trainer(tmp_path):
    saver = ModelCheckpoint(dirpath=tmp_path / "ckpt", every_n_train_steps=2 * 16, save_top_k=-1)
    module = WarpDriveModule(config(iterations=4))
    _, rows, _ = fit(module, tmp_path, callbacks=[saver], enable_checkpointing=True)
    middle = tmp_path / "ckpt" / "epoch=0-step=32.ckpt"  # after rollout 2 of 4
    assert middle.is_file()

    resumed = WarpDriveModule(config(iterations=4))
    _, resumed_rows, _ = fit(resumed, tmp_path, ckpt_path=str(middle))
    assert resumed.warp_trainer.iteration == 4
    assert_same_metrics(rows[2:], resumed_rows)
    assert_same_parameters(module.warp_trainer, resumed.warp_trainer)

    # The checkpoint's warp_drive entry is a plain Trainer state: the plain loop continues the same way.
    plain = build(config(iterations=4))
    plain.load_state_dict(torch.load(middle, weights_only=True)["warp_drive"])
    later = []
    while plain.iteration < plain.num_iterations:
        later.append({**plain.iterate(), **plain.episode_metrics()})
    assert_same_metrics(later, resumed_rows)
    assert_same_parameters(plain, resumed.warp_trainer)


def test_bad_setups_fail_with_a_clear_message(tmp_path):
    with pytest.raises(TypeError, match="RunConfig"):
        WarpDriveModule({"name": "cartpole"})
    with pytest.raises(TypeError, match="WarpDriveModule"):
        RolloutDataModule(config())
    with pytest.raises(RuntimeError, match="fit"):
        WarpDriveModule(config()).warp_trainer
    with pytest.raises(ValueError, match="precision='32-true'"):
        fit(WarpDriveModule(config()), tmp_path, precision="bf16-mixed")
    pycuda = load_config("cartpole", ["trainer.backend=pycuda"])
    with pytest.raises(ValueError, match="accelerator='gpu'"):
        fit(WarpDriveModule(pycuda), tmp_path)
    module = WarpDriveModule(config(iterations=1))
    fit(module, tmp_path)
    with pytest.raises(KeyError, match="not saved by a WarpDriveModule"):
        module.on_load_checkpoint({"state_dict": {}})


def test_the_backend_must_keep_its_arrays_where_lightning_trains():
    """Matched by ``capabilities.memory``, not by name: both shapes of the cpu
    executor go with accelerator='cpu', pycuda with 'gpu'; ``auto`` picks the device's."""
    def module(backend):
        base = config()
        return WarpDriveModule(base.model_copy(update={"trainer": base.trainer.model_copy(update={"backend": backend})}))

    cpu, cuda = torch.device("cpu"), torch.device("cuda", 0)
    assert module("auto")._config_for(cpu).trainer.backend == "cpu"
    assert module("auto")._config_for(cuda).trainer.backend == "pycuda"
    for backend in ("cpu", "cpu-gpu"):
        assert module(backend)._config_for(cpu).trainer.backend == backend
        with pytest.raises(ValueError, match=f"backend '{backend}' .* accelerator='cpu'"):
            module(backend)._config_for(cuda)
    assert module("pycuda")._config_for(cuda).trainer.backend == "pycuda"
    with pytest.raises(ValueError, match="accelerator='gpu'"):
        module("pycuda")._config_for(cpu)
    with pytest.raises(ValueError, match="accelerator='cpu' or accelerator='gpu'"):
        module("auto")._config_for(torch.device("meta"))


def test_without_lightning_the_import_error_says_what_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "lightning", None)  # what `import lightning` sees when it is not installed
    monkeypatch.delitem(sys.modules, "warp_drive.training.lightning")
    with pytest.raises(ImportError, match=r"pip install 'warp-drive\[lightning\]'"):
        importlib.import_module("warp_drive.training.lightning")


class Calls(RunCallback):
    """A warp_drive callback that records which hook ran, at which iteration or step."""

    def __init__(self, fail_at: int | None = None):
        self.calls: list[tuple] = []
        self.fail_at = fail_at

    def on_train_start(self, loop):
        self.calls.append(("start", loop.trainer.iteration, loop.resumed))

    def on_iteration_end(self, loop, metrics):
        self.calls.append(("iteration", loop.trainer.iteration, "charts/SPS" in metrics))
        if loop.trainer.iteration == self.fail_at:
            raise RuntimeError(f"stop at iteration {self.fail_at}")

    def on_log(self, loop, metrics):
        self.calls.append(("log", loop.global_step, sorted(metrics) == sorted(loop.local_metrics)))

    def on_checkpoint(self, loop, state):
        self.calls.append(("checkpoint", state["iteration"]))

    def on_train_end(self, loop):
        self.calls.append(("end", loop.elapsed > 0))

    def on_exception(self, loop, error):
        self.calls.append(("exception", str(error)))


def run_config(tmp_path, iterations=3):
    return config("cartpole", iterations, f"saving.basedir={tmp_path / 'runs'}", "saving.metrics_log_freq=1",
                  "saving.model_params_save_freq=2")


def csv_rows(path):
    with open(path, newline="") as handle:
        return list(csv.DictReader(handle))


def test_warp_drive_callbacks_write_what_warp_drive_train_writes(tmp_path, capsys):
    """The same callbacks, hooks and files from a Lightning fit as from ``warp-drive train``, with equal values."""
    plain_calls, calls = Calls(), Calls()
    plain_dir = train(run_config(tmp_path), progress=False, callbacks=[plain_calls])
    run_dir = tmp_path / "lightning_run"
    module = WarpDriveModule(run_config(tmp_path))
    fit(module, tmp_path, callbacks=[WarpDriveCallbacks(calls, run_dir=run_dir)])

    assert calls.calls == plain_calls.calls  # every hook, in the same order, at the same iterations and steps
    assert [c[0] for c in calls.calls].count("checkpoint") == 2 and calls.calls[-1] == ("end", True)
    for name in ("config.yaml", "provenance.yaml", "metrics.csv", "checkpoints/latest"):
        assert (run_dir / name).exists(), name
    assert (run_dir / "config.yaml").read_text() == (plain_dir / "config.yaml").read_text()
    assert sorted(p.name for p in (run_dir / "checkpoints").iterdir()) == sorted(
        p.name for p in (plain_dir / "checkpoints").iterdir())
    plain_rows, rows = csv_rows(plain_dir / "metrics.csv"), csv_rows(run_dir / "metrics.csv")
    assert list(rows[0]) == list(plain_rows[0]) and len(rows) == len(plain_rows) == 3
    for plain, row in zip(plain_rows, rows):
        for key in plain:
            if key.startswith(COMPARED) or key == "global_step":
                expected = float(plain[key]) if plain[key] else None
                got = float(row[key]) if row[key] else None
                assert got == (None if expected is None else pytest.approx(expected, rel=1e-6, abs=1e-9)), key
    # warp-drive evaluate reads the Lightning run as it reads the plain one: the same policy, the same returns.
    assert evaluate(str(run_dir), episodes=4)["returns"]["shared"] == pytest.approx(
        evaluate(str(plain_dir), episodes=4)["returns"]["shared"], rel=1e-5)
    assert capsys.readouterr().out.count("Mean return per agent over one full episode") == 2  # both summaries


def test_warp_drive_callbacks_continue_a_resumed_fit_in_its_run_directory(tmp_path):
    run_dir = tmp_path / "run"
    saver = ModelCheckpoint(dirpath=tmp_path / "ckpt", every_n_train_steps=2 * 16, save_top_k=-1)
    fit(WarpDriveModule(run_config(tmp_path, 4)), tmp_path, enable_checkpointing=True,
        callbacks=[saver, WarpDriveCallbacks(run_dir=run_dir)])
    first = csv_rows(run_dir / "metrics.csv")
    steps = [NUM_ENVS * ROLLOUT * i for i in (1, 2, 3, 4)]
    assert [int(r["global_step"]) for r in first] == steps

    with pytest.raises(RunError, match="exists and is not empty"):  # a fresh fit may not mix into it
        fit(WarpDriveModule(run_config(tmp_path, 4)), tmp_path, callbacks=[WarpDriveCallbacks(run_dir=run_dir)])
    calls = Calls()
    fit(WarpDriveModule(run_config(tmp_path, 4)), tmp_path, ckpt_path=str(tmp_path / "ckpt" / "epoch=0-step=32.ckpt"),
        callbacks=[WarpDriveCallbacks(calls, run_dir=run_dir)])
    assert calls.calls[0] == ("start", 2, True)
    again = csv_rows(run_dir / "metrics.csv")
    assert [int(r["global_step"]) for r in again] == steps  # rows 3 and 4 replaced, not duplicated
    for before, after in zip(first, again):
        assert float(after["losses/value_loss/shared"]) == pytest.approx(float(before["losses/value_loss/shared"]),
                                                                         rel=1e-6)


def test_warp_drive_callbacks_hear_of_a_failure_and_free_the_run_directory(tmp_path):
    run_dir, calls = tmp_path / "run", Calls(fail_at=2)
    with pytest.raises(RuntimeError, match="stop at iteration 2"):
        fit(WarpDriveModule(run_config(tmp_path)), tmp_path, callbacks=[WarpDriveCallbacks(calls, run_dir=run_dir)])
    assert calls.calls[-1] == ("exception", "stop at iteration 2")
    assert "end" not in [c[0] for c in calls.calls]
    RunLock(run_dir).acquire().release()  # the lock was released
    with pytest.raises(ConfigError, match="WarpDriveCallbacks argument 0: not a callback"):
        WarpDriveCallbacks(Recorder())  # a Lightning callback goes to lightning.Trainer(callbacks=), not here


DDP_SCRIPT = textwrap.dedent('''
    """Lightning DDP on 2 CPU processes, then the plain data-parallel Trainer in the same process group."""
    import hashlib, json, sys
    import lightning
    from lightning.pytorch.callbacks import Callback
    from warp_drive.training.config import load_config
    from warp_drive.training.runs.callbacks import CheckpointSaver, MetricsLogger
    from warp_drive.training.lightning import WarpDriveCallbacks, WarpDriveModule
    from warp_drive.training.run import build

    OVERRIDES = {overrides!r}

    def digest(trainer):
        h = hashlib.sha256()
        for name, t in sorted(trainer.policies["shared"].model.state_dict().items()):
            h.update(name.encode()); h.update(t.detach().cpu().contiguous().numpy().tobytes())
        return h.hexdigest()

    class Rows(Callback):
        rows = []
        def on_train_batch_end(self, trainer, module, outputs, batch, batch_idx):
            self.rows.append({{k: float(v) for k, v in trainer.callback_metrics.items()}})

    module = WarpDriveModule(load_config("cartpole", OVERRIDES))
    fit = lightning.Trainer(accelerator="cpu", devices=2, strategy="ddp", max_epochs=1, logger=False,
                            enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False,
                            log_every_n_steps=1, default_root_dir=sys.argv[1],
                            callbacks=[Rows(), WarpDriveCallbacks(MetricsLogger(), CheckpointSaver(), defaults=False,
                                                                  run_dir=f"{{sys.argv[1]}}/run")])
    fit.fit(module)
    dist = module.warp_trainer.distributed
    plain, plain_rows = build(load_config("cartpole", OVERRIDES), dist), []
    while plain.iteration < plain.num_iterations:
        metrics = dist.reduce_metrics(plain.iterate())
        plain_rows.append({{**metrics, **dist.reduce_episode_metrics(plain.episode_metrics())}})
    with open(f"{{sys.argv[1]}}/rank{{dist.rank}}.json", "w") as out:
        json.dump({{"lightning": digest(module.warp_trainer), "plain": digest(plain), "rows": Rows.rows,
                   "plain_rows": plain_rows, "world_size": fit.world_size}}, out)
''')


@pytest.mark.slow
def test_ddp_on_two_cpu_processes_matches_the_plain_data_parallel_trainer(tmp_path):
    overrides = ["trainer.backend=cpu", f"trainer.num_envs={NUM_ENVS}", f"trainer.rollout_length={ROLLOUT}",
                 f"trainer.total_steps={NUM_ENVS * ROLLOUT * 2}"]
    script = tmp_path / "ddp.py"
    script.write_text(DDP_SCRIPT.format(overrides=overrides))
    result = subprocess.run([sys.executable, str(script), str(tmp_path)], cwd=tmp_path, capture_output=True,
                            text=True, timeout=240)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    ranks = [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in range(2)]
    assert ranks[0]["world_size"] == 2
    # One model on both ranks, and the same one the plain torchrun-style data-parallel loop trains.
    assert ranks[0]["lightning"] == ranks[1]["lightning"] == ranks[0]["plain"] == ranks[1]["plain"]
    for rank in ranks:  # metrics aggregated over ranks, as warp-drive train --nproc 2 logs them
        assert_same_metrics(rank["plain_rows"], rank["rows"])
    assert ranks[0]["rows"][-1]["charts/env_steps"] == 2 * NUM_ENVS * ROLLOUT * 2
    # warp_drive's own callbacks under Lightning DDP: rank 0 wrote the aggregated metrics and every rank's state.
    written = csv_rows(tmp_path / "run" / "metrics.csv")
    assert [int(r["global_step"]) for r in written] == [2 * NUM_ENVS * ROLLOUT * i for i in (1, 2)]
    for row, logged in zip(written, ranks[0]["rows"]):
        assert float(row["losses/value_loss/shared"]) == pytest.approx(logged["losses/value_loss/shared"], rel=1e-6)
    from warp_drive.training.runs.checkpoint import load_latest
    _, state = load_latest(tmp_path / "run")
    assert state["iteration"] == 2 and len(state["ranks"]) == 2
