"""WarpDrive 2.7.1's ``warp_drive/training/scripts/example_training_script_pycuda.py`` as written (issue 30).

:func:`setup_trainer_and_train` and :func:`main` below make the script's calls, with its arguments, in
its order: the imports (``CUDATagGridWorld`` and ``TagContinuous`` from ``example_envs``, ``EnvWrapper``,
``TrainerA2C``, ``perform_distributed_training``, ``perform_auto_vertical_scaling``,
``get_project_root``), ``EnvWrapper(<env>(**run_configuration["env"]), num_envs=, env_backend=,
event_messenger=, process_id=)``, for tag_gridworld the upload of ``env_wrapper.env.step_actions`` as
``kIndexToActionArr`` through ``env_wrapper.env.cuda_data_manager`` / ``cuda_function_manager``, the
policy map from ``env_wrapper.env.taggers`` / ``runners``, ``TrainerA2C(...)``, ``train()``,
``graceful_close()``, ``perf_stats``; and the ``__main__`` part: the flags ``-e``, ``-a``, ``-n``,
``--results_dir``, the run config read from
``get_project_root()/warp_drive/training/run_configs/<env>.yaml``, the ``[Y/n]`` prompt when more GPUs
are asked for than found, and the choice between ``perform_distributed_training`` and one process.

Changed, as issue 30 allows: ``env_backend="cpu"`` for ``"pycuda"``, no GPU-count assert, and
``torch.cuda.device_count()`` replaced by 2 (``NUM_GPUS_AVAILABLE``, what the verbatim harness does).
The project root is read when :func:`main` runs (the script reads it at import) so that each test's
private build cache holds it. The run configs there are made small (2 envs, 2 iterations) by editing
the YAML files in place, as a WarpDrive user edits them under the checkout.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import time

import pytest
import yaml

from example_envs.tag_continuous.tag_continuous import TagContinuous
from example_envs.tag_gridworld.tag_gridworld import CUDATagGridWorld
from warp_drive.env_wrapper import EnvWrapper
from warp_drive.training.trainers.trainer_a2c import TrainerA2C
from warp_drive.training.utils.distributed_train.distributed_trainer_pycuda import perform_distributed_training
from warp_drive.training.utils.vertical_scaler import perform_auto_vertical_scaling
from warp_drive.utils.common import get_project_root

_TAG_CONTINUOUS = "tag_continuous"
_TAG_GRIDWORLD = "tag_gridworld"
NUM_GPUS_AVAILABLE = 2  # the verbatim harness's replacement of torch.cuda.device_count()


def setup_trainer_and_train(run_configuration, device_id=0, num_devices=1, event_messenger=None,
                            results_directory=None, verbose=True):
    """The script's function (module level: the distributed workers import it)."""
    logging.getLogger().setLevel(logging.ERROR)
    num_envs = run_configuration["trainer"]["num_envs"]
    if run_configuration["name"] == _TAG_GRIDWORLD:
        env_wrapper = EnvWrapper(CUDATagGridWorld(**run_configuration["env"]), num_envs=num_envs,
                                 env_backend="cpu", event_messenger=event_messenger, process_id=device_id)
    elif run_configuration["name"] == _TAG_CONTINUOUS:
        env_wrapper = EnvWrapper(TagContinuous(**run_configuration["env"]), num_envs=num_envs,
                                 env_backend="cpu", event_messenger=event_messenger, process_id=device_id)
    else:
        raise NotImplementedError(f"environments supported: {_TAG_GRIDWORLD}, {_TAG_CONTINUOUS}")
    if run_configuration["name"] == _TAG_GRIDWORLD:
        kIndexToActionArr = env_wrapper.env.step_actions
        env_wrapper.env.cuda_data_manager.add_shared_constants({"kIndexToActionArr": kIndexToActionArr})
        env_wrapper.env.cuda_function_manager.initialize_shared_constants(
            env_wrapper.env.cuda_data_manager, constant_names=["kIndexToActionArr"])
    if len(run_configuration["policy"].keys()) == 1:
        policy_name = list(run_configuration["policy"])[0]
        policy_tag_to_agent_id_map = {policy_name: list(env_wrapper.env.taggers) + list(env_wrapper.env.runners)}
    else:
        policy_tag_to_agent_id_map = {"tagger": list(env_wrapper.env.taggers),
                                      "runner": list(env_wrapper.env.runners)}
    assert set(run_configuration["policy"].keys()) == set(policy_tag_to_agent_id_map.keys())
    trainer = TrainerA2C(env_wrapper=env_wrapper, config=run_configuration,
                         policy_tag_to_agent_id_map=policy_tag_to_agent_id_map, device_id=device_id,
                         num_devices=num_devices, results_dir=results_directory, verbose=verbose)
    trainer.train()
    trainer.graceful_close()
    perf_stats = trainer.perf_stats
    print(f"Training steps/s: {perf_stats.steps / perf_stats.total_time:.2f}. \n")


def main(argv):
    """The script's ``if __name__ == "__main__":`` part, on ``argv``."""
    num_gpus_available = NUM_GPUS_AVAILABLE
    logging.getLogger().setLevel(logging.WARNING)
    parser = argparse.ArgumentParser()
    parser.add_argument("--env", "-e", type=str)
    parser.add_argument("--auto_scale", "-a", action="store_true")
    parser.add_argument("--num_gpus", "-n", type=int, default=-1)
    parser.add_argument("--results_dir", type=str)
    args = parser.parse_args(argv)
    assert args.env is not None
    config_path = os.path.join(get_project_root(), "warp_drive", "training", "run_configs", f"{args.env}.yaml")
    if not os.path.exists(config_path):
        raise ValueError("Invalid environment specified!")
    with open(config_path, "r", encoding="utf8") as fp:
        run_config = yaml.safe_load(fp)
    if args.auto_scale:
        run_config = perform_auto_vertical_scaling(setup_trainer_and_train, run_config)
        run_config["trainer"]["num_gpus"] = num_gpus_available
    elif args.num_gpus >= 1:
        if args.num_gpus <= num_gpus_available:
            print(f"We have successfully found {args.num_gpus} GPUs!")
            run_config["trainer"]["num_gpus"] = args.num_gpus
        else:
            print(f"You requested for {args.num_gpus} GPUs, but we were only able to find {num_gpus_available} "
                  "GPU(s)! \nDo you wish to continue? [Y/n]")
            if input() != "Y":
                sys.exit()
            run_config["trainer"]["num_gpus"] = num_gpus_available
    elif "num_gpus" not in run_config["trainer"]:
        run_config["trainer"]["num_gpus"] = 1
    results_dir = args.results_dir if args.results_dir is not None else f"{time.time():10.0f}"
    print(f"Training with {run_config['trainer']['num_gpus']} GPU(s).")
    if run_config["trainer"]["num_gpus"] > 1:
        perform_distributed_training(setup_trainer_and_train, run_config, results_dir)
    else:
        setup_trainer_and_train(run_config, results_directory=results_dir)


# ----------------------------------------------------------------------------- the layout, made small
@pytest.fixture(scope="module")
def private_cache(tmp_path_factory):
    """One private build cache for this file (the kernels are built once): get_project_root() lives under it."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("WARP_DRIVE_CACHE", str(tmp_path_factory.mktemp("cache")))
        yield


@pytest.fixture
def project(private_cache, tmp_path):
    """The project root's run configs made to train 2 envs for 2 iterations, saving under
    ``tmp_path/runs``; returns that directory."""
    runs = tmp_path / "runs"
    run_configs = get_project_root() / "warp_drive" / "training" / "run_configs"
    small = {
        _TAG_GRIDWORLD: {"env": {"grid_length": 10, "episode_length": 10},
                         "trainer": {"num_envs": 2, "train_batch_size": 20, "num_episodes": 4}},
        _TAG_CONTINUOUS: {"env": {"num_taggers": 2, "num_runners": 3, "episode_length": 20},
                          "trainer": {"num_envs": 2, "train_batch_size": 20, "num_episodes": 2}},
    }
    for name, edits in small.items():
        path = run_configs / f"{name}.yaml"
        config = yaml.safe_load(path.read_text())
        for section, values in edits.items():
            config[section].update(values)
        config["saving"].update(basedir=str(runs), metrics_log_freq=1)
        path.write_text(yaml.safe_dump(config))
    return runs


def iterations_completed(results):
    lines = [json.loads(line) for line in (results / "results.json").read_text().splitlines()]
    return lines[-1]["Iterations Completed"]


@pytest.mark.slow  # builds the env's kernels into this file's private cache, then trains (about 5 s)
@pytest.mark.parametrize("env_name, policies", [(_TAG_GRIDWORLD, {"shared"}), (_TAG_CONTINUOUS, {"tagger", "runner"})])
def test_the_script_trains_an_env_for_two_iterations(project, capsys, env_name, policies):
    main(["-e", env_name, "--results_dir", "run"])
    results = project / env_name / "experiments" / "run"
    assert iterations_completed(results) == 2
    assert {f"{policy}_40.state_dict" for policy in policies} <= {p.name for p in results.iterdir()}
    out = capsys.readouterr().out
    assert "Training with 1 GPU(s)." in out and "Training steps/s" in out


@pytest.mark.slow  # two worker processes (about 12 s)
def test_the_script_trains_on_two_workers(project, capsys):
    main(["-e", _TAG_GRIDWORLD, "-n", "2", "--results_dir", "two"])
    out = capsys.readouterr().out
    assert "We have successfully found 2 GPUs!" in out and "Training with 2 GPU(s)." in out
    assert iterations_completed(project / _TAG_GRIDWORLD / "experiments" / "two") == 2


@pytest.mark.slow  # auto-scaling probes, then two worker processes (about 20 s)
def test_the_script_auto_scales_then_trains_on_two_workers(project, capsys):
    main(["-e", _TAG_GRIDWORLD, "-a", "--results_dir", "auto"])
    assert "Training with 2 GPU(s)." in capsys.readouterr().out
    assert iterations_completed(project / _TAG_GRIDWORLD / "experiments" / "auto") >= 1


def test_a_kernel_action_table_other_than_the_built_in_one_stops_the_script(project, monkeypatch):
    """The script's upload of step_actions is checked, not ignored: a CUDATagGridWorld whose table differs
    from the one its kernel holds built in is refused."""
    import warp_drive.compat.example_envs as compat_envs

    monkeypatch.setattr(compat_envs, "MOVES", compat_envs.MOVES[[0, 2, 1, 3, 4]])  # +x and -x exchanged
    with pytest.raises(ValueError, match="'kIndexToActionArr': kernel TagGridWorldStep holds this table built in"):
        main(["-e", _TAG_GRIDWORLD, "--results_dir", "bad"])
