// TagGridWorld: taggers chase one runner on an (L+1) x (L+1) grid of cells.
//
// One block per environment replica; agents 0..N-2 are taggers (type 0), agent
// N-1 is the runner (type 1). Per step:
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
//   * numbers of envs and agents are run-time arguments, and the step is
//     written as phases over agents (warp_drive/agents.h), so one env may have
//     any number of agents, however many threads run it;
//   * each agent writes only its own rows (no scattering into other agents'
//     rows), and nearest-tagger ties go to the lowest tagger id, so the NumPy
//     reference can reproduce the kernel exactly;
//   * terminated (1) and truncated (2) are told apart.
//
// How the step is laid out, and why:
//   * every thread first computes the runner's move itself (a few integer
//     operations on its old cell and action, alike in every thread), so in
//     phase 1 each tagger is compared with the runner's NEW cell as it moves,
//     with no barrier to wait for the runner;
//   * phase 1 moves the taggers and offers this thread's nearest one as a key
//     (squared distance above id); wd_env_min_u64 picks the env's nearest --
//     ties to the lowest id, whichever threads held them -- and is the tag
//     test too: a tag is a nearest distance of 0. Its barriers (the step's
//     only ones) publish every tagger's new cell to phase 2;
//   * the runner's row and the clock are stored only in phase 2: until the
//     barriers other threads may still read the old values, and after them
//     everyone uses the runner's cell it computed;
//   * a tagger's wall penalty crosses the barriers in its reward row, not in a
//     local: one thread may run several agents.
//
// All float results are single correctly rounded operations (int -> float
// conversions, one division, additions), so every executor and the NumPy
// reference agree bit for bit.
#include <warp_drive/core.h>

// Move (x, y) by a Discrete(5) action (stay, +x, -x, +y, -y; anything else
// stays put -- the sampler never produces it) and clip to [0, L] per axis,
// subtracting the wall penalty from *reward for each clipped axis.
__device__ __forceinline__ void grid_move(int action, int boundary, float wall_hit_penalty, int* x, int* y,
                                          float* reward) {
  // Comparisons, not a table indexed by the action: a local array indexed at
  // run time lives in local memory on a GPU (a 40-byte stack frame, which the
  // build gate refuses in a step kernel), and a __constant__ table is a symbol
  // the host must remember to upload.
  *x += (action == 1) - (action == 2);
  *y += (action == 3) - (action == 4);
  if (*x < 0 || *x > boundary) {
    *x = *x < 0 ? 0 : boundary;
    *reward = wd_fsub_rn(*reward, wall_hit_penalty);
  }
  if (*y < 0 || *y > boundary) {
    *y = *y < 0 ? 0 : boundary;
    *reward = wd_fsub_rn(*reward, wall_hit_penalty);
  }
}

// Key of a tagger at (dx, dy) from the runner: squared Euclidean distance in
// exact integers (L <= 46340 keeps 2 L^2 below 2^32) above the id, so the
// smallest key is the nearest tagger and equal distances go to the lowest id.
__device__ __forceinline__ unsigned long long nearest_key(int dx, int dy, int id) {
  const unsigned int d2 = (unsigned int)dx * (unsigned int)dx + (unsigned int)dy * (unsigned int)dy;
  return ((unsigned long long)d2 << 32) | (unsigned int)id;
}

// One step of every agent of this thread's env: the whole step, with the
// kernel's parameters. It is a device function so that another kernel may run
// the same step (e.g. one with another parameter list); TagGridWorldStep, at the
// end of this file, is the env's kernel and only calls it. Every thread of the
// env must call it (it holds the env's barriers).
__device__ __forceinline__ void tag_gridworld_step(int* __restrict__ loc_x, int* __restrict__ loc_y,
                                                   const int* __restrict__ actions,
                                                   const int* __restrict__ agent_types, float* __restrict__ rewards,
                                                   float* __restrict__ observations, float wall_hit_penalty,
                                                   float tag_reward_for_tagger, float tag_penalty_for_runner,
                                                   float step_cost_for_tagger, int use_full_observation,
                                                   int world_boundary, int* __restrict__ done,
                                                   int* __restrict__ timestep, int num_agents, int episode_length) {
  const int env = wd_env_id();
  const int runner = num_agents - 1;
  const int env_offset = env * num_agents;  // first agent row of this env

  // Env-wide values every thread computes alike from the old state, before
  // anyone stores the new one: the clock and the runner's move.
  const int t = timestep[env] + 1;
  float runner_reward = 0.0f;
  int runner_x = loc_x[env_offset + runner];
  int runner_y = loc_y[env_offset + runner];
  grid_move(actions[env_offset + runner], world_boundary, wall_hit_penalty, &runner_x, &runner_y, &runner_reward);

  // ---- phase 1: taggers move (wall penalty into the reward row) and this
  // thread's nearest tagger to the runner's new cell
  unsigned long long nearest = ~0ull;  // nothing to offer
  WD_FOR_EACH_AGENT(a, runner) {
    const int row = env_offset + a;
    int x = loc_x[row], y = loc_y[row];
    float reward = 0.0f;
    grid_move(actions[row], world_boundary, wall_hit_penalty, &x, &y, &reward);
    loc_x[row] = x;
    loc_y[row] = y;
    rewards[row] = reward;
    const unsigned long long key = nearest_key(x - runner_x, y - runner_y, a);
    if (key < nearest) nearest = key;
  }

  // ---- the env's nearest tagger; distance 0 is a tag (holds the barriers)
  nearest = wd_env_min_u64(nearest);
  const bool tagged = (nearest >> 32) == 0;
  const int target = nearest == ~0ull ? runner : (int)(nearest & 0xffffffffu);

  // ---- phase 2: clock, done, the runner's cell, rewards and observations
  if (wd_env_leader()) {
    timestep[env] = t;
    if (tagged) {
      done[env] = 1;
    } else if (t >= episode_length) {
      done[env] = 2;
    }
  }
  const float length = (float)world_boundary;
  const float time_feature = wd_fdiv_rn((float)t, (float)episode_length);
  WD_FOR_EACH_AGENT(a, num_agents) {
    const int row = env_offset + a;
    const bool is_runner = a == runner;
    int x = runner_x, y = runner_y;
    float reward = runner_reward;
    if (is_runner) {
      loc_x[row] = x;
      loc_y[row] = y;
    } else {
      x = loc_x[row];
      y = loc_y[row];
      reward = rewards[row];
    }
    float bonus;
    if (tagged) {
      bonus = is_runner ? -tag_penalty_for_runner : tag_reward_for_tagger;
    } else {
      bonus = is_runner ? step_cost_for_tagger : -step_cost_for_tagger;
    }
    rewards[row] = wd_fadd_rn(reward, bonus);

    if (use_full_observation) {
      // [x/L for all agents, y/L for all, type for all, is_self one-hot, t/T];
      // the runner's cell from runner_x/y (its row may not be stored yet)
      const int obs_size = 4 * num_agents + 1;
      float* obs = observations + (long long)row * obs_size;
      for (int j = 0; j < num_agents; ++j) {
        const bool j_runner = j == runner;
        obs[j] = wd_fdiv_rn((float)(j_runner ? runner_x : loc_x[env_offset + j]), length);
        obs[num_agents + j] = wd_fdiv_rn((float)(j_runner ? runner_y : loc_y[env_offset + j]), length);
        obs[2 * num_agents + j] = (float)agent_types[j];
        obs[3 * num_agents + j] = j == a ? 1.0f : 0.0f;
      }
      obs[4 * num_agents] = time_feature;
    } else {
      // [own x/L, own y/L, target x/L, target y/L, own type, t/T]; a tagger's
      // target is the runner, the runner's is its nearest tagger
      int target_x = runner_x, target_y = runner_y;
      if (is_runner && target != runner) {
        target_x = loc_x[env_offset + target];
        target_y = loc_y[env_offset + target];
      }
      float* obs = observations + (long long)row * 6;
      obs[0] = wd_fdiv_rn((float)x, length);
      obs[1] = wd_fdiv_rn((float)y, length);
      obs[2] = wd_fdiv_rn((float)target_x, length);
      obs[3] = wd_fdiv_rn((float)target_y, length);
      obs[4] = (float)agent_types[a];
      obs[5] = time_feature;
    }
  }
}

extern "C" __global__ void TagGridWorldStep(int* __restrict__ loc_x, int* __restrict__ loc_y,
                                            const int* __restrict__ actions, const int* __restrict__ agent_types,
                                            float* __restrict__ rewards, float* __restrict__ observations,
                                            float wall_hit_penalty, float tag_reward_for_tagger,
                                            float tag_penalty_for_runner, float step_cost_for_tagger,
                                            int use_full_observation, int world_boundary, int* __restrict__ done,
                                            int* __restrict__ timestep, int num_agents, int episode_length) {
  tag_gridworld_step(loc_x, loc_y, actions, agent_types, rewards, observations, wall_hit_penalty,
                     tag_reward_for_tagger, tag_penalty_for_runner, step_cost_for_tagger, use_full_observation,
                     world_boundary, done, timestep, num_agents, episode_length);
}
