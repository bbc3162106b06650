// A tiny environment step for the FunctionManager tests: one block per env,
// one thread per agent, geometry read at run time through warp_drive/core.h.
#include <warp_drive/core.h>

extern "C" __global__ void toy_step(float* positions, const float* velocities, int* done, int num_agents,
                                    float dt) {
  const int env = wd_env_id();
  const int agent = wd_agent_id();
  __shared__ int moved;
  if (threadIdx.x == 0) moved = 0;
  wd_sync_env();
  if (agent < num_agents) {
    const int k = wd_agent_index(num_agents);
    positions[k] += velocities[k] * dt;
    atomicAdd(&moved, 1);
  }
  wd_sync_env();
  if (threadIdx.x == 0) done[env] = moved;
}
