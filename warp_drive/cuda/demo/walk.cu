// A tiny multi-agent environment for the runtime demo (`make train` until the
// trainer lands): agents walk on a ring of `ring_size` cells towards a goal
// cell. Actions: 0 = step left, 1 = stay, 2 = step right. Reward: +1 on the
// step an agent reaches the goal, -0.01 otherwise. An env terminates when every
// agent has reached the goal and is truncated when the episode's time is up.
//
// It shows the pieces an env kernel uses: run-time geometry (wd_env_id,
// wd_agent_id), a block-shared counter reduced with atomics, the env-wide
// barrier, and thread 0 owning the per-env bookkeeping.
#include <warp_drive/core.h>

extern "C" __global__ void WalkStep(int* __restrict__ positions, const int* __restrict__ actions,
                                    float* __restrict__ rewards, int* __restrict__ reached,
                                    int* __restrict__ done, int* __restrict__ timestep, int num_agents,
                                    int ring_size, int goal, int episode_length) {
  __shared__ int agents_at_goal;
  const int env = wd_env_id();
  const int agent = wd_agent_id();
  if (threadIdx.x == 0) {
    agents_at_goal = 0;
    timestep[env] += 1;
  }
  wd_sync_env();

  if (agent < num_agents) {
    const int row = wd_agent_index(num_agents);
    float reward = 0.0f;
    if (!reached[row]) {
      const int move = actions[row] - 1;
      positions[row] = (positions[row] + move + ring_size) % ring_size;
      reached[row] = positions[row] == goal;
      reward = reached[row] ? 1.0f : -0.01f;
    }
    rewards[row] = reward;
    if (reached[row]) atomicAdd(&agents_at_goal, 1);
  }
  wd_sync_env();

  // done: 1 = terminated (every agent at the goal), 2 = truncated (time limit).
  if (threadIdx.x == 0) {
    if (agents_at_goal == num_agents) {
      done[env] = 1;
    } else if (timestep[env] >= episode_length) {
      done[env] = 2;
    }
  }
}
