"""WarpDrive 2.7 training programs, as its docs show them (only the backend name changed to "cpu").

Tutorial 5's flow (a run-config dict, EnvWrapper, Trainer, train, fetch_episode_states,
checkpoints, graceful_close), WarpDrive's shipped run configs (tests/warpdrive_configs/, its keys
and values) through ``warp-drive train``, the translation of each key and default, and the
unknown-key hints that used to point at the wrong key. Sizes are shrunk by overrides, never in
the fixtures.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
import yaml

from warp_drive.cli import main
from warp_drive.compat.run_config import WARPDRIVE_DEFAULTS, is_warpdrive_config, translate
from warp_drive.training.config import ConfigError, RunConfig, load_config

CONFIGS = Path(__file__).parent / "warpdrive_configs"
TUTORIAL5 = CONFIGS / "tutorial5_tag_continuous.yaml"


def tiny_tutorial_config(basedir: Path) -> dict:
    """Tutorial 5's run config, shrunk the way a user would edit the dict."""
    run_config = yaml.safe_load(TUTORIAL5.read_text())
    run_config["env"].update(num_taggers=2, num_runners=5, episode_length=20)
    run_config["trainer"].update(num_envs=4, train_batch_size=40, num_episodes=8)
    run_config["saving"].update(basedir=str(basedir), metrics_log_freq=2, model_params_save_freq=2)
    return run_config


# ----------------------------------------------------------------------------- tutorial 5
def test_tutorial5_trainer_flow(tmp_path, capsys):
    from example_envs.tag_continuous.tag_continuous import TagContinuous
    from warp_drive.env_wrapper import EnvWrapper
    from warp_drive.training.trainer import Trainer

    run_config = tiny_tutorial_config(tmp_path)
    env_wrapper = EnvWrapper(
        env_obj=TagContinuous(**run_config["env"]),
        num_envs=run_config["trainer"]["num_envs"],
        env_backend="cpu",
    )
    env = env_wrapper.env
    taggers = list(getattr(env, "taggers", env.tagger_ids))
    runners = list(getattr(env, "runners", env.runner_ids))
    policy_tag_to_agent_id_map = {"tagger": taggers, "runner": runners}
    trainer = Trainer(env_wrapper=env_wrapper, config=run_config,
                      policy_tag_to_agent_id_map=policy_tag_to_agent_id_map)
    out = capsys.readouterr().out
    assert "trainer.train_batch_size 40 // num_envs 4 -> trainer.rollout_length 10" in out
    # The translation against the wrapper: 8 episodes x 20 steps = 4 iterations of 40 env steps.
    assert (trainer.rollout_length, trainer.num_iterations, trainer.num_iters) == (10, 4, 4)
    assert trainer.config.policy["runner"].algorithm == "A2C"
    assert trainer.config.policy["runner"].vf_coef == 1.0 and trainer.config.policy["runner"].lr == 0.005
    assert trainer.config.policy["tagger"].entropy_coef == 0.05  # WarpDrive's default
    assert trainer.cuda_envs is env_wrapper

    before = {t: p.model.state_dict()["trunk.0.weight"].clone() if "trunk.0.weight" in p.model.state_dict()
              else next(iter(p.model.parameters())).detach().clone() for t, p in trainer.policies.items()}
    results = trainer.train()
    assert trainer.iteration == 4 and trainer.env_steps == 160
    files = {p.name for p in results.iterdir()}
    # WarpDrive's outputs: results.json lines and <policy>_<env steps>.state_dict at each save (every 2 iterations).
    assert {"tagger_80.state_dict", "runner_80.state_dict", "tagger_160.state_dict", "runner_160.state_dict",
            "results.json", "config.yaml", "warpdrive_translation.txt"} <= files
    lines = [json.loads(line) for line in (results / "results.json").read_text().splitlines()]
    assert [line["Iterations Completed"] for line in lines] == [2, 4]
    assert "Mean total time per iter (ms)" in lines[-1]["Perf. Stats"] and "losses/policy_loss" in lines[-1]["tagger"]
    assert results.parent == tmp_path / "tag_continuous" / "100runners_5taggers"
    printed = capsys.readouterr().out
    assert "Iterations Completed                    : 4 / 4" in printed
    changed = [not torch.equal(before[t], next(iter(p.model.parameters())).detach()) for t, p in trainer.policies.items()]
    assert all(changed)  # both policies have to_train: true
    stats = trainer.perf_stats
    assert stats.iters == 4 and stats.steps == 160 and stats.total_time > 0
    assert stats.get_perf_stats()["Mean steps per sec (total)"] > 0

    states = trainer.fetch_episode_states(["loc_x", "loc_y"])
    assert set(states) == {"loc_x", "loc_y"} and states["loc_x"].shape == (21, env.num_agents)
    assert np.isfinite(states["loc_x"]).all()  # TagContinuous episodes run to the time limit here
    assert not np.array_equal(states["loc_x"][0], states["loc_x"][-1])
    states, actions, rewards = trainer.fetch_episode_states(["loc_x"], env_id=3, include_rewards_actions=True,
                                                            policy="tagger")
    assert actions.shape[:2] == (20, len(taggers)) and rewards.shape == (20, len(taggers))

    # save / load: a fresh trainer takes the saved parameters.
    saved = trainer.save_model_checkpoint(iteration=0)
    assert sorted(p.name for p in saved) == ["runner_160.state_dict", "tagger_160.state_dict"]
    assert trainer.save_model_checkpoint(iteration=1) == []  # 1 % 2 != 0 and not the last (3)
    other = Trainer(env_wrapper, run_config, policy_tag_to_agent_id_map, verbose=False)
    other.load_model_checkpoint({p.name.split("_")[0]: str(p) for p in saved})
    for tag, p in trainer.policies.items():
        for a, b in zip(p.model.state_dict().values(), other.policies[tag].model.state_dict().values()):
            assert torch.equal(a, b)
    assert other.env_steps == 160  # the env step in the file name, as WarpDrive did

    sums, steps = other.evaluate_episodes(num_episodes=2, use_argmax=True)
    assert sums["runner"].shape == (8, len(runners)) and steps["tagger"].shape == (8,)
    assert (steps["tagger"] == 20).all()

    trainer.graceful_close()
    assert "Trainer exits gracefully" in capsys.readouterr().out
    with pytest.raises(RuntimeError, match="graceful_close"):
        trainer.train()


def test_trainer_refuses_what_it_cannot_honour(tmp_path):
    from example_envs.tag_continuous.tag_continuous import TagContinuous
    from warp_drive.env_wrapper import EnvWrapper
    from warp_drive.training.trainer import Trainer

    run_config = tiny_tutorial_config(tmp_path)
    wrapper = EnvWrapper(env_obj=TagContinuous(**run_config["env"]), num_envs=4, env_backend="cpu")
    with pytest.raises(ValueError, match="create_separate_placeholders_for_each_policy"):
        Trainer(wrapper, run_config, create_separate_placeholders_for_each_policy=True)
    with pytest.raises(ValueError, match="agents first"):
        Trainer(wrapper, run_config, obs_dim_corresponding_to_num_agents="last")
    with pytest.raises(ValueError, match="--nproc"):
        Trainer(wrapper, run_config, num_devices=2)
    with pytest.raises(TypeError, match="by keyword"):
        Trainer(wrapper, run_config, None, True)
    mismatch = {**run_config, "trainer": {**run_config["trainer"], "num_envs": 5}}
    with pytest.raises(ConfigError, match="EnvWrapper has 4 envs"):
        Trainer(wrapper, mismatch, verbose=False)
    # A model of another layout (e.g. weights trained by WarpDrive itself) is refused by name.
    trainer = Trainer(wrapper, run_config, verbose=False)
    bad = tmp_path / "tagger_5.state_dict"
    torch.save({"fc.0.weight": torch.zeros(3, 3)}, bad)
    with pytest.raises(ValueError, match="another layout"):
        trainer.load_model_checkpoint({"tagger": str(bad)})
    with pytest.raises(ValueError, match="no policy"):
        trainer.load_model_checkpoint({"planner": str(bad)})


def test_model_ckpt_filepath_is_loaded_at_start(tmp_path):
    from example_envs.tag_continuous.tag_continuous import TagContinuous
    from warp_drive.env_wrapper import EnvWrapper
    from warp_drive.training.trainer import Trainer

    run_config = tiny_tutorial_config(tmp_path)
    wrapper = EnvWrapper(env_obj=TagContinuous(**run_config["env"]), num_envs=4, env_backend="cpu")
    first = Trainer(wrapper, run_config, verbose=False)
    for p in first.policies.values():
        for q in p.model.parameters():
            torch.nn.init.constant_(q, 0.25)
    paths = first.save_model_checkpoint()
    run_config["policy"]["tagger"]["model"]["model_ckpt_filepath"] = str(paths[0])
    second = Trainer(wrapper, run_config, verbose=False)
    assert all(torch.all(q == 0.25) for q in second.policies["tagger"].model.parameters())
    assert not all(torch.all(q == 0.25) for q in second.policies["runner"].model.parameters())


def test_rollout_animation(tmp_path):
    from matplotlib.animation import FuncAnimation

    from example_envs.tag_continuous.generate_rollout_animation import generate_tag_env_rollout_animation
    from example_envs.tag_continuous.tag_continuous import TagContinuous
    from warp_drive.env_wrapper import EnvWrapper
    from warp_drive.training.trainer import Trainer

    run_config = tiny_tutorial_config(tmp_path)
    run_config["env"]["episode_length"] = 5
    wrapper = EnvWrapper(env_obj=TagContinuous(**run_config["env"]), num_envs=2, env_backend="cpu")
    run_config["trainer"].update(num_envs=2, train_batch_size=10, num_episodes=2)
    trainer = Trainer(wrapper, run_config, verbose=False)
    anim = generate_tag_env_rollout_animation(trainer, gif_path=tmp_path / "ep.gif")
    assert isinstance(anim, FuncAnimation)
    out = tmp_path / "anim.gif"
    anim.save(out, writer="pillow")
    from PIL import Image

    assert Image.open(out).n_frames == 6 and Image.open(tmp_path / "ep.gif").n_frames == 6


# ----------------------------------------------------------------------------- translation
def test_defaults_fixture_is_warpdrive_defaults():
    assert yaml.safe_load((CONFIGS / "default_configs.yaml").read_text()) == WARPDRIVE_DEFAULTS


def test_warpdrive_defaults_made_explicit():
    """A minimal WarpDrive config trains as WarpDrive configured it, key by key."""
    config = translate({"name": "single_cartpole", "policy": {"shared": {}}}).run_config
    p = config.policy["shared"]
    assert (p.algorithm, p.to_train, p.gamma, p.lr, p.vf_coef, p.entropy_coef) == ("A2C", False, 0.98, 1e-4, 0.01,
                                                                                     0.05)
    assert (p.max_grad_norm, p.normalize_advantage, p.clip_param, p.gae_lambda) == (0.5, False, 0.01, 1.0)
    assert (p.model.type, p.model.fc_dims, p.model.activation, p.model.shared_trunk) == (
        "fully_connected", [64, 64], "relu", True)
    assert (p.num_epochs, p.num_minibatches) == (1, 1)
    t = config.trainer
    # num_envs 10, train_batch_size 10,000 -> 1,000 steps per env; 10,000 episodes x CartPole's 500 steps.
    assert (t.num_envs, t.rollout_length, t.total_steps, t.seed, t.backend) == (10, 1000, 5_000_000, 0, "auto")
    s = config.saving
    assert (s.metrics_log_freq, s.model_params_save_freq, s.basedir, s.name, s.tag) == (100, 1000, "/tmp", "default",
                                                                                       "experiment")
    assert config.env.name == "CartPole" and config.name == "single_cartpole"


def test_each_key_translated():
    data = yaml.safe_load((CONFIGS / "tag_continuous.yaml").read_text())
    data["policy"]["runner"].update(clip_grad_norm=False, lr=[[0, 0.01], [1000, 0.001]], algorithm="PPO",
                                    num_epochs=2, normalize_advantage=True)
    data["trainer"].update(env_backend="cpu", seed=7, num_gpus=2)
    t = translate(data)
    config = t.run_config
    assert config.env.name == "TagContinuous" and config.env.config["num_runners"] == 100
    assert config.env.config["max_speed"] == 1.0
    assert (config.trainer.num_envs, config.trainer.rollout_length) == (100, 250)
    assert config.trainer.total_steps == 500 * 500  # 10 iterations of 25,000
    assert (config.trainer.backend, config.trainer.seed, t.num_processes) == ("cpu", 7, 2)
    runner, tagger = config.policy["runner"], config.policy["tagger"]
    assert runner.max_grad_norm is None and tagger.max_grad_norm == 0.5
    assert runner.lr == [[0, 0.01], [1000, 0.001]] and tagger.lr == 0.001
    assert (runner.algorithm, runner.num_epochs, runner.normalize_advantage) == ("PPO", 2, True)
    assert (tagger.vf_coef, tagger.entropy_coef, tagger.model.fc_dims) == (1.0, 0.05, [256, 256])
    assert config.saving.model_params_save_freq == 5000 and config.saving.basedir == "/tmp"
    text = t.text()
    assert "trainer.num_episodes 500 x episode_length 500" in text and "WarpDrive's PPO" in text


def test_shipped_warpdrive_configs_load():
    expected = {  # file: (env, num_envs, rollout_length, total_steps)
        "tag_continuous": ("TagContinuous", 100, 250, 250_000),
        "tutorial5_tag_continuous": ("TagContinuous", 400, 25, 250_000),
        "tag_gridworld": ("TagGridWorld", 2000, 100, 2_000_000),
        "tag_gridworld_with_reset_pool": ("TagGridWorld", 2000, 100, 2_000_000),
        "single_cartpole": ("CartPole", 100, 500, 100_000_000),
        "single_acrobot": ("Acrobot", 100, 500, 100_000_000),
        "single_mountain_car": ("MountainCar", 1000, 500, 1_000_000_000),
    }
    for name, (env, num_envs, rollout, total) in expected.items():
        config = load_config(CONFIGS / f"{name}.yaml")
        assert (config.env.name, config.trainer.num_envs, config.trainer.rollout_length,
                config.trainer.total_steps) == (env, num_envs, rollout, total), name
        assert config.warpdrive_translation is not None
    pool = load_config(CONFIGS / "tag_gridworld_with_reset_pool.yaml")
    assert pool.env.config["random_starts"] is True
    cartpole = load_config(CONFIGS / "single_cartpole.yaml")
    assert "reset_pool_size" not in cartpole.env.config
    assert any("env.reset_pool_size" in w for w in cartpole.warpdrive_translation.warnings)
    assert any("numba" in w for w in cartpole.warpdrive_translation.warnings)
    mountain = load_config(CONFIGS / "single_mountain_car.yaml").warpdrive_translation
    assert any("neg_pos_env_ratio" in w for w in mountain.warnings)
    with pytest.raises(ConfigError, match="default_configs.yaml is WarpDrive's"):
        load_config(CONFIGS / "default_configs.yaml")


def test_ddpg_configs_translate():
    """WarpDrive's DDPG keys onto the DDPG policy keys (lr {actor, critic}, tau, OU noise, n_step, critic)."""
    config = load_config(CONFIGS / "single_pendulum.yaml")
    p = config.policy["shared"]
    # WarpDrive's stddev 0.2 is in action units; Pendulum's actor output_w 2.0 is half its range.
    assert (p.algorithm, p.tau, p.n_step, p.noise_stddev, p.noise_damping) == ("DDPG", 0.05, 5, 0.1, 0.15)
    assert p.warmup_steps == 0  # WarpDrive had no random warm-up
    assert p.lr == [[2500000000, 0.001], [3750000000, 0.0005]]
    assert p.critic_lr == [[2500000000, 0.0001], [3750000000, 5e-05]]
    assert p.max_grad_norm == 3 and p.model.fc_dims == [64, 64] and p.model.critic_fc_dims == [64, 64]
    assert (config.trainer.num_envs, config.trainer.rollout_length) == (10000, 5)
    car = load_config(CONFIGS / "single_continuous_mountain_car.yaml")
    assert car.policy["shared"].noise_stddev == 0.5 and car.policy["shared"].critic_lr == 0.0001


def test_ddpg_keys_in_the_translated_dict():
    """The translation itself (before validation, which needs DDPG's PolicyConfig keys)."""
    t = translate(CONFIGS / "single_pendulum.yaml")
    p = t.config["policy"]["shared"]
    assert (p["algorithm"], p["tau"], p["n_step"], p["noise_stddev"], p["noise_damping"]) == ("DDPG", 0.05, 5, 0.1,
                                                                                            0.15)
    assert p["warmup_steps"] == 0
    assert p["lr"] == [[2500000000, 0.001], [3750000000, 0.0005]] and p["max_grad_norm"] == 3
    assert p["critic_lr"] == [[2500000000, 0.0001], [3750000000, 5e-05]]
    assert p["model"] == {"type": "fully_connected", "fc_dims": [64, 64], "critic_fc_dims": [64, 64],
                          "activation": "relu"}
    assert "vf_coef" not in p and "entropy_coef" not in p  # A2C/PPO keys are not given to a DDPG policy
    assert any("output_w" in w for w in t.warnings)
    assert t.config["env"] == {"name": "Pendulum", "config": {"episode_length": 500}}
    assert (t.config["trainer"]["num_envs"], t.config["trainer"]["rollout_length"]) == (10000, 5)
    car = translate(CONFIGS / "single_continuous_mountain_car.yaml").config["policy"]["shared"]
    assert (car["noise_stddev"], car["critic_lr"], car["lr"]) == (0.5, 0.0001, 0.001)


def test_translation_errors_and_warnings():
    base = yaml.safe_load((CONFIGS / "single_cartpole.yaml").read_text())
    bad = {**base, "trainer": {**base["trainer"], "train_batch_size": 50}}
    with pytest.raises(ConfigError, match="fewer than num_envs 100"):
        translate(bad)
    odd = {**base, "trainer": {**base["trainer"], "train_batch_size": 50_050}}
    t = translate(odd)
    assert t.config["trainer"]["rollout_length"] == 500 and any("not a multiple" in w for w in t.warnings)
    short = {**base, "trainer": {**base["trainer"], "num_episodes": 1}}
    with pytest.raises(ConfigError, match="less than one iteration"):
        translate(short)
    ret = yaml.safe_load((CONFIGS / "single_cartpole.yaml").read_text())
    ret["policy"]["shared"]["normalize_return"] = True
    with pytest.raises(ConfigError, match="normalize_return"):
        translate(ret)
    typo = yaml.safe_load((CONFIGS / "single_cartpole.yaml").read_text())
    typo["policy"]["shared"]["vf_loss_coef"] = 1
    with pytest.raises(ConfigError, match="did you mean 'vf_loss_coeff'"):
        translate(typo)
    sched = yaml.safe_load((CONFIGS / "single_cartpole.yaml").read_text())
    sched["policy"]["shared"]["vf_loss_coeff"] = [[0, 1.0], [100, 0.5]]
    with pytest.raises(ConfigError, match="one number"):
        translate(sched)
    unknown_env = {**base, "name": "single_cartpol"}
    with pytest.raises(ConfigError, match="did you mean 'single_cartpole'"):
        translate(unknown_env)


def test_detection():
    assert is_warpdrive_config(yaml.safe_load((CONFIGS / "tag_gridworld.yaml").read_text()))
    assert is_warpdrive_config({"name": "x", "trainer": {"train_batch_size": 10}, "policy": {"a": {}}})
    ours = yaml.safe_load(Path("warp_drive/training/configs/cartpole.yaml").read_text())
    assert not is_warpdrive_config(ours)
    # Ours with a stray WarpDrive key is not translated: the key's message says what it is.
    ours["trainer"]["num_episodes"] = 10
    assert not is_warpdrive_config(ours)


# ----------------------------------------------------------------------------- hints
@pytest.mark.parametrize("override, expected", [
    ("trainer.num_episodes=10", "num_episodes is a WarpDrive 2.7 run-config key; here: trainer.total_steps"),
    ("trainer.num_gpus=2", "num_gpus is a WarpDrive 2.7 run-config key; here: the number of processes"),
    ("policy.shared.normalize_return=true", "normalize_return is a WarpDrive 2.7 run-config key"),
    ("policy.shared.vf_loss_coeff=1", "here: vf_coef"),
    ("trainer.train_batch_size=100", "rollout_length = train_batch_size // num_envs"),
])
def test_hints_name_warpdrive_keys(override, expected):
    with pytest.raises(ConfigError) as info:
        load_config("cartpole", [override])
    message = str(info.value)
    assert expected in message and "did you mean 'num_envs'" not in message
    assert "did you mean 'normalize_advantage'" not in message
    data = yaml.safe_load(Path("warp_drive/training/configs/cartpole.yaml").read_text())
    section, key = override.split("=")[0].rsplit(".", 1)
    node = data
    for part in section.split("."):
        node = node[part]
    node[key] = 1
    with pytest.raises(ConfigError, match="WarpDrive 2.7 run-config key"):
        RunConfig.from_dict(data)


# ----------------------------------------------------------------------------- CLI
def test_cli_trains_warpdrive_config(tmp_path, capsys):
    code = main(["train", "--config", str(CONFIGS / "tag_gridworld.yaml"), "--backend", "cpu", "--no-progress",
                 "--set", "trainer.num_envs=4", "trainer.train_batch_size=40", "trainer.num_episodes=4",
                 "env.episode_length=20", "env.num_taggers=2", "env.grid_length=6", f"saving.basedir={tmp_path}",
                 "policy.shared.num_epochs=1", "--results_dir", "first"])
    out = capsys.readouterr().out
    assert code == 0, out
    run_dir = tmp_path / "tag_gridworld" / "experiments" / "first"
    assert "trainer.train_batch_size 40 // num_envs 4 -> trainer.rollout_length 10" in out
    assert f"run directory: {run_dir}" in out
    saved = yaml.safe_load((run_dir / "config.yaml").read_text())
    assert saved["trainer"] == {"num_envs": 4, "rollout_length": 10, "total_steps": 80, "seed": 0, "backend": "cpu",
                                "on_nonfinite": "raise"}
    assert saved["policy"]["shared"]["model"]["activation"] == "relu"
    assert "WarpDrive run config" in (run_dir / "warpdrive_translation.txt").read_text()
    # The same --results_dir again is refused rather than mixed with the first run.
    again = main(["train", "--config", str(CONFIGS / "tag_gridworld.yaml"), "--backend", "cpu", "--no-progress",
                  "--set", "trainer.num_envs=4", "trainer.train_batch_size=40", "trainer.num_episodes=4",
                  "env.episode_length=20", "env.num_taggers=2", "env.grid_length=6", f"saving.basedir={tmp_path}",
                  "--results_dir", "first"])
    assert again == 1 and "not empty" in capsys.readouterr().err


def test_cli_env_flag(tmp_path, capsys):
    code = main(["train", "-e", "single_cartpole", "--backend", "cpu", "--no-progress", "--set",
                 "trainer.num_envs=4", "trainer.rollout_length=8", "trainer.total_steps=64",
                 f"saving.basedir={tmp_path}"])
    out = capsys.readouterr().out
    assert code == 0, out
    assert "-e single_cartpole: config cartpole" in out
    assert (tmp_path / "cartpole" / "experiment").is_dir()
    assert main(["train", "-e", "single_cartpol"]) == 2
    assert "no config for that env" in capsys.readouterr().err
    # -e with a WarpDrive file, -n/--num_gpus and -a parse as --nproc / --auto-scale.
    from warp_drive.cli import build_parser

    args = build_parser().parse_args(["train", "-e", "x.yaml", "-n", "2", "-a", "--results_dir", "r"])
    assert (args.env, args.nproc, args.auto_scale, args.results_dir) == ("x.yaml", 2, True, "r")
    args = build_parser().parse_args(["train", "-c", "cartpole", "--num_gpus", "3", "--auto_scale"])
    assert (args.nproc, args.auto_scale) == (3, True)


@pytest.mark.parametrize("name", ["single_pendulum", "single_continuous_mountain_car"])
def test_cli_trains_warpdrive_ddpg_configs(tmp_path, capsys, name):
    """WarpDrive's DDPG run configs train through the CLI (sizes shrunk with --set, as a user would)."""
    code = main(["train", "--config", str(CONFIGS / f"{name}.yaml"), "--backend", "cpu", "--no-progress",
                 "--set", "trainer.num_envs=4", "trainer.train_batch_size=16", "trainer.num_episodes=2",
                 "env.episode_length=40", "env.reset_pool_size=8", "policy.shared.batch_size=32",
                 f"saving.basedir={tmp_path}", "--results_dir", "ddpg"])
    out = capsys.readouterr().out
    assert code == 0, out
    run_dir = next(tmp_path.glob("*/*/ddpg"))  # basedir/name/tag/results_dir, as WarpDrive laid it out
    saved = yaml.safe_load((run_dir / "config.yaml").read_text())
    policy = saved["policy"]["shared"]
    assert policy["algorithm"] == "DDPG" and policy["warmup_steps"] == 0
    assert saved["trainer"]["total_steps"] == 80
    rows = (run_dir / "metrics.csv").read_text().splitlines()
    assert len(rows) >= 2  # a header and at least one iteration's metrics
    assert "noise_stddev" in (run_dir / "warpdrive_translation.txt").read_text()


def test_warpdrive_readme_python_interface(tmp_path, capsys):
    """WarpDrive 2.7.1's README "Python Interface" program, with its tag_continuous run config
    (sizes shrunk in the dict, as a user trying it on a laptop would) and env_backend "cpu"."""
    from example_envs.tag_continuous.tag_continuous import TagContinuous
    from warp_drive.env_wrapper import EnvWrapper
    from warp_drive.training.trainer import Trainer

    run_config = yaml.safe_load((CONFIGS / "tag_continuous.yaml").read_text())
    run_config["env"].update(num_taggers=2, num_runners=6, episode_length=20)
    run_config["trainer"].update(num_envs=4, num_episodes=8, train_batch_size=40)
    run_config["saving"] = {**run_config.get("saving", {}), "basedir": str(tmp_path)}

    env_wrapper = EnvWrapper(
        TagContinuous(**run_config["env"]),
        num_envs=run_config["trainer"]["num_envs"],
        env_backend="cpu",
    )
    policy_tag_to_agent_id_map = {
        "tagger": list(env_wrapper.env.taggers),
        "runner": list(env_wrapper.env.runners),
    }
    trainer = Trainer(
        env_wrapper=env_wrapper,
        config=run_config,
        policy_tag_to_agent_id_map=policy_tag_to_agent_id_map,
    )
    results = trainer.train()
    taggers, runners = policy_tag_to_agent_id_map["tagger"], policy_tag_to_agent_id_map["runner"]
    assert len(taggers) == 2 and sorted(taggers + runners) == list(range(8))  # taggers drawn from the env's seed
    assert trainer.iteration == 4 and trainer.env_steps == 160
    assert results.is_dir() and (results / "results.json").is_file()
    assert "Iterations Completed" in capsys.readouterr().out
