"""WarpDrive 2.7.1's tutorial 5 (training with WarpDrive) as written, and the ffmpeg its animations need (issue 30).

``test_tutorial5_as_written`` makes the tutorial's calls with its arguments in its order, changed only as issue 30
allows (``env_backend="cpu"``; the GPU assert and the shell line dropped) and in sizes: the YAML run config keeps
every key, with 2 taggers, 10 runners, 20-step episodes, 2 envs and 2 iterations (results under a temporary
directory instead of ``/tmp``). It keeps ``num_other_agents_observed: 10`` and ``fc_dims: [256, 256]``, the shapes
of the pretrained weights that the tutorial loads from
``get_project_root()/tutorials/assets/tag_continuous_training/``: this project's own, shipped there
(``warp_drive.compat.project_root``; ``test_tutorial5_shipped_weights.py``). WarpDrive's own files, copied over
them from a WarpDrive checkout, load too: the test does that from ``$WARPDRIVE_CHECKOUT`` or ``/tmp/wd`` when one
is there (the root is under a private build cache), else it loads the shipped ones. ``anim.to_html5_video()`` needs an ffmpeg binary: on PATH, or
imageio-ffmpeg's (the ``warpdrive`` extra), which ``warp_drive.env.rendering.find_ffmpeg_for_matplotlib`` hands
matplotlib only when its own lookup fails and the user has not set a path.
"""

from __future__ import annotations

import importlib.util
import logging
import os
import shutil
import stat
from pathlib import Path

import matplotlib
import pytest
import torch

WEIGHTS = ("tagger_1000010000.state_dict", "runner_1000010000.state_dict")
ASSETS = Path("tutorials") / "assets" / "tag_continuous_training"
NO_FFMPEG = ("anim.to_html5_video() not called: no ffmpeg on PATH and imageio-ffmpeg is not installed "
             "(pip install 'warp-drive[warpdrive]')")

CFG = """
# tutorial 5's YAML, every key kept; sizes small
name: "tag_continuous"

env:
    num_taggers: 2
    num_runners: 10
    grid_length: 20
    episode_length: 20
    max_acceleration: 0.1
    min_acceleration: -0.1
    max_turn: 2.35  # 3*pi/4 radians
    min_turn: -2.35  # -3*pi/4 radians
    num_acceleration_levels: 10
    num_turn_levels: 10
    skill_level_runner: 1
    skill_level_tagger: 1
    seed: 274880
    use_full_observation: False
    runner_exits_game_after_tagged: True
    num_other_agents_observed: 10
    tag_reward_for_tagger: 10.0
    tag_penalty_for_runner: -10.0
    step_penalty_for_tagger: -0.00
    step_reward_for_runner: 0.00
    edge_hit_penalty: -0.0
    end_of_game_reward_for_runner: 1.0
    tagging_distance: 0.02

trainer:
    num_envs: 2
    train_batch_size: 40
    num_episodes: 4
policy:
    runner:
        to_train: True
        algorithm: "A2C"
        gamma: 0.98
        lr: 0.005
        vf_loss_coeff: 1
        entropy_coeff:
        - [0, 0.5]
        - [2000000, 0.05]
        model:
            type: "fully_connected"
            fc_dims: [256, 256]
            model_ckpt_filepath: ""
    tagger:
        to_train: True
        algorithm: "A2C"
        gamma: 0.98
        lr: 0.002
        vf_loss_coeff: 1
        model:
            type: "fully_connected"
            fc_dims: [256, 256]
            model_ckpt_filepath: ""

saving:
    metrics_log_freq: 1
    model_params_save_freq: 5000
    basedir: "BASEDIR"
    name: "tag_continuous"
    tag: "100runners_5taggers"
"""


@pytest.fixture(autouse=True)
def matplotlib_settings():
    """Each test starts from matplotlib's default ffmpeg setting, and what it sets is undone after it."""
    with matplotlib.rc_context({"animation.ffmpeg_path": matplotlib.rcParamsDefault["animation.ffmpeg_path"]}):
        yield


def have_ffmpeg() -> bool:
    return shutil.which("ffmpeg") is not None or importlib.util.find_spec("imageio_ffmpeg") is not None


def warpdrive_assets() -> Path | None:
    """WarpDrive's tutorial assets in a WarpDrive checkout, when one is on this machine."""
    for checkout in (os.environ.get("WARPDRIVE_CHECKOUT"), "/tmp/wd"):
        if checkout and all((Path(checkout) / ASSETS / name).is_file() for name in WEIGHTS):
            return Path(checkout) / ASSETS
    return None


@pytest.mark.slow
def test_tutorial5_as_written(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("WARP_DRIVE_CACHE", str(tmp_path / "cache"))  # get_project_root() lives under it
    skipped = []

    from example_envs.tag_continuous.generate_rollout_animation import generate_tag_env_rollout_animation
    from example_envs.tag_continuous.tag_continuous import TagContinuous
    from warp_drive.env_wrapper import EnvWrapper
    from warp_drive.training.trainer import Trainer
    from warp_drive.utils.common import get_project_root

    pytest.importorskip("gym", reason="tutorial 5 imports gym.spaces: pip install 'warp-drive[warpdrive]'")
    import numpy as np
    import yaml
    from gym.spaces import Discrete, MultiDiscrete
    from IPython.display import HTML

    # Not the tutorial's: gym 0.26 imports on NumPy 2 (printing a notice) and its spaces work there.
    assert Discrete(11).contains(np.int64(10)) and MultiDiscrete([11, 11]).contains(np.array([0, 10]))

    logging.getLogger().setLevel(logging.ERROR)

    run_config = yaml.safe_load(CFG.replace("BASEDIR", str(tmp_path / "runs")))

    env_wrapper = EnvWrapper(env_obj=TagContinuous(**run_config["env"]), num_envs=run_config["trainer"]["num_envs"],
                             env_backend="cpu")
    policy_tag_to_agent_id_map = {
        "tagger": list(env_wrapper.env.taggers),
        "runner": list(env_wrapper.env.runners),
    }
    trainer = Trainer(env_wrapper, run_config, policy_tag_to_agent_id_map)
    assert trainer.num_iters == 2

    videos = []

    def show_rollout():
        anim = generate_tag_env_rollout_animation(trainer)
        assert len(list(anim.new_frame_seq())) == 21  # the reset state and the episode's 20 steps
        if have_ffmpeg():
            html = HTML(anim.to_html5_video())
            videos.append(html.data)
        else:
            skipped.append(NO_FFMPEG)

    show_rollout()

    before = {tag: [q.detach().clone() for q in p.model.parameters()] for tag, p in trainer.policies.items()}
    trainer.train()
    assert trainer.iteration == 2 and trainer.env_steps == 80
    for tag, p in trainer.policies.items():
        assert any(not b.equal(a) for b, a in zip(before[tag], p.model.parameters())), tag
    assert "Metrics for policy 'runner'" in capsys.readouterr().out

    source = warpdrive_assets()
    target = Path(get_project_root()) / ASSETS
    if source is not None:  # WarpDrive's own files, copied over the shipped ones as a user may: they load too
        for name in WEIGHTS:
            shutil.copyfile(source / name, target / name)
    expected_files = {tag: target / f"{tag}_1000010000.state_dict" for tag in ("tagger", "runner")}
    expected_states = {tag: torch.load(path, map_location="cpu", weights_only=True)
                       for tag, path in expected_files.items()}
    trainer.load_model_checkpoint(
        {
            "tagger": f"{get_project_root()}/tutorials/assets/tag_continuous_training/tagger_1000010000.state_dict",
            "runner": f"{get_project_root()}/tutorials/assets/tag_continuous_training/runner_1000010000.state_dict",
        }
    )
    from warp_drive.compat.weights import convert, is_warpdrive_state

    for tag, state in expected_states.items():
        model = trainer.policies[tag].model
        expected = convert(state, model.state_dict()) if is_warpdrive_state(state) else state
        assert is_warpdrive_state(state) == (source is not None), tag  # shipped: this project's layout
        assert all(torch.equal(model.state_dict()[k], v) for k, v in expected.items()), tag

    show_rollout()

    trainer.graceful_close()
    if skipped:
        pytest.skip("; ".join(skipped))
    assert len(videos) == 2
    assert all(v.startswith("<video") and 'type="video/mp4"' in v and len(v) > 1000 for v in videos)


# ----------------------------------------------------------------------------- the ffmpeg matplotlib finds
@pytest.fixture
def no_ffmpeg_on_path(tmp_path, monkeypatch):
    empty = tmp_path / "empty_bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    return empty


def test_imageio_ffmpeg_is_handed_to_matplotlib_only_when_it_finds_none(no_ffmpeg_on_path):
    imageio_ffmpeg = pytest.importorskip("imageio_ffmpeg", reason="pip install 'warp-drive[warpdrive]'")
    from matplotlib.animation import FFMpegWriter

    from warp_drive.env.rendering import find_ffmpeg_for_matplotlib

    with matplotlib.rc_context():
        assert not FFMpegWriter.isAvailable()  # the default "ffmpeg" is on no PATH here
        assert find_ffmpeg_for_matplotlib() == imageio_ffmpeg.get_ffmpeg_exe()
        assert matplotlib.rcParams["animation.ffmpeg_path"] == imageio_ffmpeg.get_ffmpeg_exe()
        assert FFMpegWriter.isAvailable()


def test_ffmpeg_on_path_or_a_users_setting_is_left_alone(no_ffmpeg_on_path, tmp_path):
    from warp_drive.env.rendering import find_ffmpeg_for_matplotlib

    with matplotlib.rc_context():  # the user's own path, even one that does not exist, is never replaced
        matplotlib.rcParams["animation.ffmpeg_path"] = str(tmp_path / "my_ffmpeg")
        assert find_ffmpeg_for_matplotlib() is None
        assert matplotlib.rcParams["animation.ffmpeg_path"] == str(tmp_path / "my_ffmpeg")

    on_path = no_ffmpeg_on_path / "ffmpeg"  # an ffmpeg on PATH: matplotlib finds it itself
    on_path.write_text("#!/bin/sh\nexit 0\n")
    on_path.chmod(on_path.stat().st_mode | stat.S_IXUSR)
    with matplotlib.rc_context():
        assert find_ffmpeg_for_matplotlib() == str(on_path)
        assert matplotlib.rcParams["animation.ffmpeg_path"] == "ffmpeg"


@pytest.mark.filterwarnings("ignore:Animation was deleted")
def test_without_any_ffmpeg_the_video_says_what_to_install(no_ffmpeg_on_path, monkeypatch):
    import sys

    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    from warp_drive.env.rendering import video_animation_class

    monkeypatch.setitem(sys.modules, "imageio_ffmpeg", None)  # as if not installed: import raises ImportError
    fig = Figure(figsize=(1, 1))
    FigureCanvasAgg(fig)
    anim = video_animation_class()(fig, lambda t: (), frames=[0, 1])
    with pytest.raises(RuntimeError, match=r"no ffmpeg binary .*pip install 'warp-drive\[warpdrive\]'"):
        anim.to_html5_video()
    assert matplotlib.rcParams["animation.ffmpeg_path"] == "ffmpeg"  # nothing was set
