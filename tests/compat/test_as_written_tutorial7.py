"""WarpDrive 2.7.1's tutorial 7 (training with PyTorch Lightning) as written: ``from pytorch_lightning import Trainer``
fits our ``WarpDriveModule`` (issue 30).

:func:`program` makes the tutorial's calls with its arguments in its order, changed only as issue 30 allows
(``env_backend="cpu"``; ``accelerator="gpu"``, the GPU assert and the shell lines dropped) and in sizes (2 taggers,
5 runners, 20-step episodes, 4 envs, 16-unit layers, 2 iterations = 2 epochs; results under a temporary directory
instead of ``/tmp``). It runs in a fresh interpreter, as the notebook's kernel does: which Lightning package
``warp_drive.training.pytorch_lightning`` serves is decided by what the process imported before it, so a pytest
worker that imported either package already is no place to check it.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

# Not imported here: the program's process imports this file, and must import the Lightning packages itself.
pytestmark = [pytest.mark.skipif(importlib.util.find_spec(name) is None, reason=f"tutorial 7 needs {name}: {hint}")
              for name, hint in (("lightning", "pip install 'warp-drive[lightning]'"),
                                 ("pytorch_lightning", "pip install 'pytorch-lightning>=2.2'"))]

NO_FFMPEG = ("anim.to_html5_video() not called: no ffmpeg on PATH and imageio-ffmpeg is not installed "
             "(pip install 'warp-drive[warpdrive]')")


def have_ffmpeg() -> bool:
    import shutil

    return shutil.which("ffmpeg") is not None or importlib.util.find_spec("imageio_ffmpeg") is not None


def program(workdir: Path) -> dict:
    """Tutorial 7's cells in order (see the module docstring); returns what the test checks."""
    facts: dict = {"videos": []}

    import logging

    from example_envs.tag_continuous.generate_rollout_animation import generate_tag_env_rollout_animation
    from example_envs.tag_continuous.tag_continuous import TagContinuous
    from IPython.display import HTML
    from pytorch_lightning import Trainer

    from warp_drive.env_wrapper import EnvWrapper
    from warp_drive.training.pytorch_lightning import CUDACallback, PerfStatsCallback, WarpDriveModule

    import pytorch_lightning

    assert pytorch_lightning.__version__ >= "1.8.0", "lightning versions < 1.8 have a few different callbacks"

    logging.getLogger().setLevel(logging.ERROR)

    run_config = dict(
        name="tag_continuous",
        env=dict(num_taggers=2, num_runners=5, grid_length=20.0, episode_length=20, max_acceleration=0.1,
                 min_acceleration=-0.1, max_turn=2.35, min_turn=-2.35, num_acceleration_levels=10,
                 num_turn_levels=10, skill_level_tagger=1.0, skill_level_runner=1.0, use_full_observation=False,
                 runner_exits_game_after_tagged=True, num_other_agents_observed=3, tag_reward_for_tagger=10.0,
                 tag_penalty_for_runner=-10.0, end_of_game_reward_for_runner=1.0, tagging_distance=0.02),
        trainer=dict(num_envs=4, train_batch_size=40, num_episodes=4),
        policy=dict(
            runner=dict(to_train=True, algorithm="A2C", gamma=0.98, lr=0.005,
                        model=dict(type="fully_connected", fc_dims=[16, 16], model_ckpt_filepath="")),
            tagger=dict(to_train=True, algorithm="A2C", gamma=0.98, lr=0.002,
                        model=dict(type="fully_connected", fc_dims=[16, 16], model_ckpt_filepath="")),
        ),
        saving=dict(metrics_log_freq=1, model_params_save_freq=5000, basedir=str(workdir / "runs"),
                    name="continuous_tag", tag="example"),
    )

    env_wrapper = EnvWrapper(TagContinuous(**run_config["env"]), num_envs=run_config["trainer"]["num_envs"],
                             env_backend="cpu")
    policy_tag_to_agent_id_map = {
        "tagger": list(env_wrapper.env.taggers),
        "runner": list(env_wrapper.env.runners),
    }
    wd_module = WarpDriveModule(env_wrapper=env_wrapper, config=run_config,
                                policy_tag_to_agent_id_map=policy_tag_to_agent_id_map, verbose=True)
    facts["module_is_pytorch_lightning"] = isinstance(wd_module, pytorch_lightning.LightningModule)

    def show_rollout():
        anim = generate_tag_env_rollout_animation(wd_module, fps=25)
        facts["frames"] = len(list(anim.new_frame_seq()))
        if have_ffmpeg():
            html = HTML(anim.to_html5_video())
            facts["videos"].append(html.data[:200])
        else:
            facts["video_skipped"] = NO_FFMPEG

    show_rollout()

    log_freq = run_config["saving"]["metrics_log_freq"]
    cuda_callback = CUDACallback(module=wd_module)
    perf_stats_callback = PerfStatsCallback(batch_size=wd_module.training_batch_size, num_iters=wd_module.num_iters,
                                            log_freq=log_freq)
    num_gpus = 1
    num_episodes = run_config["trainer"]["num_episodes"]
    episode_length = run_config["env"]["episode_length"]
    training_batch_size = run_config["trainer"]["train_batch_size"]
    num_epochs = int(num_episodes * episode_length / training_batch_size)
    trainer = Trainer(devices=num_gpus, callbacks=[cuda_callback, perf_stats_callback], max_epochs=num_epochs,
                      reload_dataloaders_every_n_epochs=1)

    warp = wd_module.warp_trainer
    before = {tag: [q.detach().clone() for q in p.model.parameters()] for tag, p in warp.policies.items()}
    trainer.fit(wd_module)
    facts.update(num_epochs=num_epochs, iteration=warp.iteration, env_steps=warp.env_steps,
                 current_epoch=trainer.current_epoch, resets=cuda_callback.resets,
                 perf_reports=len(perf_stats_callback.history),
                 trained={tag: any(not b.equal(a) for b, a in zip(before[tag], p.model.parameters()))
                          for tag, p in warp.policies.items()},
                 callback_metrics=sorted(trainer.callback_metrics))

    show_rollout()

    wd_module.graceful_close()
    return facts


def run_program(tmp_path: Path, code: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": "", "PYTHONPATH": os.pathsep.join(
        [str(Path(__file__).parent), *filter(None, [os.environ.get("PYTHONPATH")])])}
    return subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=300)


@pytest.mark.slow
def test_tutorial7_as_written_fits_with_pytorch_lightning_trainer(tmp_path):
    code = ("import json, pathlib, test_as_written_tutorial7 as t\n"
            "facts = t.program(pathlib.Path.cwd())\n"
            "pathlib.Path('facts.json').write_text(json.dumps(facts))\n")
    done = run_program(tmp_path, code)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-5000:]
    facts = json.loads((tmp_path / "facts.json").read_text())

    # The module the tutorial built is a pytorch_lightning module, and pytorch_lightning's Trainer trained it:
    # two epochs of one rollout each (WarpDrive's epoch), both policies updated, the callbacks ran.
    assert facts["module_is_pytorch_lightning"] is True
    assert (facts["num_epochs"], facts["iteration"], facts["env_steps"], facts["current_epoch"]) == (2, 2, 80, 2)
    assert facts["trained"] == {"tagger": True, "runner": True}
    assert facts["resets"] == 1 and facts["perf_reports"] == 3  # every iteration (log_freq 1), then the fit's end
    assert {"charts/SPS", "losses/policy_loss/tagger", "charts/env_steps"} <= set(facts["callback_metrics"])
    assert "Training is complete!" in done.stdout and "Speed performance stats" in done.stdout
    assert "Metrics for policy 'tagger'" in done.stdout  # WarpDrive's printed metrics block (verbose=True)
    # Lightning's defaults wrote its logs and checkpoint where the program ran, as in the notebook.
    assert list((tmp_path / "lightning_logs").glob("version_0/checkpoints/*.ckpt"))
    assert "must be a `LightningModule`" not in done.stderr and "is a lightning.pytorch class" not in done.stderr

    # The animation before and after training (one frame per step and the reset state), as HTML5 video.
    assert facts["frames"] == 21
    if "video_skipped" in facts:
        pytest.skip(facts["video_skipped"])
    assert len(facts["videos"]) == 2
    assert all(v.startswith("<video") and 'type="video/mp4"' in v for v in facts["videos"])


@pytest.mark.slow
def test_imported_before_pytorch_lightning_it_serves_lightning_and_warns_at_the_module(tmp_path):
    """The other import order: this module's classes are lightning.pytorch's (``lightning.Trainer`` fits them, as
    tests/compat/test_compat_lightning.py shows); building a module once pytorch_lightning is imported warns with
    the fix, before pytorch_lightning.Trainer would refuse it."""
    code = """
import json, pathlib, warnings
import lightning.pytorch
import warp_drive.training.pytorch_lightning as wd_pl
from warp_drive.compat.lightning import lightning_api
before = wd_pl.LIGHTNING_PACKAGE
quiet = wd_pl.warn_if_pytorch_lightning_is_imported()
import pytorch_lightning
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    late = wd_pl.warn_if_pytorch_lightning_is_imported()
other = lightning_api("pytorch_lightning")
from warp_drive.training.lightning.module import WarpDriveModuleMixin, over_lightning_package
class Bad(WarpDriveModuleMixin, lightning.pytorch.LightningModule):
    def setup(self, stage):
        pass
try:
    over_lightning_package(Bad, "pytorch_lightning")
    refused = None
except TypeError as exc:
    refused = str(exc)
pathlib.Path("facts.json").write_text(json.dumps(dict(
    package=before, quiet=quiet, late=late, messages=[str(w.message) for w in caught],
    lightning_module=issubclass(wd_pl.WarpDriveModule, lightning.pytorch.LightningModule),
    callbacks=[issubclass(c, lightning.pytorch.Callback) for c in (wd_pl.CUDACallback, wd_pl.PerfStatsCallback)],
    other=[issubclass(other.WarpDriveModule, pytorch_lightning.LightningModule),
           issubclass(other.WarpDriveModule, lightning.pytorch.LightningModule),
           issubclass(other.CUDACallback, pytorch_lightning.Callback),
           issubclass(other.RolloutDataModule, pytorch_lightning.LightningDataModule),
           other.WarpDriveModule is lightning_api("pytorch_lightning").WarpDriveModule], refused=refused)))
"""
    done = run_program(tmp_path, code)
    assert done.returncode == 0, done.stderr[-5000:]
    facts = json.loads((tmp_path / "facts.json").read_text())
    assert facts["package"] == "lightning.pytorch" and facts["lightning_module"] and all(facts["callbacks"])
    assert facts["quiet"] is False and facts["late"] is True
    assert len(facts["messages"]) == 1 and "import pytorch_lightning before" in facts["messages"][0]
    assert facts["other"] == [True, False, True, True, True]
    assert "Bad defines ['setup'] in its own body" in facts["refused"]  # a method there would stay bound to Bad


def test_lightning_packages_are_named_and_the_native_classes_stay_lightning_pytorch():
    import lightning.pytorch

    from warp_drive.compat.lightning import WarpDriveModule, lightning_api
    from warp_drive.training.lightning import RolloutDataModule, over_lightning_package
    from warp_drive.training.lightning import WarpDriveModule as NativeModule

    assert over_lightning_package(NativeModule, "lightning.pytorch") is NativeModule
    assert issubclass(NativeModule, lightning.pytorch.LightningModule)
    assert issubclass(RolloutDataModule, lightning.pytorch.LightningDataModule)
    assert lightning_api("lightning.pytorch").WarpDriveModule is WarpDriveModule
    with pytest.raises(ValueError, match="unknown Lightning package 'lightning'.*pytorch_lightning"):
        lightning_api("lightning")
