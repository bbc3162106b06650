// DummyEnv step: every agent nudges a value towards a target.
// Shows the env-kernel pattern in a few lines: thread 0 owns the timestep and
// the done flag, agents count themselves into a block-shared counter with an
// atomic, and the env-wide barrier is reached by every thread.
#include <warp_drive/core.h>

extern "C" __global__ void DummyEnvStep(float* __restrict__ values, const int* __restrict__ actions,
                                        float* __restrict__ observations, float* __restrict__ rewards,
                                        int* __restrict__ done, int* __restrict__ timestep, float step_size,
                                        float target, float tolerance, int num_agents, int episode_length) {
  __shared__ int agents_on_target;
  const int env = wd_env_id();
  const int agent = wd_agent_id();
  if (threadIdx.x == 0) {
    agents_on_target = 0;
    timestep[env] += 1;
  }
  wd_sync_env();

  if (agent < num_agents) {
    const int row = wd_agent_index(num_agents);
    const float value = wd_fadd_rn(values[row], wd_fmul_rn(step_size, (float)(actions[row] - 1)));
    const float distance = fabsf(wd_fsub_rn(value, target));
    values[row] = value;
    rewards[row] = -distance;
    observations[2 * row] = value;
    observations[2 * row + 1] = wd_fdiv_rn((float)timestep[env], (float)episode_length);
    if (distance <= tolerance) atomicAdd(&agents_on_target, 1);
  }
  wd_sync_env();

  if (threadIdx.x == 0) {
    if (agents_on_target == num_agents) {
      done[env] = 1;  // terminated
    } else if (timestep[env] >= episode_length) {
      done[env] = 2;  // truncated
    }
  }
}
