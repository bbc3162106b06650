// The planted mistakes of tests/cli/test_check.py, one -D define each (none: a
// correct env). Agents nudge a value; each is rewarded by its distance to its
// left neighbour's new value, so the step needs the barrier between the write
// of `values` and the read of the neighbour's row.
//   PLANTED_BARRIER  that barrier missing: right in the cpu executor's fixed
//                    thread order, a race on a GPU (race mode finds it)
//   PLANTED_ATOMIC   the per-env count with a plain `+=` (race mode finds it)
//   PLANTED_OOB      one write one element past the end of `rewards` (ASan)
//   PLANTED_NAN      a NaN reward at step 3 of env 0 (the reference has it too)
#include <warp_drive/core.h>

extern "C" __global__ void PlantedStep(float* __restrict__ values, const int* __restrict__ actions,
                                       float* __restrict__ observations, float* __restrict__ rewards,
                                       int* __restrict__ count, int* __restrict__ done, int* __restrict__ timestep,
                                       float zero, int num_agents, int episode_length) {
  const int env = wd_env_id();
  const int agent = wd_agent_id();
  const int row = wd_agent_index(num_agents);
  const int t = timestep[env] + 1;
  if (agent == 0) count[env] = 0;
  wd_sync_env();
  if (agent == 0) timestep[env] = t;
  float value = 0.0f;
  if (agent < num_agents) {
    value = wd_fadd_rn(values[row], wd_fmul_rn(0.25f, (float)(actions[row] - 1)));
    values[row] = value;
  }
#ifndef PLANTED_BARRIER
  wd_sync_env();
#endif
  if (agent < num_agents) {
    const float left = agent > 0 ? values[row - 1] : 0.0f;
    rewards[row] = -fabsf(wd_fsub_rn(value, left));
#ifdef PLANTED_NAN
    if (env == 0 && agent == 0 && t == 3) rewards[row] = wd_fdiv_rn(zero, zero);
#endif
#ifdef PLANTED_OOB
    if (row == wd_num_envs() * num_agents - 1) rewards[row + 1] = 1.0f;
#endif
    observations[2 * row] = value;
    observations[2 * row + 1] = wd_fdiv_rn((float)t, (float)episode_length);
#ifdef PLANTED_ATOMIC
    count[env] += 1;
#else
    atomicAdd(&count[env], 1);
#endif
  }
  wd_sync_env();
  if (agent == 0 && t >= episode_length) done[env] = 2;
}
