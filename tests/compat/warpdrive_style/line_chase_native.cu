// LineChase ported to warp_drive's native contract (docs/migrating_from_warpdrive.md
// walks through the port; line_chase_step.cu is the WarpDrive-style original).
//
// Same rules: agents walk on [0, grid_length] towards their env's goal;
// action 0 stay, 1 left, 2 right, by the agent's own speed; the shared reward is
// -mean distance / grid_length, plus 1 when every agent is within tolerance.
// What the port changed:
//  * core.h's run-time ids (wd_env_id, wd_agent_id, wd_sync_env) instead of
//    WarpDrive's helpers and compile-time sizes: the per-env scratch `distance`
//    is an (E, N) array in global memory instead of __shared__ float[wkNumberAgents],
//    so the number of agents is a run-time value;
//  * done is 1 (terminated: everyone near the goal) or 2 (truncated by the time
//    limit), so the trainer bootstraps a truncated episode's return.
#include <warp_drive/core.h>

extern "C" __global__ void LineChaseStep(float* __restrict__ loc, const float* __restrict__ goal,
                                         const float* __restrict__ speeds, const int* __restrict__ actions,
                                         float* __restrict__ observations, float* __restrict__ rewards,
                                         float* __restrict__ distance, int* __restrict__ done,
                                         int* __restrict__ timestep, float grid_length, float tolerance,
                                         int num_agents, int episode_length) {
  const int env = wd_env_id();
  const int agent = wd_agent_id();
  const int t = timestep[env] + 1;  // every thread reads the clock before the barrier
  wd_sync_env();
  if (agent == 0) timestep[env] = t;

  float x = 0.0f;
  if (agent < num_agents) {
    const int row = wd_agent_index(num_agents);
    const int action = actions[row];
    const float direction = action == 1 ? -1.0f : (action == 2 ? 1.0f : 0.0f);
    x = wd_fadd_rn(loc[row], wd_fmul_rn(direction, speeds[agent]));
    x = fminf(fmaxf(x, 0.0f), grid_length);
    loc[row] = x;
    distance[row] = fabsf(wd_fsub_rn(x, goal[env]));
  }
  wd_sync_env();

  if (agent < num_agents) {
    const int row = wd_agent_index(num_agents);
    float total = 0.0f;
    int all_near = 1;
    for (int other = 0; other < num_agents; other++) {
      total = wd_fadd_rn(total, distance[env * num_agents + other]);
      if (distance[env * num_agents + other] > tolerance) all_near = 0;
    }
    const float mean = wd_fdiv_rn(total, (float)num_agents);
    rewards[row] = wd_fadd_rn(-wd_fdiv_rn(mean, grid_length), all_near ? 1.0f : 0.0f);
    observations[3 * row] = wd_fdiv_rn(x, grid_length);
    observations[3 * row + 1] = wd_fdiv_rn(wd_fsub_rn(goal[env], x), grid_length);
    observations[3 * row + 2] = wd_fdiv_rn((float)t, (float)episode_length);
    if (agent == 0) done[env] = all_near ? 1 : (t >= episode_length ? 2 : 0);
  }
}
