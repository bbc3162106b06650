// DummyEnv's step with a fault injected on demand (tests/training/test_nonfinite.py):
// at timestep `nan_step` of env `nan_env`, agent `nan_agent` is rewarded NaN
// (0/0, as a real division bug would produce). nan_step < 0: never. Like DummyEnv's,
// it leaves the clock to the framework (framework_clock): timestep[env] is this step's t.
#include <warp_drive/core.h>

extern "C" __global__ void NanRewardStep(float* __restrict__ values, const int* __restrict__ actions,
                                         float* __restrict__ observations, float* __restrict__ rewards,
                                         int* __restrict__ agents_on_target, int* __restrict__ done,
                                         const int* __restrict__ timestep, float step_size, float target,
                                         float tolerance, int num_agents, int episode_length, int nan_env,
                                         int nan_agent, int nan_step, float zero) {
  const int env = wd_env_id();
  const int agent = wd_agent_id();
  const int t = timestep[env];
  if (agent == 0) agents_on_target[env] = 0;
  wd_sync_env();

  if (agent < num_agents) {
    const int row = wd_agent_index(num_agents);
    const float value = wd_fadd_rn(values[row], wd_fmul_rn(step_size, (float)(actions[row] - 1)));
    const float distance = fabsf(wd_fsub_rn(value, target));
    values[row] = value;
    rewards[row] = (env == nan_env && agent == nan_agent && t == nan_step) ? wd_fdiv_rn(zero, zero) : -distance;
    observations[2 * row] = value;
    observations[2 * row + 1] = wd_fdiv_rn((float)t, (float)episode_length);
    if (distance <= tolerance) atomicAdd(&agents_on_target[env], 1);
  }
  wd_sync_env();

  if (agent == 0 && agents_on_target[env] == num_agents) done[env] = 1;
}
