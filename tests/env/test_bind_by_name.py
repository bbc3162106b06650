"""A step kernel's arguments bind by their C parameter names (warp_drive.runtime.function_manager.arguments_by_name).

Binding by position let a swap of two same-typed arguments (two ints, two floats) reach the kernel, where it
corrupted memory; binding by name makes it impossible, and an old ``step_args`` list that disagrees with the C
names is refused at construction naming the position, the Python name and the C name.
"""

from __future__ import annotations

import numpy as np
import pytest

from example_envs.dummy_env.dummy_env import DummyEnv
from warp_drive.env.wrapper import EnvWrapper

DUMMY_ARGS = ("values", "sampled_actions", "observations", "rewards", "agents_on_target", "_done_", "_timestep_",
              "step_size", "target", "tolerance", "n_agents", "episode_length")


def _env_with(step_args=(), kernel_text=None, tmp_path=None):
    attributes = {"name": "Swapped", "step_args": step_args}
    if kernel_text is not None:
        path = tmp_path / "bind_probe.cu"
        path.write_text(kernel_text)
        attributes["cuda_source"] = str(path)
    return type("Swapped", (DummyEnv,), attributes)


def test_kernel_arguments_bind_by_their_c_names():
    wrapper = EnvWrapper(DummyEnv, num_envs=2, backend="cpu", seed=0)
    assert [name for name, _ in wrapper._step_argument_names] == list(DUMMY_ARGS)
    assert all(kind == ("meta" if name in ("step_size", "target", "tolerance", "n_agents", "episode_length")
                        else "device") for name, kind in wrapper._step_argument_names)


def test_a_same_typed_swap_in_step_args_is_refused_naming_both_names():
    swapped = list(DUMMY_ARGS)
    swapped[7], swapped[8] = swapped[8], swapped[7]  # step_size <-> target: both float scalars
    with pytest.raises(ValueError) as error:
        EnvWrapper(_env_with(tuple(swapped)), num_envs=2, backend="cpu", seed=0)
    message = str(error.value)
    assert "step_args[7] is 'target'" in message and "'float step_size'" in message and "Swapped" in message


def test_step_args_that_agree_with_the_c_names_still_work_with_a_deprecation_warning():
    with pytest.warns(DeprecationWarning, match="step_args is no longer needed"):
        wrapper = EnvWrapper(_env_with(DUMMY_ARGS), num_envs=2, backend="cpu", seed=0)
    plain = EnvWrapper(DummyEnv, num_envs=2, backend="cpu", seed=0)
    for w in (wrapper, plain):
        w.actions.fill_(2)
        w.step_all_envs()
    np.testing.assert_array_equal(wrapper.obs.numpy(), plain.obs.numpy())


def test_a_c_parameter_with_no_array_of_its_name_is_refused_with_close_matches(tmp_path):
    kernel = ('#include <warp_drive/core.h>\nextern "C" __global__ void DummyEnvStep(float* valuez, const int* '
              'actions, float* observations, float* rewards, int* agents_on_target, int* done, int* timestep, '
              'float step_size, float target, float tolerance, int num_agents, int episode_length) {}\n')
    with pytest.raises(ValueError) as error:
        EnvWrapper(_env_with(kernel_text=kernel, tmp_path=tmp_path), num_envs=2, backend="cpu", seed=0)
    message = str(error.value)
    assert "parameter 0 'float * valuez'" in message and "close: values" in message


def test_a_pointer_parameter_named_after_a_scalar_is_refused(tmp_path):
    kernel = ('#include <warp_drive/core.h>\nextern "C" __global__ void DummyEnvStep(float* values, const int* '
              'actions, float* observations, float* rewards, int* agents_on_target, int* done, int* timestep, '
              'float* step_size, float target, float tolerance, int num_agents, int episode_length) {}\n')
    with pytest.raises(ValueError, match=r"parameter 7 'float \* step_size' is a pointer \(an array\), but its "
                                         r"name binds the env's scalar 'step_size'"):
        EnvWrapper(_env_with(kernel_text=kernel, tmp_path=tmp_path), num_envs=2, backend="cpu", seed=0)
