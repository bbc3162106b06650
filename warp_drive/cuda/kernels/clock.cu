// The framework's clock, for envs that leave it to the framework (Environment.framework_clock).
//
// Without it every step kernel repeats the same bookkeeping: read _timestep_, add one, write it back from
// one agent after a barrier (so that no agent of a multi-block env reads the new value early), and set
// _done_ = 2 at the time limit. With it the kernel only reads timestep[env] (already the new t) and sets
// _done_ = 1 when the episode terminates; the framework launches, on one stream:
//   wd_clock_tick     before the step kernel: timestep[env] += 1;
//   wd_clock_truncate after it: _done_ = 2 (truncated) where t reached episode_length and the kernel set no
//                     done, so a termination on the last step stays a termination.
// Both are one thread per env (flat 1-D launch), like wd_clear_done_flags in reset.cu.
#include <warp_drive/core.h>

extern "C" __global__ void wd_clock_tick(int* __restrict__ timestep, int n_envs) {
  long long env = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (env < n_envs) timestep[env] += 1;
}

extern "C" __global__ void wd_clock_truncate(int* __restrict__ done, const int* __restrict__ timestep, int n_envs,
                                             int episode_length) {
  long long env = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (env < n_envs && done[env] == 0 && timestep[env] >= episode_length) done[env] = 2;
}
