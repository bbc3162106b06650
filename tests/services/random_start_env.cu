// RandomStart: the test env of tests/services/test_reset_kernel.py. Each agent starts at a point drawn
// uniformly in [-spawn, spawn]^2 and each env at a goal index drawn in [0, num_goals), both by the reset kernel
// on the device; agents then walk (5 actions), paying |x| + |y|. An episode terminates when agent 0 leaves
// |x| <= 1 (at different steps in different envs) and is truncated at episode_length.
#include <warp_drive/core.h>

extern "C" __global__ void RandomStartStep(float* positions, const int* goal, const int* actions,
                                           float* observations, float* rewards, int* done, int* timestep,
                                           float step_size, int num_agents, int episode_length) {
  const int env = wd_env_id();
  const int t = timestep[env] + 1;  // read by every thread before the leader writes it
  wd_sync_env();
  if (wd_env_leader()) timestep[env] = t;
  WD_FOR_EACH_AGENT(a, num_agents) {
    const int row = env * num_agents + a;
    const int act = actions[row];
    const float dx = act == 1 ? step_size : act == 2 ? -step_size : 0.0f;
    const float dy = act == 3 ? step_size : act == 4 ? -step_size : 0.0f;
    const float x = wd_fadd_rn(positions[2 * row], dx), y = wd_fadd_rn(positions[2 * row + 1], dy);
    positions[2 * row] = x;
    positions[2 * row + 1] = y;
    rewards[row] = -wd_fadd_rn(fabsf(x), fabsf(y));
    observations[4 * row + 0] = x;
    observations[4 * row + 1] = y;
    observations[4 * row + 2] = (float)goal[env];
    observations[4 * row + 3] = wd_fdiv_rn((float)t, (float)episode_length);
  }
  wd_sync_env();
  if (wd_env_leader()) {
    if (fabsf(positions[2 * env * num_agents]) > 1.0f) {
      done[env] = 1;
    } else if (t >= episode_length) {
      done[env] = 2;
    }
  }
}

// The reset kernel, as a user writes it: the framework launches it for the envs being reset (done[env] != 0)
// after the twins and pools; draws are pure functions of (reset_seed, reset_count, env, k), so every thread
// recomputes the env's goal instead of waiting on a barrier for the leader's.
extern "C" __global__ void RandomStartReset(float* positions, int* goal, float* observations, const int* done,
                                            float spawn, int num_goals, int num_agents,
                                            unsigned long long reset_seed, unsigned long long reset_count) {
  const int env = wd_env_id();
  if (!done[env]) return;
  const int g = wd_reset_int(reset_seed, reset_count, env, 0, num_goals);
  if (wd_env_leader()) goal[env] = g;
  WD_FOR_EACH_AGENT(a, num_agents) {
    const int row = env * num_agents + a;
    const float x = wd_reset_uniform_in(reset_seed, reset_count, env, 1 + 2 * a, -spawn, spawn);
    const float y = wd_reset_uniform_in(reset_seed, reset_count, env, 2 + 2 * a, -spawn, spawn);
    positions[2 * row] = x;
    positions[2 * row + 1] = y;
    observations[4 * row + 0] = x;
    observations[4 * row + 1] = y;
    observations[4 * row + 2] = (float)g;
    observations[4 * row + 3] = 0.0f;
  }
}

// Planted mistake: the goal is drawn for every env, reset or not (the done test comes too late).
extern "C" __global__ void PlantedReset(float* positions, int* goal, float* observations, const int* done,
                                        float spawn, int num_goals, int num_agents,
                                        unsigned long long reset_seed, unsigned long long reset_count) {
  const int env = wd_env_id();
  const int g = wd_reset_int(reset_seed, reset_count, env, 0, num_goals);
  if (wd_env_leader()) goal[env] = g;
  if (!done[env]) return;
  WD_FOR_EACH_AGENT(a, num_agents) {
    const int row = env * num_agents + a;
    positions[2 * row] = positions[2 * row + 1] = 0.0f;
    observations[4 * row + 0] = observations[4 * row + 1] = observations[4 * row + 3] = 0.0f;
    observations[4 * row + 2] = (float)g;
  }
}

// Contract mistakes, refused at construction: no done flags; a 32-bit reset_count.
extern "C" __global__ void NoDoneReset(float* positions, int num_agents) {
  WD_FOR_EACH_AGENT(a, num_agents) positions[2 * (wd_env_id() * num_agents + a)] = 0.0f;
}

extern "C" __global__ void NarrowCountReset(float* positions, const int* done, int reset_count) {
  if (done[wd_env_id()]) positions[0] = (float)reset_count;
}
