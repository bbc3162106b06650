// A fixture env that needs memory (tests/training/test_recurrent.py). Each agent sees a cue, one of
// two, in its first observation only (a one-hot in features 0-1, from the reset pool); then blanks;
// then, after `delay` steps, a recall flag (feature 2). The action taken on the recall observation
// is rewarded 1 when it names the cue, and the episode terminates. A policy without memory sees the
// same recall observation whatever the cue: it is right half the time.
#include <warp_drive/core.h>

extern "C" __global__ void MemoryCueStep(const int* __restrict__ sampled_actions, float* __restrict__ observations,
                                         float* __restrict__ rewards, const int* __restrict__ cue,
                                         int* __restrict__ done, int* __restrict__ timestep, int num_agents,
                                         int delay) {
  const int env = wd_env_id();
  const int agent = wd_agent_id();
  const int t = timestep[env] + 1;
  wd_sync_env();
  if (agent == 0) timestep[env] = t;
  if (agent < num_agents) {
    const int row = env * num_agents + agent;
    rewards[row] = (t == delay + 1 && sampled_actions[row] == cue[row]) ? 1.0f : 0.0f;
    float* obs = observations + row * 3;
    obs[0] = 0.0f;
    obs[1] = 0.0f;
    obs[2] = t == delay ? 1.0f : 0.0f;
  }
  wd_sync_env();
  if (agent == 0 && t > delay) done[env] = 1;
}
