"""WarpDrive's build-then-load path, ``CUDAFunctionManager._compile(main_file, cubin_file)``
then ``load_cuda_from_binary_file(cubin_file)``, on both executors, with a main file
laid out as WarpDrive's ``test_build.cu`` (size constants, its core services include,
the env steps it includes by relative path)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from warp_drive.managers.function_manager import CUDAFunctionManager

STEP = """
extern "C" __global__ void scale_agents(float* x, float multiplier) {
  const int env_id = getEnvID(blockIdx.x);
  const int agent_id = getAgentID(threadIdx.x, blockIdx.x, blockDim.x);
  if (agent_id < wkNumberAgents) x[env_id * wkNumberAgents + agent_id] *= multiplier * (env_id + 1);
}
"""

MAIN = """#ifndef CUDA_INCLUDES_TEST_BUILD_CONST_H_
#define CUDA_INCLUDES_TEST_BUILD_CONST_H_
const int wkNumberEnvs = 2;
const int wkNumberAgents = 5;
const int wkBlocksPerEnv = 1;

#include "./core_service.h"
#include "../../example_envs/dummy_env/test_step.cu"

#endif  // CUDA_INCLUDES_TEST_BUILD_CONST_H_
"""


@pytest.fixture
def checkout(tmp_path):
    """A WarpDrive-like tree: warp_drive/cuda_includes/test_build.cu and the step it includes."""
    step = tmp_path / "example_envs" / "dummy_env" / "test_step.cu"
    step.parent.mkdir(parents=True)
    step.write_text(STEP)
    main = tmp_path / "warp_drive" / "cuda_includes" / "test_build.cu"
    main.parent.mkdir(parents=True)
    main.write_text(MAIN)
    return main, tmp_path / "warp_drive" / "cuda_bin" / "test_build.fatbin"


def test_compile_then_load_runs_the_step(checkout, backend_name):
    main, binary = checkout
    CUDAFunctionManager._compile(main, binary)
    manager = CUDAFunctionManager(num_agents=5, num_envs=2, backend=backend_name)
    manager.load_cuda_from_binary_file(str(binary))
    manager.initialize_functions(["scale_agents"])
    x = torch.ones(2, 5, device=manager.backend.device)
    manager.get_function("scale_agents")(x, np.float32(3.0), block=manager.block, grid=manager.grid)
    assert x.cpu().tolist() == [[3.0] * 5, [6.0] * 5]


def test_sizes_that_differ_from_the_binarys_are_refused(checkout):
    main, binary = checkout
    CUDAFunctionManager._compile(main, binary)
    manager = CUDAFunctionManager(num_agents=7, num_envs=2, backend="cpu")
    with pytest.raises(ValueError, match="wkNumberAgents = 5.*num_agents=7"):
        manager.load_cuda_from_binary_file(str(binary))


def test_a_foreign_binary_is_refused_naming_the_fix(tmp_path):
    foreign = tmp_path / "prebuilt.fatbin"
    foreign.write_bytes(b"\\x7fELF" + bytes(64))
    manager = CUDAFunctionManager(num_agents=5, num_envs=2, backend="cpu")
    with pytest.raises(ValueError, match="prebuilt binary.*_compile"):
        manager.load_cuda_from_binary_file(str(foreign))
