// LineChase, written as a WarpDrive 2.7 env kernel: one block per env, one
// thread per agent, WarpDrive's helper names (getEnvID, getAgentID,
// __sync_env_threads, wkNumberAgents) from the compatibility header that the
// build force-includes.
//
// Agents walk on the segment [0, grid_length] towards their env's goal.
// Action (Discrete(3)): 0 stay, 1 left, 2 right, by the agent's own speed.
// Reward (shared by all agents): -mean distance to the goal / grid_length,
// plus 1 when every agent is within `tolerance` of the goal.
// Observation (3 floats): [x / L, (goal - x) / L, t / episode_length].
// Done: t == episode_length, or every agent within `tolerance` of the goal.

// REWARD_SIGN is a compile-time define (EnvWrapper(..., defines=...) or the
// env's cuda_defines); the tests flip it to make the kernel disagree with the
// Python step.
#ifndef REWARD_SIGN
#define REWARD_SIGN 1.0f
#endif

extern "C" {
__global__ void CudaLineChaseStep(
    float* loc,            // (E, N), restored from its _at_reset copy
    const float* goal,     // (E,), drawn from a reset pool (or restored) at reset
    const float* speeds,   // (N,), shared by every env, never reset
    const int* actions,    // (E, N, 1)
    float* obs,            // (E, N, 3)
    float* rewards,        // (E, N)
    int* done,             // (E,)
    int* timestep,         // (E,)
    const float grid_length,
    const float tolerance,
    const int kNumAgents,
    const int kEpisodeLength) {
  __shared__ float distance[wkNumberAgents];

  const int kEnvId = getEnvID(blockIdx.x);
  const int kThisAgentId = getAgentID(threadIdx.x, blockIdx.x, blockDim.x);
  const int kThisAgentArrayIdx = kEnvId * kNumAgents + kThisAgentId;

  if (kThisAgentId == 0) {
    timestep[kEnvId] += 1;
  }
  __sync_env_threads();
  const int t = timestep[kEnvId];

  float x = 0.0f;
  if (kThisAgentId < kNumAgents) {
    const int action = actions[kThisAgentArrayIdx];
    const float direction = action == 1 ? -1.0f : (action == 2 ? 1.0f : 0.0f);
    x = loc[kThisAgentArrayIdx] + direction * speeds[kThisAgentId];
    x = fminf(fmaxf(x, 0.0f), grid_length);
    loc[kThisAgentArrayIdx] = x;
    distance[kThisAgentId] = fabsf(x - goal[kEnvId]);
  }
  __sync_env_threads();

  if (kThisAgentId < kNumAgents) {
    float total = 0.0f;
    int all_near = 1;
    for (int agent = 0; agent < kNumAgents; agent++) {
      total += distance[agent];
      if (distance[agent] > tolerance) all_near = 0;
    }
    rewards[kThisAgentArrayIdx] =
        REWARD_SIGN * (-(total / kNumAgents) / grid_length + (all_near ? 1.0f : 0.0f));
    float* my_obs = obs + kThisAgentArrayIdx * 3;
    my_obs[0] = x / grid_length;
    my_obs[1] = (goal[kEnvId] - x) / grid_length;
    my_obs[2] = static_cast<float>(t) / kEpisodeLength;
    if (kThisAgentId == 0 && (t >= kEpisodeLength || all_near)) {
      done[kEnvId] = 1;
    }
  }
}

// WarpDrive's optional custom reset: EnvWrapper.custom_reset_all_envs(args=[...])
// launches it. Here it moves every agent of each done env onto the goal.
__global__ void CudaLineChaseReset(float* loc, const float* goal, const int* done, const int kNumAgents) {
  const int kEnvId = getEnvID(blockIdx.x);
  const int kThisAgentId = getAgentID(threadIdx.x, blockIdx.x, blockDim.x);
  if (kThisAgentId < kNumAgents && done[kEnvId]) {
    loc[kEnvId * kNumAgents + kThisAgentId] = goal[kEnvId];
  }
}
}
