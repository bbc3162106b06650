// COMPAT CODE (WarpDrive 2.7): CudaTagGridWorldStep, the name and parameter
// list of the TagGridWorld step that WarpDrive's test build held, as a thin
// translator over this project's TagGridWorld step. It is not WarpDrive's code
// and holds no step logic of its own: it calls tag_gridworld_step(), the device
// function of example_envs/tag_gridworld/tag_gridworld.cu that the env's own
// kernel TagGridWorldStep runs, so both kernels step the env the same way.
// <warp_drive/compat/test_steps.cu> includes this file, so that
// get_project_root()'s test_build.cu provides the kernel (WarpDrive's test
// tests/example_envs/pycuda_tests/test_tag_gridworld_step_cuda.py launches it).
//
//   CudaTagGridWorldStep(loc_x, loc_y, actions, done, rewards, observations,
//                        wall_hit_penalty, tag_reward_for_tagger,
//                        tag_penalty_for_runner, step_cost_for_tagger,
//                        use_full_observation, world_boundary, timestep,
//                        episode_length)
//
// What it supplies that WarpDrive's parameter list lacks:
//   * the agent count: wkNumberAgents of <warp_drive/compat/warpdrive.h> (the
//     loading function manager's num_agents);
//   * the agent types: WarpDrive's convention, the last agent is the runner
//     (type 1) and all others are taggers (type 0), the same types the env
//     class declares; kept in a __shared__ array of wkNumberAgents ints (at
//     most WD_COMPAT_TAG_GRIDWORLD_MAX_AGENTS agents; a launch with more stops
//     with an assert saying so -- WarpDrive's kernel, one thread per agent, had
//     at most 1024);
//   * WarpDrive's done flag: it had no truncation flag, so after the step the
//     env's 2 (truncated at episode_length) becomes 1; a tagged env's 1 stays 1.
//
// Everything else -- moves, wall penalties, the tag test, rewards, the
// observation layouts and their normalisation -- is the env's own step. Like
// that step it runs one block per env (WarpDrive's launch: block=fm.block,
// grid=fm.grid).
//
// Including the env's .cu also brings its own kernel TagGridWorldStep into a
// build that includes this file.
#ifndef WARP_DRIVE_COMPAT_TAG_GRIDWORLD_STEP_CU
#define WARP_DRIVE_COMPAT_TAG_GRIDWORLD_STEP_CU

#include <assert.h>

#include <warp_drive/compat/warpdrive.h>

// The example env's source, found from this file: the example_envs package sits
// beside the warp_drive/ folder, in a source checkout and once installed alike.
#if __has_include("../../../../../example_envs/tag_gridworld/tag_gridworld.cu")
#include "../../../../../example_envs/tag_gridworld/tag_gridworld.cu"
#else
#error "warp_drive/compat/tag_gridworld_step.cu: example_envs/tag_gridworld/tag_gridworld.cu not found beside the warp_drive package folder (the example_envs package installs with warp_drive); reinstall warp-drive"
#endif

#ifndef WD_COMPAT_TAG_GRIDWORLD_MAX_AGENTS
#define WD_COMPAT_TAG_GRIDWORLD_MAX_AGENTS 4096  // 16 KiB of __shared__ types, within every GPU's static limit
#endif

extern "C" __global__ void CudaTagGridWorldStep(int* loc_x, int* loc_y, int* actions, int* done, float* rewards,
                                                float* observations, float wall_hit_penalty,
                                                float tag_reward_for_tagger, float tag_penalty_for_runner,
                                                float step_cost_for_tagger, bool use_full_observation,
                                                int world_boundary, int* timestep, int episode_length) {
  const int kTypes = wkNumberAgents < WD_COMPAT_TAG_GRIDWORLD_MAX_AGENTS ? wkNumberAgents
                                                                         : WD_COMPAT_TAG_GRIDWORLD_MAX_AGENTS;
  __shared__ int agent_types[kTypes];
  assert(wkNumberAgents <= WD_COMPAT_TAG_GRIDWORLD_MAX_AGENTS &&
         "CudaTagGridWorldStep: more agents than WD_COMPAT_TAG_GRIDWORLD_MAX_AGENTS (4096); run TagGridWorld "
         "through EnvWrapper (its kernel TagGridWorldStep takes the agent types as an array)");
  // WarpDrive's types: taggers 0 .. N-2, the runner N-1; every entry stored
  // before the barrier, for whichever agent's row reads it.
  WD_FOR_EACH_AGENT(a, kTypes) { agent_types[a] = a == wkNumberAgents - 1 ? 1 : 0; }
  wd_sync_env();

  tag_gridworld_step(loc_x, loc_y, actions, agent_types, rewards, observations, wall_hit_penalty,
                     tag_reward_for_tagger, tag_penalty_for_runner, step_cost_for_tagger,
                     use_full_observation ? 1 : 0, world_boundary, done, timestep, wkNumberAgents, episode_length);

  // WarpDrive's done flag: 1 for a tag and for the time limit alike. After a
  // barrier, so that the flag the step wrote is final whichever thread wrote it.
  wd_sync_env();
  if (wd_env_leader() && done[wd_env_id()] == 2) done[wd_env_id()] = 1;
}

#endif  // WARP_DRIVE_COMPAT_TAG_GRIDWORLD_STEP_CU
