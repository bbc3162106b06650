"""WarpDrive 2.7's tutorial 7 (Lightning) as its docs show it, changed in the backend: env_backend="cpu",
accelerator="cpu", and here ``Trainer`` from ``lightning``. Sizes are shrunk the way a user would edit the dict.
The tutorial exactly as written, ``from pytorch_lightning import Trainer`` included, and the other import order
(``pytorch_lightning`` imported after this project's module: a warning with the fix) run in fresh interpreters in
``test_as_written_tutorial7.py``: which Lightning package the module serves is decided at its first import in a
process, so it cannot be tested here, where the order depends on the tests run before.
"""

from __future__ import annotations

import gc
import json
import math
import sys
import warnings

import pytest
import torch

lightning = pytest.importorskip("lightning")

from example_envs.tag_continuous.tag_continuous import TagContinuous  # noqa: E402
from warp_drive.env_wrapper import EnvWrapper  # noqa: E402
from warp_drive.training.config import load_config  # noqa: E402


def tutorial7_run_config(basedir) -> dict:
    """Tutorial 7's ``run_config`` dict, shrunk: 2 taggers, 5 runners, 20-step episodes, 4 envs, 4 iterations."""
    return dict(
        name="tag_continuous",
        env=dict(num_taggers=2, num_runners=5, grid_length=20.0, episode_length=20, max_acceleration=0.1,
                 min_acceleration=-0.1, max_turn=2.35, min_turn=-2.35, num_acceleration_levels=10,
                 num_turn_levels=10, skill_level_tagger=1.0, skill_level_runner=1.0, use_full_observation=False,
                 runner_exits_game_after_tagged=True, num_other_agents_observed=3, tag_reward_for_tagger=10.0,
                 tag_penalty_for_runner=-10.0, end_of_game_reward_for_runner=1.0, tagging_distance=0.02),
        trainer=dict(num_envs=4, train_batch_size=40, num_episodes=8),
        policy=dict(
            runner=dict(to_train=True, algorithm="A2C", gamma=0.98, lr=0.005,
                        model=dict(type="fully_connected", fc_dims=[16, 16], model_ckpt_filepath="")),
            tagger=dict(to_train=True, algorithm="A2C", gamma=0.98, lr=0.002,
                        model=dict(type="fully_connected", fc_dims=[16, 16], model_ckpt_filepath="")),
        ),
        saving=dict(metrics_log_freq=2, model_params_save_freq=2, basedir=str(basedir), name="continuous_tag",
                    tag="example"),
    )


def tutorial7_module(run_config, **extra):
    from warp_drive.training.pytorch_lightning import WarpDriveModule

    env_wrapper = EnvWrapper(TagContinuous(**run_config["env"]), num_envs=run_config["trainer"]["num_envs"],
                             env_backend="cpu")
    policy_tag_to_agent_id_map = {"tagger": list(env_wrapper.env.taggers), "runner": list(env_wrapper.env.runners)}
    extra.setdefault("verbose", True)
    return WarpDriveModule(env_wrapper=env_wrapper, config=run_config,
                           policy_tag_to_agent_id_map=policy_tag_to_agent_id_map, **extra)


@pytest.mark.filterwarnings("ignore:Animation was deleted")
def test_tutorial7_program_trains_with_lightning_trainer(tmp_path, capsys):
    from lightning import Trainer

    from warp_drive.training.pytorch_lightning import CUDACallback, PerfStatsCallback

    run_config = tutorial7_run_config(tmp_path / "runs")
    wd_module = tutorial7_module(run_config, results_dir="tutorial7")
    assert "trainer.train_batch_size 40 // num_envs 4 -> trainer.rollout_length 10" in capsys.readouterr().out
    assert (wd_module.training_batch_size, wd_module.num_iters) == (40, 4)

    # Before training: tutorial 7's animation fetches an episode through the module.
    from example_envs.tag_continuous.generate_rollout_animation import generate_tag_env_rollout_animation

    anim = generate_tag_env_rollout_animation(wd_module, fps=25)
    assert anim is not None
    del anim  # not rendered here (see the filterwarnings mark)
    gc.collect()
    states = wd_module.fetch_episode_states(["loc_x", "loc_y"])
    assert states["loc_x"].shape == (21, 7) and math.isfinite(states["loc_x"][0].sum())

    log_freq = run_config["saving"]["metrics_log_freq"]
    cuda_callback = CUDACallback(module=wd_module)
    perf_stats_callback = PerfStatsCallback(batch_size=wd_module.training_batch_size, num_iters=wd_module.num_iters,
                                            log_freq=log_freq)
    num_episodes = run_config["trainer"]["num_episodes"]
    episode_length = run_config["env"]["episode_length"]
    training_batch_size = run_config["trainer"]["train_batch_size"]
    num_epochs = int(num_episodes * episode_length / training_batch_size)
    trainer = Trainer(accelerator="cpu", devices=1, callbacks=[cuda_callback, perf_stats_callback],
                      max_epochs=num_epochs, reload_dataloaders_every_n_epochs=1,
                      # only to keep the output and directory clean, and to log every rollout:
                      logger=False, enable_checkpointing=False, enable_progress_bar=False,
                      enable_model_summary=False, log_every_n_steps=1, default_root_dir=tmp_path)

    warp = wd_module.warp_trainer
    before = {tag: [q.detach().clone() for q in p.model.parameters()] for tag, p in warp.policies.items()}
    trainer.fit(wd_module)
    out = capsys.readouterr().out

    # Trained: every iteration of the run, one rollout per epoch (WarpDrive's count), both policies updated.
    assert warp.iteration == 4 and warp.env_steps == 160 and trainer.current_epoch == 4
    for tag, p in warp.policies.items():
        after = list(p.model.parameters())
        assert any(not torch.equal(a, b) for a, b in zip(before[tag], after)), tag
        assert all(torch.isfinite(a).all() for a in after), tag
    metrics = {k: float(v) for k, v in trainer.callback_metrics.items()}
    for key in ("losses/policy_loss/tagger", "losses/value_loss/runner", "charts/SPS", "charts/env_steps"):
        assert math.isfinite(metrics[key]), key
    assert metrics["charts/env_steps"] == 160

    # The callbacks ran: envs reset once at train start, throughput printed every 2 iterations and at the end.
    assert cuda_callback.resets == 1 and "Training is complete!" in out
    assert len(perf_stats_callback.history) == 3  # iterations 2 and 4, then the fit's end
    assert "Iteration                               : 4 / 4" in out and "Mean steps per sec (total)" in out
    final = perf_stats_callback.history[-1]
    assert final["Mean steps per sec (total)"] > 0 and final["Mean steps per sec (fit)"] > 0

    # WarpDrive's module outputs: the metrics block, results.json and the model files every 2 iterations.
    save_dir = wd_module.save_dir
    assert save_dir == tmp_path / "runs" / "continuous_tag" / "example" / "tutorial7"
    lines = [json.loads(line) for line in (save_dir / "results.json").read_text().splitlines()]
    assert [line["Iterations Completed"] for line in lines] == [2, 4]
    assert {"tagger_80.state_dict", "runner_160.state_dict"} <= {p.name for p in save_dir.iterdir()}
    assert "Metrics for policy 'tagger'" in out

    states = wd_module.fetch_episode_states(["loc_x"])  # after training, as the tutorial's second animation
    assert states["loc_x"].shape == (21, 7)
    wd_module.graceful_close()
    with pytest.raises(RuntimeError, match="graceful_close"):
        wd_module.fetch_episode_states(["loc_x"])


def test_cuda_callback_resets_the_envs_at_train_start(tmp_path):
    from lightning import Trainer

    from warp_drive.training.pytorch_lightning import CUDACallback

    run_config = tutorial7_run_config(tmp_path)
    run_config["trainer"]["num_episodes"] = 2  # one iteration
    wd_module = tutorial7_module(run_config, verbose=False)
    warp = wd_module.warp_trainer
    loc_x = warp.env.data_manager.device_data("loc_x")  # the device array itself (cpu executor: host memory)

    seen = {}

    class Probe(lightning.pytorch.Callback):  # runs after CUDACallback's on_train_start: what the first rollout sees
        def on_train_start(self, trainer, pl_module):
            seen["loc_x"] = loc_x.clone()

    loc_x.fill_(123.0)
    Trainer(accelerator="cpu", devices=1, callbacks=[CUDACallback(wd_module), Probe()], max_epochs=1, logger=False,
            enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False,
            default_root_dir=tmp_path).fit(wd_module)
    assert not (seen["loc_x"] == 123.0).any()  # restored to the reset state before the first rollout


def test_no_warning_without_pytorch_lightning(monkeypatch):
    import warp_drive.training.pytorch_lightning as compat

    monkeypatch.delitem(sys.modules, "pytorch_lightning", raising=False)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert compat.warn_if_pytorch_lightning_is_imported() is False


def test_warpdrive_form_arguments_are_checked(tmp_path):
    from warp_drive.training.pytorch_lightning import CUDACallback, PerfStatsCallback, WarpDriveModule

    run_config = tutorial7_run_config(tmp_path)
    with pytest.raises(TypeError, match="needs its env"):
        WarpDriveModule(config=run_config)
    with pytest.raises(TypeError, match="needs config="):
        WarpDriveModule(env_wrapper=EnvWrapper(TagContinuous(**run_config["env"]), num_envs=2, env_backend="cpu"))
    with pytest.raises(TypeError, match="goes with env_wrapper="):
        WarpDriveModule(load_config("cartpole"), policy_tag_to_agent_id_map={"shared": [0]})
    with pytest.raises(TypeError, match="WarpDriveModule"):
        CUDACallback(module=object())
    with pytest.raises(ValueError, match="batch_size"):
        PerfStatsCallback(batch_size=None, num_iters=3)
    with pytest.raises(ValueError, match="rollouts_per_epoch"):
        tutorial7_module(run_config, verbose=False, rollouts_per_epoch=0)

    # WarpDrive's positional order also works; a wrong batch_size is refused when training starts.
    env_wrapper = EnvWrapper(TagContinuous(**run_config["env"]), num_envs=4, env_backend="cpu")
    module = WarpDriveModule(env_wrapper, run_config, {"tagger": list(env_wrapper.env.taggers),
                                                       "runner": list(env_wrapper.env.runners)}, verbose=False)
    assert module.cuda_envs is env_wrapper and module.rollouts_per_epoch == 1
    fit = lightning.Trainer(accelerator="cpu", devices=1, max_epochs=1, logger=False, enable_checkpointing=False,
                            enable_progress_bar=False, enable_model_summary=False, default_root_dir=tmp_path,
                            callbacks=[PerfStatsCallback(batch_size=1000, num_iters=4)])
    with pytest.raises(ValueError, match="module.training_batch_size"):
        fit.fit(module)


def test_our_run_config_through_the_warpdrive_keywords(tmp_path):
    """``config=`` may also be our RunConfig; ``rollouts_per_epoch`` sets the epoch size."""
    from warp_drive.training.pytorch_lightning import WarpDriveModule

    config = load_config("tag_continuous_small", ["trainer.backend=cpu", "trainer.num_envs=2",
                                                  "trainer.rollout_length=5", "trainer.total_steps=40",
                                                  "env.config.episode_length=10",
                                                  f"saving.basedir={tmp_path}"])
    from warp_drive.env_wrapper import EnvWrapper as Wrapper
    from warp_drive.training.run import build

    env = build(config).env  # the env the config describes, wrapped as a user would
    assert isinstance(env, Wrapper)
    module = WarpDriveModule(env_wrapper=env, config=config, verbose=False, rollouts_per_epoch=2)
    fit = lightning.Trainer(accelerator="cpu", devices=1, max_epochs=10, logger=False, enable_checkpointing=False,
                            enable_progress_bar=False, enable_model_summary=False, default_root_dir=tmp_path)
    fit.fit(module)
    assert module.warp_trainer.iteration == 4 and fit.current_epoch == 2  # 4 rollouts, 2 per epoch; then it stops
