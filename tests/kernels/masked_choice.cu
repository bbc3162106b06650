// A fixture env for action masks (tests/training/test_action_masks.py). Each step
// every agent is shown a mask of legal actions, a hash of (env, agent, timestep):
// a quarter of the rows allow one action only, the others about half of them (at
// least one). It observes the mask, is rewarded 1 for choosing its highest legal
// action (0 otherwise), and every masked choice is counted in illegal_actions,
// which no reset clears.
#include <warp_drive/core.h>

__device__ __forceinline__ unsigned int mc_mix(unsigned int x) {
  x ^= x >> 16;
  x *= 0x7feb352dU;
  x ^= x >> 15;
  x *= 0x846ca68bU;
  x ^= x >> 16;
  return x;
}

extern "C" __global__ void MaskedChoiceStep(const int* __restrict__ actions, int* __restrict__ action_mask,
                                            float* __restrict__ observations, float* __restrict__ rewards,
                                            int* __restrict__ illegal_actions, int* __restrict__ done,
                                            int* __restrict__ timestep, int n_actions, int num_agents,
                                            int episode_length) {
  const int env = wd_env_id();
  const int agent = wd_agent_id();
  const int t = timestep[env] + 1;
  wd_sync_env();
  if (agent == 0) timestep[env] = t;

  if (agent < num_agents) {
    const int row = wd_agent_index(num_agents);
    int* mask = action_mask + (long long)row * n_actions;
    const int action = actions[row];
    int highest = 0;
    for (int i = 0; i < n_actions; ++i) {
      if (mask[i]) highest = i;
    }
    if (!mask[action]) illegal_actions[row] += 1;
    rewards[row] = action == highest ? 1.0f : 0.0f;

    const unsigned int h = mc_mix((unsigned int)env * 7919U + mc_mix((unsigned int)agent * 104729U +
                                                                       mc_mix((unsigned int)t)));
    int legal = 0;
    for (int i = 0; i < n_actions; ++i) {
      const int allowed = (h & 3U) == 0U ? (i == (int)((h >> 2) % (unsigned int)n_actions))
                                         : (int)((mc_mix(h + (unsigned int)i) >> 3) & 1U);
      mask[i] = allowed;
      legal += allowed;
    }
    if (legal == 0) mask[h % (unsigned int)n_actions] = 1;
    for (int i = 0; i < n_actions; ++i) observations[(long long)row * n_actions + i] = (float)mask[i];
  }
  wd_sync_env();
  if (agent == 0 && t >= episode_length) done[env] = 2;
}
