// DummyEnv step: every agent nudges a value towards a target.
// Shows the env-kernel pattern in a few lines, correct also when an env spans
// several blocks on a GPU: agent 0 (not "thread 0", which every block has)
// owns the timestep and the done flag, agents count themselves into a per-env
// counter in global memory with an atomic, and every thread reaches both
// env-wide barriers.
#include <warp_drive/core.h>

extern "C" __global__ void DummyEnvStep(float* __restrict__ values, const int* __restrict__ actions,
                                        float* __restrict__ observations, float* __restrict__ rewards,
                                        int* __restrict__ agents_on_target, int* __restrict__ done,
                                        int* __restrict__ timestep, float step_size, float target,
                                        float tolerance, int num_agents, int episode_length) {
  const int env = wd_env_id();
  const int agent = wd_agent_id();
  // Every thread reads the clock before the barrier; agent 0 writes it after.
  const int t = timestep[env] + 1;
  if (agent == 0) agents_on_target[env] = 0;
  wd_sync_env();
  if (agent == 0) timestep[env] = t;

  if (agent < num_agents) {
    const int row = wd_agent_index(num_agents);
    const float value = wd_fadd_rn(values[row], wd_fmul_rn(step_size, (float)(actions[row] - 1)));
    const float distance = fabsf(wd_fsub_rn(value, target));
    values[row] = value;
    rewards[row] = -distance;
    observations[2 * row] = value;
    observations[2 * row + 1] = wd_fdiv_rn((float)t, (float)episode_length);
    if (distance <= tolerance) atomicAdd(&agents_on_target[env], 1);
  }
  wd_sync_env();

  if (agent == 0) {
    if (agents_on_target[env] == num_agents) {
      done[env] = 1;  // terminated
    } else if (t >= episode_length) {
      done[env] = 2;  // truncated
    }
  }
}
