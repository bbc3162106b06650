"""WarpDrive 2.7's ``get_project_root()``: a directory laid out as WarpDrive's repository, holding what
WarpDrive programs read from it that this project ships.

WarpDrive's ``warp_drive.utils.common.get_project_root()`` returned its source
checkout (or site-packages), and its programs read files under it by path:

* ``warp_drive/training/run_configs/<env>.yaml`` (its example training script,
  its training tests): **shipped** here, WarpDrive 2.7.1's run configs with
  WarpDrive's keys and values (:data:`RUN_CONFIG_FILES`, and
  ``default_configs.yaml`` from :data:`~warp_drive.compat.run_config.WARPDRIVE_DEFAULTS`).
  A ``Trainer`` or ``warp-drive train`` given one translates it
  (:mod:`warp_drive.compat.run_config`).
* ``warp_drive/cuda_includes/test_build.cu`` (tutorials 2 and 3 build it with
  ``CUDAFunctionManager._compile`` into ``cuda_bin/test_build.fatbin`` and load
  that): **this project's own file** (:data:`TEST_BUILD_SOURCE`), giving what
  WarpDrive's gave those programs. The sampler, reset and log kernels are this
  project's, loaded into every function manager; ``testkernel`` (WarpDrive's
  dummy test step, its name and parameters) comes from
  ``<warp_drive/compat/test_steps.cu>``. No size is fixed in it: the loading
  function manager's sizes are the header's ``wkNumberEnvs``/``wkNumberAgents``.
  ``CudaTagGridWorldStep`` (WarpDrive's name and parameter list for the
  TagGridWorld step, which its test ``test_tag_gridworld_step_cuda.py``
  launches) comes from ``<warp_drive/compat/tag_gridworld_step.cu>``: a
  translator that runs the example env's own step (agent types and count from
  WarpDrive's convention, done = 1 at the time limit as WarpDrive's flag);
  including the env's ``.cu`` also brings its ``TagGridWorldStep``. Not in it:
  WarpDrive's ``CudaTagContinuousStep`` (this project's TagContinuous has one
  kernel, with other parameters, run through ``EnvWrapper``).
* ``warp_drive/cuda_bin/``: where WarpDrive's programs put and find builds;
  a writable directory here, empty until ``_compile`` writes into it.
* ``tutorials/assets/tag_continuous_training/{tagger,runner}_1000010000.state_dict``
  (tutorial 5 loads them with ``load_model_checkpoint`` and renders an
  episode): **this project's own weights** (:data:`TUTORIAL5_WEIGHTS`, package
  data under ``warp_drive/compat/assets/tutorial5/``), not WarpDrive's: tutorial
  5's two A2C policies (``fully_connected``, ``fc_dims [256, 256]``) trained by
  this project's Trainer on tutorial 5's env config (5 taggers, 100 runners,
  grid 20, 500-step episodes) for :data:`TUTORIAL5_TRAINING` ``["env_steps"]``
  env steps on one CPU core, by ``benchmarks/train_tutorial5_weights.py`` (which
  remakes them; its figures are in :data:`TUTORIAL5_TRAINING`). They are this
  project's actor-critic state dicts, as the compat ``save_model_checkpoint``
  writes them. The ``1000010000`` in the names is WarpDrive's file name, kept
  so that the tutorial's paths work, not this training's step count (loading
  sets the trainer's env step to it, as WarpDrive's did). WarpDrive's own files,
  copied over them from a WarpDrive checkout, load too, converted by
  :mod:`warp_drive.compat.weights`.
* **not shipped**: a prebuilt ``warp_drive/cuda_bin/test_build.fatbin`` (until
  ``_compile`` makes it there from ``test_build.cu``; kernels here are built
  from their ``.cu`` source into the build cache), WarpDrive's other
  ``cuda_includes`` files (its core kernels, ``test_build_multiblocks.cu``,
  templates), WarpDrive's own tutorial assets (its pretrained ``.state_dict``
  weights -- binary files of WarpDrive's -- its figures and its copy of the run
  config) and ``example_envs/**/*.cu`` (WarpDrive's kernels; this project's
  example envs, with their own kernels, are the installed package ``example_envs``).
  :func:`not_shipped` says so for a path a program asked for.

The directory is ``<build cache>/warpdrive_project_root/<hash of the shipped
files>`` (``$WARP_DRIVE_CACHE``, default under the user's cache directory):
nothing is written inside the installed package, files are written only when
missing (a user's edits to a run config are kept, as in a WarpDrive checkout),
and a version of this project that ships other files uses another directory.
``README.txt`` there lists what is and is not provided.
"""

from __future__ import annotations

import functools
import hashlib
import os
import tempfile
from importlib import resources
from pathlib import Path

import yaml

from warp_drive.runtime.backends.build_cache import cache_dir, private_dir, write_atomically
from warp_drive.compat.run_config import WARPDRIVE_DEFAULTS

CACHE_NAME = "warpdrive_project_root"
RUN_CONFIGS_DIR = "warp_drive/training/run_configs"
CUDA_BIN_DIR = "warp_drive/cuda_bin"
CUDA_INCLUDES_DIR = "warp_drive/cuda_includes"
TEST_BUILD = f"{CUDA_INCLUDES_DIR}/test_build.cu"

# get_project_root()/warp_drive/cuda_includes/test_build.cu: this project's file (not WarpDrive's).
TEST_BUILD_SOURCE = """\
// warp_drive/cuda_includes/test_build.cu under WarpDrive's get_project_root():
// written by warp_drive.compat.project_root. This project's file, not
// WarpDrive's: it gives a program that builds it (tutorials 2 and 3:
// CUDAFunctionManager._compile(main_file=this file, cubin_file=...fatbin), then
// load_cuda_from_binary_file(...fatbin)) what WarpDrive's test build gave it:
//
//   * the core services -- action sampler, env reset, log: this project's own
//     kernels, loaded into every function manager, so CUDASampler,
//     CUDAEnvironmentReset and CUDALogController work without anything here;
//   * WarpDrive's device helper names (getEnvID, getAgentID,
//     __sync_env_threads, wkNumberEnvs, wkNumberAgents, wkBlocksPerEnv) from
//     <warp_drive/compat/warpdrive.h>, which every such build includes first;
//   * testkernel, WarpDrive's dummy test step with its name and parameters
//     (tutorial 3 steps it), from <warp_drive/compat/test_steps.cu>;
//   * CudaTagGridWorldStep, WarpDrive's name and parameter list for the
//     TagGridWorld step (its test_tag_gridworld_step_cuda.py launches it), from
//     <warp_drive/compat/tag_gridworld_step.cu>: compat code that runs this
//     project's TagGridWorld step (example_envs/tag_gridworld/tag_gridworld.cu,
//     whose own kernel TagGridWorldStep comes along) with WarpDrive's agent
//     types (the last agent is the runner) and WarpDrive's done flag (1 at the
//     time limit too; this project's env says 2, truncated).
//
// No size is fixed here (WarpDrive's fixed 2 envs of 5 agents): the sizes are
// those of the function manager that loads the build, any of them.
//
// Not here: WarpDrive's CudaTagContinuousStep, its test-only copy of the
// TagContinuous step with WarpDrive's parameter list. This project's
// TagContinuous has one kernel, with its own parameters (TagContinuousStep);
// run it through EnvWrapper.
//
// Your own steps may be added below (#include "/path/to/your_step.cu"): they
// build with the names above on both executors. The file is written only when
// missing, so your edits are kept.
#include <warp_drive/compat/test_steps.cu>
"""

# WarpDrive 2.7.1's warp_drive/training/run_configs/*.yaml: its keys and values, re-typed.
RUN_CONFIG_FILES: dict[str, str] = {
    "tag_continuous": """\
name: tag_continuous
env: {num_taggers: 10, num_runners: 100, grid_length: 20.0, episode_length: 500, max_acceleration: 0.1,
  min_acceleration: -0.1, max_turn: 2.356, min_turn: -2.356, num_acceleration_levels: 20, num_turn_levels: 20,
  skill_level_runner: 1.0, skill_level_tagger: 1.0, max_speed: 1.0, seed: 274880, use_full_observation: false,
  runner_exits_game_after_tagged: true, num_other_agents_observed: 10, tag_reward_for_tagger: 10.0, tag_penalty_for_runner: -10.0,
  step_penalty_for_tagger: 0.0, step_reward_for_runner: 0.0, edge_hit_penalty: 0.0, end_of_game_reward_for_runner: 1.0,
  tagging_distance: 0.02}
trainer: {num_envs: 100, num_episodes: 500, train_batch_size: 25000}
policy:
  runner:
    to_train: true
    algorithm: A2C
    vf_loss_coeff: 1
    entropy_coeff: 0.05
    clip_grad_norm: true
    max_grad_norm: 0.5
    normalize_advantage: false
    normalize_return: false
    gamma: 0.98
    lr: 0.005
    model:
      type: fully_connected
      fc_dims: [256, 256]
      model_ckpt_filepath: ''
  tagger:
    to_train: true
    algorithm: A2C
    vf_loss_coeff: 1
    entropy_coeff: 0.05
    clip_grad_norm: true
    max_grad_norm: 0.5
    normalize_advantage: false
    normalize_return: false
    gamma: 0.98
    lr: 0.001
    model:
      type: fully_connected
      fc_dims: [256, 256]
      model_ckpt_filepath: ''
saving: {metrics_log_freq: 100, model_params_save_freq: 5000, basedir: /tmp, name: tag_continuous, tag: experiments}
""",
    "tag_gridworld": """\
name: tag_gridworld
env: {num_taggers: 4, grid_length: 100, episode_length: 100, seed: 20, wall_hit_penalty: 0.1, tag_reward_for_tagger: 10.0,
  tag_penalty_for_runner: 5.0, step_cost_for_tagger: 0.01}
trainer: {num_envs: 2000, num_episodes: 20000, train_batch_size: 200000, env_backend: pycuda}
policy:
  shared:
    to_train: true
    algorithm: A2C
    vf_loss_coeff: 1
    entropy_coeff: 0.05
    clip_grad_norm: true
    max_grad_norm: 3
    normalize_advantage: false
    normalize_return: false
    gamma: 0.98
    lr: 0.001
    model:
      type: fully_connected
      fc_dims: [32, 32]
      model_ckpt_filepath: ''
saving: {metrics_log_freq: 100, model_params_save_freq: 5000, basedir: /tmp, name: tag_gridworld, tag: experiments}
""",
    "tag_gridworld_with_reset_pool": """\
name: tag_gridworld_with_reset_pool
env: {num_taggers: 4, grid_length: 100, episode_length: 100, seed: 20, wall_hit_penalty: 0.1, tag_reward_for_tagger: 10.0,
  tag_penalty_for_runner: 5.0, step_cost_for_tagger: 0.01}
trainer: {num_envs: 2000, num_episodes: 20000, train_batch_size: 200000, env_backend: pycuda}
policy:
  shared:
    to_train: true
    algorithm: A2C
    vf_loss_coeff: 1
    entropy_coeff: 0.05
    clip_grad_norm: true
    max_grad_norm: 3
    normalize_advantage: false
    normalize_return: false
    gamma: 0.98
    lr: 0.001
    model:
      type: fully_connected
      fc_dims: [32, 32]
      model_ckpt_filepath: ''
saving: {metrics_log_freq: 100, model_params_save_freq: 5000, basedir: /tmp, name: tag_gridworld, tag: experiments}
""",
    "single_cartpole": """\
name: single_cartpole
env: {episode_length: 500, reset_pool_size: 1000}
trainer: {num_envs: 100, num_episodes: 200000, train_batch_size: 50000, env_backend: numba}
policy:
  shared:
    to_train: true
    algorithm: A2C
    vf_loss_coeff: 1
    entropy_coeff: 0.05
    clip_grad_norm: true
    max_grad_norm: 3
    normalize_advantage: false
    normalize_return: false
    gamma: 0.99
    lr: 0.001
    model:
      type: fully_connected
      fc_dims: [32, 32]
      model_ckpt_filepath: ''
saving: {metrics_log_freq: 100, model_params_save_freq: 5000, basedir: /tmp, name: single_cartpole, tag: experiments}
""",
    "single_acrobot": """\
name: single_acrobot
env: {episode_length: 500, reset_pool_size: 1000}
trainer: {num_envs: 100, num_episodes: 200000, train_batch_size: 50000, env_backend: numba}
policy:
  shared:
    to_train: true
    algorithm: A2C
    vf_loss_coeff: 0.1
    entropy_coeff: 0.1
    clip_grad_norm: true
    max_grad_norm: 3
    normalize_advantage: false
    normalize_return: false
    gamma: 0.99
    lr: 0.001
    model:
      type: fully_connected
      fc_dims: [32, 32]
      model_ckpt_filepath: ''
saving: {metrics_log_freq: 100, model_params_save_freq: 5000, basedir: /tmp, name: single_acrobot, tag: experiments}
""",
    "single_mountain_car": """\
name: single_mountain_car
env: {episode_length: 500, reset_pool_size: 10000}
trainer: {num_envs: 1000, num_episodes: 2000000, train_batch_size: 500000, env_backend: numba, neg_pos_env_ratio: 10}
policy:
  shared:
    to_train: true
    algorithm: A2C
    vf_loss_coeff: 1
    entropy_coeff: 0.05
    clip_grad_norm: true
    max_grad_norm: 3
    normalize_advantage: false
    normalize_return: false
    gamma: 0.99
    lr: 0.001
    model:
      type: fully_connected
      fc_dims: [32, 32]
      model_ckpt_filepath: ''
saving: {metrics_log_freq: 100, model_params_save_freq: 5000, basedir: /tmp, name: single_mountain_car,
  tag: experiments}
""",
    "single_continuous_mountain_car": """\
name: single_continuous_mountain_car
env: {episode_length: 1000, reset_pool_size: 10000}
trainer: {num_envs: 10000, num_episodes: 1000000, train_batch_size: 50000, n_step: 5, env_backend: numba,
  evaluator: true}
policy:
  shared:
    to_train: true
    algorithm: DDPG
    clip_grad_norm: true
    max_grad_norm: 3
    normalize_advantage: false
    normalize_return: false
    gamma: 0.99
    tau: 0.05
    lr: {actor: 0.001, critic: 0.0001}
    model:
      actor:
        type: fully_connected_actor
        fc_dims: [64, 64]
      critic:
        type: fully_connected_action_value_critic
        fc_dims: [64, 64]
      model_ckpt_filepath: {actor: '', critic: ''}
sampler:
  params: {damping: 0.15, stddev: 0.5, scale: 1.0}
saving: {metrics_log_freq: 1000, model_params_save_freq: 5000, basedir: /tmp, name: single_continuous_mountain_car,
  tag: experiments}
""",
    "single_pendulum": """\
name: single_pendulum
env: {episode_length: 500, reset_pool_size: 10000}
trainer: {num_envs: 10000, num_episodes: 10000000, train_batch_size: 50000, n_step: 5, env_backend: numba}
policy:
  shared:
    to_train: true
    algorithm: DDPG
    clip_grad_norm: true
    max_grad_norm: 3
    normalize_advantage: false
    normalize_return: false
    gamma: 0.99
    tau: 0.05
    lr:
      actor:
      - [2500000000, 0.001]
      - [3750000000, 0.0005]
      critic:
      - [2500000000, 0.0001]
      - [3750000000, 5.0e-05]
    model:
      actor:
        type: fully_connected_actor
        fc_dims: [64, 64]
        output_w: 2.0
      critic:
        type: fully_connected_action_value_critic
        fc_dims: [64, 64]
      model_ckpt_filepath: {actor: '', critic: ''}
sampler:
  params: {damping: 0.15, stddev: 0.2, scale: 1.0}
saving: {metrics_log_freq: 1000, model_params_save_freq: 5000, basedir: /export/home/experiments/warpdrive,
  name: pendulum, tag: '10000'}
""",
}

TUTORIAL5_ASSETS_DIR = "tutorials/assets/tag_continuous_training"
# get_project_root()/<path> -> the package data file (under warp_drive/compat/) written there: this project's
# weights for tutorial 5 (see the module docstring). The names are WarpDrive's, kept for the tutorial's paths.
TUTORIAL5_WEIGHTS: dict[str, str] = {
    f"{TUTORIAL5_ASSETS_DIR}/tagger_1000010000.state_dict": "assets/tutorial5/tagger_1000010000.state_dict",
    f"{TUTORIAL5_ASSETS_DIR}/runner_1000010000.state_dict": "assets/tutorial5/runner_1000010000.state_dict",
}
# How the shipped weights were made (benchmarks/train_tutorial5_weights.py's printed figures: 40 envs, one CPU core,
# 32 iterations of the tutorial's A2C in 727 s). Rewards: mean episodic reward per agent over one 500-step episode
# in each of the 40 envs; runners tagged: per episode, of 100. A short training: with sampled actions the taggers
# tag more than untrained ones; with greedy (argmax) actions the pair tags far fewer runners than an untrained
# pair (which of the two policies accounts for that was not measured). Far from WarpDrive's 1e9-step training.
TUTORIAL5_TRAINING: dict = {
    "env_steps": 320_000, "iterations": 32, "num_envs": 40, "train_batch_size": 10_000, "train_seconds": 727,
    "cpu_cores": 1,
    # (tagger reward per agent, runner reward per agent, runners tagged per episode), before -> after training
    "sampled": {"before": (156.45, -7.60, 78.2), "after": (177.30, -8.75, 88.7)},
    "greedy": {"before": (178.05, -8.79, 89.0), "after": (45.70, -1.51, 22.9)},
}


# What WarpDrive programs read under the root that is not shipped, and why (path prefix -> sentence).
NOT_SHIPPED: dict[str, str] = {
    "tutorials/assets/": "WarpDrive's own tutorial assets (its pretrained weights, figures and run-config copy) "
                         "are WarpDrive's files and are not shipped by this project. What is shipped there: "
                         "tutorial 5's tagger_1000010000.state_dict and runner_1000010000.state_dict under "
                         "tutorials/assets/tag_continuous_training/, this project's own weights (trained by this "
                         "project on tutorial 5's config; the 1000010000 is WarpDrive's file name, not their step "
                         "count). WarpDrive's files, copied from a WarpDrive 2.7 checkout, load too "
                         "(load_model_checkpoint converts WarpDrive's layout); or train the policies here "
                         "(Trainer.train(), `warp-drive train -e tag_continuous`)",
    "warp_drive/cuda_bin/test_build": "WarpDrive's prebuilt test binaries are not shipped: kernels here are built "
                                      "from their .cu source into the build cache. Make test_build.fatbin as "
                                      "WarpDrive's tutorials 2 and 3 do, CUDAFunctionManager._compile("
                                      f"main_file=f'{{get_project_root()}}/{TEST_BUILD}', cubin_file=<this path>), "
                                      "then load_cuda_from_binary_file(<this path>); or build a source with "
                                      "load_cuda_from_source_code(code), or run an env through EnvWrapper, which "
                                      "builds its kernel",
    "warp_drive/cuda_includes/": "WarpDrive's other cuda_includes files (core_service.h and its core kernels, "
                                 "test_build_multiblocks.cu, the env_config/env_runner templates) are not shipped: "
                                 "the core kernels are built in (warp_drive/cuda/, included with "
                                 "#include <warp_drive/...>), WarpDrive's device helper names come from "
                                 "<warp_drive/compat/warpdrive.h>, and test_build.cu (this project's, provided) "
                                 "builds for the loading function manager's sizes, blocks_per_env included",
    "example_envs/": "WarpDrive's example env sources are not shipped under this root: this project's example envs "
                     "are the installed package example_envs, with their own kernels next to their classes",
}


def _files() -> dict[str, str]:
    files = {f"{RUN_CONFIGS_DIR}/{name}.yaml": f"# WarpDrive 2.7.1's run config {name}.yaml (keys and values), "
                                                f"shipped by warp_drive.compat.project_root.\n{text}"
             for name, text in RUN_CONFIG_FILES.items()}
    defaults = yaml.safe_dump(WARPDRIVE_DEFAULTS, sort_keys=False, default_flow_style=None, width=100)
    files[f"{RUN_CONFIGS_DIR}/default_configs.yaml"] = (
        "# WarpDrive 2.7.1's default_configs.yaml: the defaults merged into every run config (not a run config).\n"
        + defaults)
    lines = ["A directory laid out as WarpDrive 2.7's repository, for WarpDrive programs that read files under",
             "warp_drive.utils.common.get_project_root(). Written by warp_drive.compat.project_root.", "",
             "Provided:",
             f"  {RUN_CONFIGS_DIR}/*.yaml  WarpDrive 2.7.1's run configs (translated when a Trainer reads them)",
             f"  {TEST_BUILD}  this project's test build (not WarpDrive's): WarpDrive's helper names, its",
             "      testkernel (tutorial 3's step), CudaTagGridWorldStep (WarpDrive's parameters over this",
             "      project's TagGridWorld step) and, loaded with any build, the sampler, reset and log kernels;",
             "      build it with CUDAFunctionManager._compile(main_file=..., cubin_file=...) as WarpDrive did.",
             "      Not in it: WarpDrive's CudaTagContinuousStep (see the file)",
             f"  {CUDA_BIN_DIR}/  a writable directory (_compile writes its 'binaries' here)",
             f"  {TUTORIAL5_ASSETS_DIR}/{{tagger,runner}}_1000010000.state_dict  this project's own weights",
             "      for tutorial 5 (not WarpDrive's): its two A2C policies trained by this project on tutorial 5's",
             f"      env config for {TUTORIAL5_TRAINING['env_steps']} env steps "
             "(benchmarks/train_tutorial5_weights.py in the source).",
             "      The 1000010000 in the names is WarpDrive's file name, kept so that the tutorial's paths work,",
             "      not their step count. WarpDrive's own files, copied over them, load too (converted).",
             "", "Not provided:"]
    lines += [f"  {prefix}...  {why}" for prefix, why in NOT_SHIPPED.items()]
    files["README.txt"] = "\n".join(lines) + "\n"
    files[TEST_BUILD] = TEST_BUILD_SOURCE
    return files


@functools.lru_cache(maxsize=1)
def _binary_files() -> dict[str, bytes]:
    """The shipped binary files (:data:`TUTORIAL5_WEIGHTS`), read from the package data."""
    out = {}
    package = resources.files("warp_drive.compat")
    for name, data in TUTORIAL5_WEIGHTS.items():
        source = package.joinpath(data)
        if not source.is_file():
            raise FileNotFoundError(f"warp_drive/compat/{data} (package data, laid out at get_project_root()/{name}) "
                                    f"is missing from this installation: reinstall warp-drive, or in a checkout "
                                    f"remake it with `python -m benchmarks.train_tutorial5_weights`")
        out[name] = source.read_bytes()
    return out


def _version(files: dict[str, str], binary: dict[str, bytes]) -> str:
    digest = hashlib.sha256()
    for name in sorted(files):
        digest.update(name.encode() + b"\0" + files[name].encode() + b"\0")
    for name in sorted(binary):
        digest.update(name.encode() + b"\0" + hashlib.sha256(binary[name]).digest() + b"\0")
    return digest.hexdigest()[:16]


def _write_bytes_atomically(target: Path, data: bytes) -> None:
    fd, tmp = tempfile.mkstemp(prefix=target.name + ".", suffix=".tmp", dir=target.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        os.replace(tmp, target)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def get_project_root() -> Path:
    """The directory WarpDrive programs read files under (see the module docstring); created, and its
    missing files written, on every call."""
    files, binary = _files(), _binary_files()
    root = private_dir(cache_dir(CACHE_NAME) / _version(files, binary))
    for name, content in [*files.items(), *binary.items()]:
        path = root / name
        if not path.is_file():
            path.parent.mkdir(parents=True, exist_ok=True)
            if isinstance(content, bytes):
                _write_bytes_atomically(path, content)
            else:
                write_atomically(path, content)
    (root / CUDA_BIN_DIR).mkdir(parents=True, exist_ok=True)
    return root


def not_shipped(path: str | Path) -> str | None:
    """For a missing ``path`` under :func:`get_project_root`: a sentence naming what WarpDrive had there and
    why this project does not ship it (None for any other path)."""
    try:
        relative = Path(path).expanduser().resolve().relative_to(get_project_root().resolve()).as_posix()
    except ValueError:
        return None
    for prefix, why in NOT_SHIPPED.items():
        if relative.startswith(prefix):
            return f"{relative} (under get_project_root()): {why}"
    if relative.startswith(RUN_CONFIGS_DIR + "/"):
        return (f"{relative} (under get_project_root()): no such WarpDrive run config is shipped; the shipped ones "
                f"are {', '.join(sorted(RUN_CONFIG_FILES))}")
    return f"{relative} (under get_project_root()): not a file this project ships there (see README.txt there)"


__all__ = ["get_project_root", "not_shipped", "RUN_CONFIG_FILES", "NOT_SHIPPED", "TEST_BUILD", "TEST_BUILD_SOURCE",
           "TUTORIAL5_WEIGHTS", "TUTORIAL5_TRAINING"]
