// A fixture env of two agent groups with their own arrays (tests/env/test_group_arrays.py).
// Pickers (agents 0..n_pickers-1) see 4 numbers and pick one of 5 actions: rewarded 1 for
// their target, which moves every step. Movers (the rest) see 7 numbers and push a point
// with a Box(2) force towards a goal: rewarded minus the distance.
#include <warp_drive/core.h>

extern "C" __global__ void TwoGroupsStep(const int* __restrict__ sampled_actions_pickers,
                                         const float* __restrict__ sampled_actions_movers,
                                         float* __restrict__ observations_pickers,
                                         float* __restrict__ observations_movers, float* __restrict__ rewards_pickers,
                                         float* __restrict__ rewards_movers, int* __restrict__ picker_target,
                                         float* __restrict__ mover_pos, const float* __restrict__ mover_goal,
                                         int* __restrict__ done, int* __restrict__ timestep, int n_pickers,
                                         int num_agents, int episode_length) {
  const int env = wd_env_id();
  const int agent = wd_agent_id();
  const int t = timestep[env] + 1;
  const float phase = wd_fdiv_rn((float)t, (float)episode_length);
  wd_sync_env();
  if (agent == 0) timestep[env] = t;

  if (agent < n_pickers) {
    const int row = env * n_pickers + agent;
    const int action = sampled_actions_pickers[row];
    const int target = picker_target[row];
    rewards_pickers[row] = action == target ? 1.0f : 0.0f;
    const int next = (target + 1 + (env + agent + t) % 3) % 5;
    picker_target[row] = next;
    float* obs = observations_pickers + row * 4;
    obs[0] = wd_fdiv_rn((float)next, 4.0f);
    obs[1] = phase;
    obs[2] = wd_fdiv_rn((float)action, 4.0f);
    obs[3] = 1.0f;
  } else if (agent < num_agents) {
    const int n_movers = num_agents - n_pickers;
    const int m = agent - n_pickers;
    const int row = env * n_movers + m;
    const float* force = sampled_actions_movers + row * 2;
    float* pos = mover_pos + row * 2;
    const float* goal = mover_goal + row * 2;
    const float fx = fminf(fmaxf(force[0], -1.0f), 1.0f);
    const float fy = fminf(fmaxf(force[1], -1.0f), 1.0f);
    pos[0] = wd_fadd_rn(pos[0], wd_fmul_rn(0.1f, fx));
    pos[1] = wd_fadd_rn(pos[1], wd_fmul_rn(0.1f, fy));
    const float dx = wd_fsub_rn(pos[0], goal[0]);
    const float dy = wd_fsub_rn(pos[1], goal[1]);
    rewards_movers[row] = -wd_fadd_rn(fabsf(dx), fabsf(dy));
    float* obs = observations_movers + row * 7;
    obs[0] = pos[0];
    obs[1] = pos[1];
    obs[2] = goal[0];
    obs[3] = goal[1];
    obs[4] = fx;
    obs[5] = fy;
    obs[6] = phase;
  }
  wd_sync_env();
  if (agent == 0 && t >= episode_length) done[env] = 2;
}
