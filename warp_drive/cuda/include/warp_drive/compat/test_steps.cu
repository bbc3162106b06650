// The test steps that WarpDrive 2.7's test build held, with WarpDrive's kernel
// names and parameter lists, written for this project (this is not WarpDrive's
// code). get_project_root()'s warp_drive/cuda_includes/test_build.cu includes
// it, so WarpDrive's tutorial 3 builds that file with
// CUDAFunctionManager._compile(...) and steps `testkernel` as written, and
// WarpDrive's test_tag_gridworld_step_cuda.py steps `CudaTagGridWorldStep`
// (<warp_drive/compat/tag_gridworld_step.cu>, included below).
//
//   testkernel(x, y, done, actions, multiplier, target, step, episode_length)
//
// For every agent of an env (rows env * wkNumberAgents + agent):
//   x[row]  = x[row] / multiplier                 (float)
//   y[row]  = (int)(y[row] * multiplier)          (int; the product in float, truncated)
//   actions[row * 3 + i] = i for i = 0, 1, 2      (three action slots per agent)
// and the env's done flag becomes 1 (never lowered) when step == episode_length
// or when any of its agents' new y reaches target.
//
// The number of agents is wkNumberAgents of <warp_drive/compat/warpdrive.h>,
// i.e. the loading function manager's num_agents (WarpDrive fixed it at 5 in
// its test build; here any size builds).
//
// What differs from WarpDrive's kernel, on purpose: it is correct for any
// launch. WarpDrive counted "reached the target" in a __shared__ int that
// thread 0 zeroed with no barrier before the other threads added to it, and
// called its env barrier inside a per-agent branch (undefined when threads
// diverge); with several blocks per env the count was per block. Here an agent
// that reaches the target raises its env's done flag itself (an atomicMax in
// global memory, as WarpDrive's flag write was), so the step needs no barrier,
// no shared memory, and works for one thread per agent (WarpDrive's launch) or
// a thread looping over several agents (WD_FOR_EACH_AGENT).
#ifndef WARP_DRIVE_COMPAT_TEST_STEPS_CU
#define WARP_DRIVE_COMPAT_TEST_STEPS_CU

#include <warp_drive/compat/warpdrive.h>

// CudaTagGridWorldStep (WarpDrive's test-build name and parameters for the
// TagGridWorld step), a translator over the example env's own step: see there.
#include <warp_drive/compat/tag_gridworld_step.cu>

extern "C" __global__ void testkernel(float* x, int* y, int* done, int* actions, float multiplier, int target,
                                      int step, int episode_length) {
  const int env = wd_env_id();
  const int action_dim = 3;
  WD_FOR_EACH_AGENT(agent, wkNumberAgents) {
    const int row = env * wkNumberAgents + agent;
    x[row] = wd_fdiv_rn(x[row], multiplier);
    y[row] = (int)wd_fmul_rn((float)y[row], multiplier);
    for (int i = 0; i < action_dim; i++) actions[row * action_dim + i] = i;
    if (y[row] >= target) atomicMax(&done[env], 1);
  }
  if (wd_env_leader() && step == episode_length) atomicMax(&done[env], 1);
}

#endif  // WARP_DRIVE_COMPAT_TEST_STEPS_CU
