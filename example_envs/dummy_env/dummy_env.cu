// DummyEnv step: every agent nudges a value towards a target.
// Shows the env-kernel pattern in a few lines, correct also when an env spans
// several blocks on a GPU: agent 0 (not "thread 0", which every block has)
// owns the per-env counter's reset and the done flag, agents count themselves
// into that counter in global memory with an atomic, and every thread reaches
// both env-wide barriers. The framework owns the clock (framework_clock):
// timestep[env] is already this step's t, and it truncates at episode_length.
// The arguments bind by name: each C parameter is the array or scalar of its
// name (step_size, target and tolerance from the env's parameter table).
#include <warp_drive/core.h>

extern "C" __global__ void DummyEnvStep(float* __restrict__ values, const int* __restrict__ actions,
                                        float* __restrict__ observations, float* __restrict__ rewards,
                                        int* __restrict__ agents_on_target, int* __restrict__ done,
                                        const int* __restrict__ timestep, float step_size, float target,
                                        float tolerance, int num_agents, int episode_length) {
  const int env = wd_env_id();
  const int agent = wd_agent_id();
  if (agent == 0) agents_on_target[env] = 0;
  wd_sync_env();

  if (agent < num_agents) {
    const int row = wd_agent_index(num_agents);
    const float value = wd_fadd_rn(values[row], wd_fmul_rn(step_size, (float)(actions[row] - 1)));
    const float distance = fabsf(wd_fsub_rn(value, target));
    values[row] = value;
    rewards[row] = -distance;
    observations[2 * row] = value;
    observations[2 * row + 1] = wd_fdiv_rn((float)timestep[env], (float)episode_length);
    if (distance <= tolerance) atomicAdd(&agents_on_target[env], 1);
  }
  wd_sync_env();

  if (agent == 0 && agents_on_target[env] == num_agents) done[env] = 1;  // terminated
}
