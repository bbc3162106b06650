// TagGridWorld: taggers chase one runner on an (L+1) x (L+1) grid of cells.
//
// One block per environment replica, one thread per agent; agents 0..N-2 are
// taggers (type 0), agent N-1 is the runner (type 1). Per step:
//   1. the env's clock advances;
//   2. every agent moves by its action and is clipped to [0, L] per axis,
//      paying wall_hit_penalty for each clipped axis;
//   3. a tag happens when any tagger stands on the runner's cell;
//   4. rewards: on a tag every tagger gets +tag_reward_for_tagger and the runner
//      -tag_penalty_for_runner, and the episode terminates (done = 1);
//      otherwise taggers pay step_cost_for_tagger and the runner earns it;
//      reaching episode_length without a tag truncates it (done = 2);
//   5. observations of the new state (layouts in tag_gridworld.py).
//
// What differs from the original kernel, and why:
//   * the move table is a local const array, not a __constant__ symbol the host
//     had to upload (forgetting that silently turned every action into a no-op);
//   * numbers of envs and agents are run-time arguments, and the runner finds
//     its nearest tagger with a loop instead of a __shared__ array sized by a
//     compile-time agent count;
//   * each agent writes only its own observation row (no scattering into other
//     agents' rows), and nearest-tagger ties go to the lowest tagger id, so the
//     NumPy reference can reproduce the kernel exactly;
//   * terminated (1) and truncated (2) are told apart.
//
// One barrier per step. Every thread works out the runner's move itself (it is
// a few integer operations on the runner's old cell and action), so a tagger
// can test for a tag before any barrier; the runner stores its new cell only
// after the barrier, when nobody reads the old one any more. The barrier is
// __syncthreads_or over "I stand on the runner's cell": it both publishes
// every tagger's new cell and tells every thread whether a tag happened. A
// block-wide barrier means one env must fit in one block (N <= 1024 agents;
// TagGridWorld refuses more, so EnvWrapper launches one block per env). The
// clock: every thread reads it before the barrier and thread 0 stores t after.
// All float results are single correctly rounded operations (int -> float
// conversions, one division, additions), so the cpu executor, the GPU and the
// NumPy reference agree bit for bit.
#include <warp_drive/core.h>

// Move (x, y) by a Discrete(5) action (stay, +x, -x, +y, -y; anything else
// stays put -- the sampler never produces it) and clip to [0, L] per axis,
// subtracting the wall penalty from *reward for each clipped axis.
__device__ __forceinline__ void grid_move(int action, int boundary, float wall_hit_penalty, int* x, int* y,
                                          float* reward) {
  // A local table, not a __constant__ symbol the host must remember to upload.
  const int kMoveX[5] = {0, 1, -1, 0, 0};
  const int kMoveY[5] = {0, 0, 0, 1, -1};
  if (action >= 0 && action < 5) {
    *x += kMoveX[action];
    *y += kMoveY[action];
  }
  if (*x < 0 || *x > boundary) {
    *x = *x < 0 ? 0 : boundary;
    *reward = wd_fsub_rn(*reward, wall_hit_penalty);
  }
  if (*y < 0 || *y > boundary) {
    *y = *y < 0 ? 0 : boundary;
    *reward = wd_fsub_rn(*reward, wall_hit_penalty);
  }
}

extern "C" __global__ void TagGridWorldStep(int* __restrict__ loc_x, int* __restrict__ loc_y,
                                            const int* __restrict__ actions, const int* __restrict__ agent_types,
                                            float* __restrict__ rewards, float* __restrict__ observations,
                                            float wall_hit_penalty, float tag_reward_for_tagger,
                                            float tag_penalty_for_runner, float step_cost_for_tagger,
                                            int use_full_observation, int world_boundary, int* __restrict__ done,
                                            int* __restrict__ timestep, int num_agents, int episode_length) {
  const int env = wd_env_id();
  const int agent = wd_agent_id();
  const int runner = num_agents - 1;
  const int env_offset = env * num_agents;  // first agent row of this env
  const bool active = agent < num_agents;
  const bool is_runner = agent == runner;

  // ---- 1. clock (stored by thread 0 after the barrier)
  const int t = timestep[env] + 1;

  // ---- 2. move and clip: the runner's move (every thread), then the agent's own
  float runner_wall_reward = 0.0f;
  int runner_x = loc_x[env_offset + runner];
  int runner_y = loc_y[env_offset + runner];
  grid_move(actions[env_offset + runner], world_boundary, wall_hit_penalty, &runner_x, &runner_y, &runner_wall_reward);
  int x = runner_x, y = runner_y;
  float reward = runner_wall_reward;
  if (active && !is_runner) {
    const int row = env_offset + agent;
    x = loc_x[row];
    y = loc_y[row];
    reward = 0.0f;
    grid_move(actions[row], world_boundary, wall_hit_penalty, &x, &y, &reward);
    loc_x[row] = x;
    loc_y[row] = y;
  }

  // ---- 3. tags: every tagger's cell is stored once the barrier is passed
  const bool tagged = __syncthreads_or(active && !is_runner && x == runner_x && y == runner_y);
  if (is_runner) {
    loc_x[env_offset + runner] = runner_x;
    loc_y[env_offset + runner] = runner_y;
  }
  if (threadIdx.x == 0) {
    timestep[env] = t;
    if (tagged) {
      done[env] = 1;
    } else if (t >= episode_length) {
      done[env] = 2;
    }
  }
  if (!active) return;
  const int row = env_offset + agent;

  // ---- 4. rewards
  float bonus;
  if (tagged) {
    bonus = is_runner ? -tag_penalty_for_runner : tag_reward_for_tagger;
  } else {
    bonus = is_runner ? step_cost_for_tagger : -step_cost_for_tagger;
  }
  rewards[row] = wd_fadd_rn(reward, bonus);

  // ---- 5. observations (the runner's cell from runner_x/y: its row may still hold the old one)
  const float length = (float)world_boundary;
  const float time_feature = wd_fdiv_rn((float)t, (float)episode_length);
  if (use_full_observation) {
    // [x/L for all agents, y/L for all, type for all, is_self one-hot, t/T]
    const int obs_size = 4 * num_agents + 1;
    float* obs = observations + (long long)row * obs_size;
    for (int j = 0; j < num_agents; ++j) {
      const bool j_runner = j == runner;
      obs[j] = wd_fdiv_rn((float)(j_runner ? runner_x : loc_x[env_offset + j]), length);
      obs[num_agents + j] = wd_fdiv_rn((float)(j_runner ? runner_y : loc_y[env_offset + j]), length);
      obs[2 * num_agents + j] = (float)agent_types[j];
      obs[3 * num_agents + j] = j == agent ? 1.0f : 0.0f;
    }
    obs[4 * num_agents] = time_feature;
  } else {
    // [own x/L, own y/L, target x/L, target y/L, own type, t/T]; a tagger's
    // target is the runner, the runner's is its nearest tagger (squared
    // Euclidean distance in exact integers; ties go to the lowest id).
    int target_x = runner_x, target_y = runner_y;
    if (is_runner) {
      int best = -1;
      for (int j = 0; j < runner; ++j) {
        const int dx = loc_x[env_offset + j] - runner_x;
        const int dy = loc_y[env_offset + j] - runner_y;
        const int d2 = dx * dx + dy * dy;
        if (best < 0 || d2 < best) {
          best = d2;
          target_x = loc_x[env_offset + j];
          target_y = loc_y[env_offset + j];
        }
      }
    }
    float* obs = observations + (long long)row * 6;
    obs[0] = wd_fdiv_rn((float)x, length);
    obs[1] = wd_fdiv_rn((float)y, length);
    obs[2] = wd_fdiv_rn((float)target_x, length);
    obs[3] = wd_fdiv_rn((float)target_y, length);
    obs[4] = (float)agent_types[agent];
    obs[5] = time_feature;
  }
}
