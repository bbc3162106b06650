"""The core classes and functions take only this project's arguments; WarpDrive's live in compat/.

WarpDrive 2.7's keywords (``env_obj``, ``env_backend``, ``results_dir``,
``create_separate_placeholders_for_each_policy``, ...) are accepted by its
classes at its kept import paths, which are subclasses in ``warp_drive.compat``
over the core; the core signatures name none of them. The second test checks
that the kept paths do take them, so the first cannot pass by their removal.
"""

from __future__ import annotations

import inspect

import pytest

# Every constructor keyword of WarpDrive 2.7's EnvWrapper, Trainer and Lightning module that this project
# does not use under the same name.
WARPDRIVE_PARAMETERS = {
    "env_obj", "env_name", "env_backend", "env_registrar", "process_id", "use_cuda", "testing_mode",
    "testing_bin_filename", "event_messenger", "policy_tag_to_agent_id_map",
    "create_separate_placeholders_for_each_policy", "obs_dim_corresponding_to_num_agents", "num_devices",
    "device_id", "results_dir", "verbose", "env_wrapper",
}


def core_callables():
    from warp_drive.training import lightning, run
    from warp_drive.training.ddpg import DDPGTrainer
    from warp_drive.training.ppo import PPOTrainer
    from warp_drive.training.loop import OnDeviceTrainer
    from warp_drive.env.wrapper import EnvWrapper

    return {"EnvWrapper": EnvWrapper.__init__, "OnDeviceTrainer": OnDeviceTrainer.__init__,
            "PPOTrainer": PPOTrainer.__init__, "DDPGTrainer": DDPGTrainer.__init__,
            "lightning.WarpDriveModule": lightning.WarpDriveModule.__init__, "run.train": run.train,
            "run.build": run.build}


@pytest.mark.parametrize("name", sorted(core_callables()))
def test_core_signatures_carry_no_warpdrive_parameter(name):
    parameters = set(inspect.signature(core_callables()[name]).parameters)
    assert not parameters & WARPDRIVE_PARAMETERS, f"{name} takes WarpDrive's {sorted(parameters & WARPDRIVE_PARAMETERS)}"


def test_warpdrive_kept_paths_take_its_parameters():
    from warp_drive.env_wrapper import EnvWrapper
    from warp_drive.training.pytorch_lightning import WarpDriveModule
    from warp_drive.training.trainer import Trainer
    from warp_drive.training.trainers.trainer_ddpg import TrainerDDPG

    taken = {name: set(inspect.signature(cls.__init__).parameters)
             for name, cls in (("EnvWrapper", EnvWrapper), ("Trainer", Trainer), ("TrainerDDPG", TrainerDDPG),
                               ("WarpDriveModule", WarpDriveModule))}
    assert {"env_obj", "env_name", "env_backend", "env_registrar", "use_cuda"} <= taken["EnvWrapper"]
    for name in ("Trainer", "TrainerDDPG"):
        assert {"policy_tag_to_agent_id_map", "results_dir", "verbose", "num_devices"} <= taken[name]
    assert {"env_wrapper", "policy_tag_to_agent_id_map", "results_dir", "verbose"} <= taken["WarpDriveModule"]


def test_a_core_wrapper_is_accepted_where_warpdrive_expects_its_envwrapper():
    """WarpDrive programs handed a wrapper this project built (``build(config).env``) accept it."""
    from warp_drive import env_wrapper
    from warp_drive.env import wrapper

    assert issubclass(env_wrapper.EnvWrapper, wrapper.EnvWrapper)
    core = object.__new__(wrapper.EnvWrapper)
    assert isinstance(core, env_wrapper.EnvWrapper) and not isinstance(object(), env_wrapper.EnvWrapper)
