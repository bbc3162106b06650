"""WarpDrive 2.7 programs' smaller needs (issue 30): ``warp_drive.utils.common.get_project_root`` and
the run configs under it, the consistency checker's actions with a seed, ``use_gpu_testing_mode``,
one message for ``default_configs.yaml``, and the example training script's ``-a`` / ``-n``
helpers (``training.utils.vertical_scaler``, ``training.utils.distributed_train``). All on the cpu
executor; the program-shaped tests make WarpDrive's calls in WarpDrive's order, with the backend
name changed to "cpu" (and our TagGridWorld where WarpDrive's script names CUDATagGridWorld).
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
import torch
import yaml
from warpdrive_style.line_chase import CUDA_SOURCE, LineChase

from warp_drive.compat.run_config import WARPDRIVE_DEFAULTS
from warp_drive.training.config import ConfigError, load_config

FIXTURES = Path(__file__).parent / "warpdrive_configs"
LINE_CHASE = dict(num_agents=4, episode_length=12, grid_length=10.0, goal=5.0, tolerance=0.75,
                  speeds=[0.5, 1.0, 0.75, 0.25], starting_locations=[1.0, 9.0, 4.0, 6.0])


@pytest.fixture
def cache(tmp_path, monkeypatch):
    """A private build cache: get_project_root() lives under it."""
    path = tmp_path / "cache"
    monkeypatch.setenv("WARP_DRIVE_CACHE", str(path))
    return path


@pytest.fixture
def registrar(clean_registrar):
    from warp_drive.utils.env_registrar import EnvironmentRegistrar

    registrar = EnvironmentRegistrar()
    registrar.add_cuda_env_src_path(LineChase.name, CUDA_SOURCE, env_backend="pycuda")
    return registrar


# ----------------------------------------------------------------------------- WarpDrive's example script, shrunk
def read_run_config(env_name: str) -> dict:
    """The example script's read: ``<project root>/warp_drive/training/run_configs/<env>.yaml``."""
    from warp_drive.utils.common import get_project_root

    config_path = os.path.join(get_project_root(), "warp_drive", "training", "run_configs", f"{env_name}.yaml")
    assert os.path.exists(config_path)
    with open(config_path, "r", encoding="utf8") as fp:
        return yaml.safe_load(fp)


def shrink(run_config: dict, basedir: Path) -> dict:
    """Two iterations of 2 envs x 10 steps, as a user edits the dict."""
    run_config["env"].update(grid_length=10, episode_length=10)
    run_config["trainer"].update(num_envs=2, train_batch_size=20, num_episodes=4)
    run_config["saving"].update(basedir=str(basedir), metrics_log_freq=1, model_params_save_freq=1)
    return run_config


def setup_trainer_and_train(run_configuration, device_id=0, num_devices=1, event_messenger=None,
                            results_directory=None, verbose=True):
    """The example script's function, for tag_gridworld on the cpu executor (module level: workers import it)."""
    from example_envs.tag_gridworld.tag_gridworld import TagGridWorld
    from warp_drive.env_wrapper import EnvWrapper
    from warp_drive.training.trainers.trainer_a2c import TrainerA2C

    env_wrapper = EnvWrapper(TagGridWorld(**run_configuration["env"]), num_envs=run_configuration["trainer"]["num_envs"],
                             env_backend="cpu", event_messenger=event_messenger, process_id=device_id)
    policy_name = list(run_configuration["policy"])[0]
    policy_tag_to_agent_id_map = {policy_name: list(env_wrapper.env.taggers) + list(env_wrapper.env.runners)}
    trainer = TrainerA2C(env_wrapper=env_wrapper, config=run_configuration,
                         policy_tag_to_agent_id_map=policy_tag_to_agent_id_map, device_id=device_id,
                         num_devices=num_devices, results_dir=results_directory, verbose=verbose)
    trainer.train()
    trainer.graceful_close()
    perf_stats = trainer.perf_stats
    print(f"Training steps/s: {perf_stats.steps / perf_stats.total_time:.2f}. \n")
    return trainer.iteration, trainer.env_steps


# ----------------------------------------------------------------------------- item: get_project_root
def test_project_root_holds_warpdrives_run_configs_where_it_kept_them(cache):
    from warp_drive.utils.common import get_project_root

    root = get_project_root()
    assert isinstance(root, Path) and root.is_dir()
    assert cache in root.parents  # the build cache, never the installed package
    run_configs = root / "warp_drive" / "training" / "run_configs"
    for fixture in FIXTURES.glob("*.yaml"):
        if fixture.name == "tutorial5_tag_continuous.yaml":  # tutorial 5's dict, not a file of WarpDrive's
            continue
        shipped = yaml.safe_load((run_configs / fixture.name).read_text())
        assert shipped == yaml.safe_load(fixture.read_text()), fixture.name
    assert yaml.safe_load((run_configs / "default_configs.yaml").read_text()) == WARPDRIVE_DEFAULTS
    cuda_bin = root / "warp_drive" / "cuda_bin"
    assert cuda_bin.is_dir() and os.access(cuda_bin, os.W_OK)
    assert "tutorials/assets/" in (root / "README.txt").read_text()  # says what is not shipped

    # A user's edit is kept, as in a WarpDrive checkout; a deleted file comes back.
    edited = run_configs / "tag_gridworld.yaml"
    edited.write_text(edited.read_text().replace("num_envs: 2000", "num_envs: 7"))
    (run_configs / "tag_continuous.yaml").unlink()
    assert get_project_root() == root
    assert yaml.safe_load(edited.read_text())["trainer"]["num_envs"] == 7
    assert (run_configs / "tag_continuous.yaml").is_file()

    # A run config read from there goes through the translator (and the CLI) as WarpDrive's.
    assert load_config(run_configs / "tag_continuous.yaml").warpdrive_translation is not None


@pytest.mark.slow  # builds and trains (over ~1.5 s); the script itself: test_as_written_example_script.py
def test_example_script_trains_tag_gridworld_from_the_project_root(cache, tmp_path, capsys):
    run_config = shrink(read_run_config("tag_gridworld"), tmp_path)
    run_config["trainer"]["num_gpus"] = 1  # the script's `elif "num_gpus" not in run_config["trainer"]`
    assert setup_trainer_and_train(run_config, results_directory="run1") == (2, 40)
    assert "Training steps/s" in capsys.readouterr().out
    results = tmp_path / "tag_gridworld" / "experiments" / "run1"
    assert {"shared_20.state_dict", "shared_40.state_dict", "results.json"} <= {p.name for p in results.iterdir()}


def test_missing_weights_under_the_root_say_they_are_not_shipped(cache, tmp_path):
    from example_envs.tag_gridworld.tag_gridworld import TagGridWorld
    from warp_drive.env_wrapper import EnvWrapper
    from warp_drive.training.trainer import Trainer
    from warp_drive.utils.common import get_project_root

    run_config = shrink(read_run_config("tag_gridworld"), tmp_path)
    wrapper = EnvWrapper(env_obj=TagGridWorld(**run_config["env"]), num_envs=2, env_backend="cpu")
    trainer = Trainer(wrapper, run_config, {"shared": list(range(wrapper.n_agents))}, verbose=False)
    # Tutorial 5's own two files are shipped (this project's weights); WarpDrive's other assets are not.
    weights = f"{get_project_root()}/tutorials/assets/tag_continuous_training/tagger_2000000.state_dict"
    with pytest.raises(FileNotFoundError, match=r"pretrained weights.* not shipped by this project"):
        trainer.load_model_checkpoint({"shared": weights})
    with pytest.raises(FileNotFoundError, match=r"does not exist$"):  # any other path: the plain message
        trainer.load_model_checkpoint({"shared": str(tmp_path / "nowhere.state_dict")})
    trainer.graceful_close()


# ----------------------------------------------------------------------------- item: the checker's actions
def _spy_on_actions(monkeypatch) -> list:
    import warp_drive.compat.consistency_checker as checker

    draws = []
    original = checker.generate_random_actions

    def spy(env, num_envs, seed=None):
        actions = original(env, num_envs, seed)
        draws.append([[int(a[agent]) for agent in sorted(a)] for a in actions])
        return actions

    monkeypatch.setattr(checker, "generate_random_actions", spy)
    return draws


def test_checker_with_a_seed_steps_with_warpdrives_actions_every_step(registrar, monkeypatch):
    from warp_drive.env_cpu_gpu_consistency_checker import EnvironmentCPUvsGPU, generate_random_actions

    draws = _spy_on_actions(monkeypatch)
    checker = EnvironmentCPUvsGPU(dual_mode_env_class=LineChase, env_configs={"a": LINE_CHASE, "b": LINE_CHASE},
                                  num_envs=2, num_episodes=1, gpu_env_backend="cpu", env_registrar=registrar)
    checker.test_env_reset_and_step(seed=274880)
    assert len(draws) == 2 * LINE_CHASE["episode_length"]
    assert all(d == draws[0] for d in draws)  # reseeded on every call, as WarpDrive's
    # WarpDrive's values: NumPy's legacy stream for that seed, env by env, agent by agent.
    legacy = np.random.RandomState(274880)
    assert draws[0] == [[int(legacy.randint(low=0, high=3, dtype=np.int32)) for _ in range(4)] for _ in range(2)]
    state = np.random.get_state()[1].copy()
    generate_random_actions(LineChase(**LINE_CHASE), 2, seed=3)
    assert np.array_equal(np.random.get_state()[1], state)  # the global np.random is left alone

    draws.clear()
    checker.test_env_reset_and_step()  # no seed: fresh actions every step
    assert len(draws) == 2 * LINE_CHASE["episode_length"] and any(d != draws[0] for d in draws)


# ----------------------------------------------------------------------------- item: use_gpu_testing_mode
def test_use_gpu_testing_mode_is_accepted_and_reaches_the_wrapper(registrar):
    from warp_drive.env_cpu_gpu_consistency_checker import EnvironmentCPUvsGPU
    from warp_drive.env_wrapper import EnvWrapper

    seen = []

    class RecordingWrapper(EnvWrapper):
        def __init__(self, **kwargs):
            seen.append({k: kwargs.get(k) for k in ("testing_mode", "testing_bin_filename")})
            super().__init__(**kwargs)

    # WarpDrive's two consistency tests: num_envs=2, num_episodes=2, use_gpu_testing_mode=True.
    EnvironmentCPUvsGPU(dual_mode_env_class=LineChase, env_configs={"test1": LINE_CHASE}, num_envs=2,
                        num_episodes=2, gpu_env_backend="cpu", use_gpu_testing_mode=True, env_registrar=registrar,
                        env_wrapper=RecordingWrapper).test_env_reset_and_step(seed=274880)
    assert seen == [{"testing_mode": True, "testing_bin_filename": None}]
    seen.clear()
    EnvironmentCPUvsGPU(dual_mode_env_class=LineChase, env_configs={"test1": LINE_CHASE}, num_envs=2,
                        num_episodes=1, gpu_env_backend="cpu", env_registrar=registrar,
                        env_wrapper=RecordingWrapper).test_env_reset_and_step()
    assert seen == [{"testing_mode": None, "testing_bin_filename": None}]  # not passed, as in WarpDrive

    # The wrapper in testing mode runs the same kernel, built from source, as one without it.
    tested = EnvWrapper(env_obj=LineChase(**LINE_CHASE), num_envs=2, env_backend="cpu", env_registrar=registrar,
                        testing_mode=True, testing_bin_filename="test_build.fatbin")
    plain = EnvWrapper(env_obj=LineChase(**LINE_CHASE), num_envs=2, env_backend="cpu", env_registrar=registrar)
    assert tested.testing_mode and not plain.testing_mode
    for wrapper in (tested, plain):
        wrapper.reset_all_envs()
        wrapper.actions.copy_(torch.ones_like(wrapper.actions))
        wrapper.step_all_envs()
    torch.testing.assert_close(tested.obs, plain.obs)
    torch.testing.assert_close(tested.rewards, plain.rewards)


def test_testing_mode_refuses_a_foreign_binary_with_the_fix(registrar):
    from warp_drive.env_cpu_gpu_consistency_checker import EnvironmentCPUvsGPU
    from warp_drive.env_wrapper import EnvWrapper

    with pytest.raises(ValueError, match=r"my_env\.cubin.*only WarpDrive's own test binaries.*add_cuda_env_src_path"):
        EnvWrapper(env_obj=LineChase(**LINE_CHASE), num_envs=2, env_backend="cpu", env_registrar=registrar,
                   testing_mode=True, testing_bin_filename="my_env.cubin")
    with pytest.raises(ValueError, match=r"only read with use_gpu_testing_mode=True"):
        EnvironmentCPUvsGPU(dual_mode_env_class=LineChase, env_configs={"a": LINE_CHASE},
                            testing_bin_filename="test_build.fatbin")


# ----------------------------------------------------------------------------- item: default_configs.yaml
def test_default_configs_is_refused_in_one_message(cache):
    from warp_drive.utils.common import get_project_root

    path = get_project_root() / "warp_drive" / "training" / "run_configs" / "default_configs.yaml"
    for source in (path, FIXTURES / "default_configs.yaml"):
        with pytest.raises(ConfigError) as info:
            load_config(source)
        text = str(info.value)
        assert text.count("default_configs.yaml is WarpDrive's defaults") == 1, text
        assert text.count("policy holds one section per policy tag") == 1, text
        assert "to_train, algorithm, vf_loss_coeff" in text and "tag_continuous.yaml" in text


def test_a_policy_entry_that_is_not_a_section_names_it():
    from warp_drive.compat.run_config import translate

    with pytest.raises(ConfigError, match=r"policy\.shared: expected a policy section .* got 3 \(also not "
                                          r"sections: runner\)") as info:
        translate({"name": "tag_gridworld", "env": {"num_taggers": 2}, "policy": {"shared": 3, "runner": "x"}})
    assert "default_configs" not in str(info.value)


# ----------------------------------------------------------------------------- item: the script's -a and -n
# The script's -a and -n runs (probes, two workers, results.json, the model files) are
# tests/compat/test_as_written_example_script.py; here, what those helpers refuse.
def test_example_script_auto_scale_refuses_no_iterations(cache, tmp_path):
    from warp_drive.training.utils.vertical_scaler import perform_auto_vertical_scaling

    run_config = shrink(read_run_config("tag_gridworld"), tmp_path)
    with pytest.raises(ValueError, match="num_iters"):
        perform_auto_vertical_scaling(setup_trainer_and_train, run_config, num_iters=0)


def test_example_script_distributed_training_needs_two_workers(cache, tmp_path):
    from warp_drive.training.utils.distributed_train.distributed_trainer_pycuda import (
        perform_distributed_training,
    )

    run_config = shrink(read_run_config("tag_gridworld"), tmp_path)
    run_config["trainer"]["num_gpus"] = 1
    with pytest.raises(ValueError, match=r"num_gpus'\] is 1; .* must be an integer >= 2"):
        perform_distributed_training(setup_trainer_and_train, run_config)


def test_trainer_outside_a_launched_group_refuses_num_devices(tmp_path):
    from example_envs.tag_gridworld.tag_gridworld import TagGridWorld
    from warp_drive.env_wrapper import EnvWrapper
    from warp_drive.training.trainer import Trainer

    run_config = shrink(yaml.safe_load((FIXTURES / "tag_gridworld.yaml").read_text()), tmp_path)
    wrapper = EnvWrapper(env_obj=TagGridWorld(**run_config["env"]), num_envs=2, env_backend="cpu")
    with pytest.raises(ValueError, match="perform_distributed_training"):
        Trainer(wrapper, run_config, {"shared": list(range(wrapper.n_agents))}, num_devices=2, device_id=1)
