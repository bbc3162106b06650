// TagContinuous step: taggers chase runners on a continuous square of side L.
//
// One block per environment replica. The step is written as phases over the
// env's agents (WD_FOR_EACH_AGENT, <warp_drive/agents.h>), separated by
// env-wide barriers: whatever number of threads the executor runs per env --
// one per agent on a GPU, one for the whole env on the cpu executor -- each
// phase sees every agent's writes of the phases before it. Per-agent results
// that a later phase needs are kept in arrays (here `tagged_by`), never in
// locals, since a thread may handle several agents.
//
//   1. move      every agent applies its actions, moves (clamped to the
//                square, with the edge penalty) and writes its base reward;
//   2. grid      the agents still in the game are binned into a grid of cells
//                for the neighbour search (<warp_drive/neighbors.h>; skipped
//                with full observation and in small envs, where a scan is as fast);
//   3. observe   each agent's observation of the moved state, the others'
//                in-game flags as they were before this step's tags; each
//                runner in the game finds its nearest tagger and, when within
//                the margin, is tagged (its penalty, the tagger's reward);
//   4. exit      runners tagged out leave the game: the flags change only now,
//                after every observation of step 3 has read them.
//
// Semantics are those of the original WarpDrive env (reference doc, section
// 3.2), with its bugs fixed:
//   * a tagger tagged-for by several runners in one step gets every reward
//     (atomicAdd of the same tag_reward, so the float sum does not depend on
//     the order), and the runner counter is decremented with atomicSub;
//   * a runner tagged on the last step (when runners exit) is out of the game
//     and gets no end-of-game reward (the original GPU and CPU disagreed);
//   * neighbour and nearest-tagger ties (equal squared distance) go to the
//     smaller agent id;
//   * no O(N^2) scratch: an agent keeps its K nearest in a small sorted list
//     (K <= WD_MAX_NEIGHBORS); a runner's nearest tagger comes from that list
//     when it covers the tagging distance (tag_nearest_covers), else from a
//     scan of every tagger (same result).
//
// The clock: every thread reads _timestep_ before the first barrier and one
// thread writes t back after it. _done_ is only ever set: the runner whose
// atomicSub empties the runner count stores 1 (terminated), and at the time
// limit a still-clear flag becomes 2 (truncated) with atomicCAS, so a
// termination on the last step wins whatever the order.
//
// Float math is IEEE single precision with every operation rounded on its own
// (wd_f*_rn, wd_sincosf, wd_sqrtf, fmodf which is exact), so a GPU, the cpu
// executor and the NumPy reference compute the same bits.
#include <warp_drive/core.h>
#include <warp_drive/neighbors.h>

#define TAG_NUM_FEATURES 7

namespace {

// 2*pi rounded to float (the original's kTwoPi = 6.283185308f is the same float).
__device__ __forceinline__ float tag_two_pi() { return 6.28318548202514648f; }

// fmodf(x, 2 pi), the same float, without the libm call where a heading plus
// one turn lands: |x| < 2 pi is x itself, and 2 pi <= x < 4 pi is x - 2 pi,
// exact by Sterbenz's lemma (the quotient is 1; x = 2 pi gives +0 like fmodf).
__device__ __forceinline__ float tag_fmod_two_pi(float x) {
  const float two_pi = tag_two_pi();
  if (x > -two_pi && x < two_pi) return x;
  if (x >= two_pi && x < 2.0f * two_pi) return wd_fsub_rn(x, two_pi);
  return fmodf(x, two_pi);
}

// The step's inputs for one env: pointers already offset to its rows, and the
// constants, so that the per-agent helpers below take one argument instead of
// thirty.
struct TagEnv {
  int n, k;  // agents; neighbours observed (0 with full observation)
  float *x, *y, *speed, *acc, *dir;
  int* still;      // in-game flags: before this step's tags until phase 4
  int* tagged_by;  // the tagger that tagged each runner this step, or -1
  float* rewards;
  float* edge_hit;  // this step's edge penalties
  float* observations;
  const int* actions;  // (acceleration, turn) index pairs
  const float *acceleration_actions, *turn_actions;
  const float* skill_levels;
  const float* step_rewards;
  const int* agent_types;
  const int* tagger_ids;
  int num_taggers;
  float grid_length, max_speed, edge_hit_penalty;
  float position_scale, speed_scale, direction_scale, time_feature;
  float distance_margin, tag_reward, tag_penalty, end_of_game_reward;
  int runner_exits;
  int* num_runners;  // this env's counter
  int* done;         // this env's flag
  int t, episode_length;
};

// Phase 1 for one agent: apply its actions, move it (clamped to the square,
// with the edge penalty), write its state and base reward.
__device__ __forceinline__ void tag_move(const TagEnv& e, int agent) {
  const float two_pi = tag_two_pi();
  const int still = e.still[agent];
  const float delta_acc = e.acceleration_actions[e.actions[2 * agent]];
  const float delta_turn = e.turn_actions[e.actions[2 * agent + 1]];

  float acc = wd_fadd_rn(e.acc[agent], delta_acc);
  float dir = still ? tag_fmod_two_pi(wd_fadd_rn(e.dir[agent], delta_turn)) : 0.0f;
  if (dir < 0.0f) dir = wd_fadd_rn(dir, two_pi);

  const float top_speed = wd_fmul_rn(e.max_speed, e.skill_levels[agent]);
  float sp = wd_fadd_rn(e.speed[agent], acc);
  if (sp < 0.0f) sp = 0.0f;
  if (sp > top_speed) sp = top_speed;
  if (!still) sp = 0.0f;
  if (sp <= 0.0f || sp >= top_speed) acc = 0.0f;  // stop accelerating at either speed limit

  float s, c;
  wd_sincosf(dir, &s, &c);
  float x = wd_fadd_rn(e.x[agent], wd_fmul_rn(sp, c));
  float y = wd_fadd_rn(e.y[agent], wd_fmul_rn(sp, s));
  const bool crossed = x < 0.0f || x > e.grid_length || y < 0.0f || y > e.grid_length;
  if (x < 0.0f) x = 0.0f;
  if (x > e.grid_length) x = e.grid_length;
  if (y < 0.0f) y = 0.0f;
  if (y > e.grid_length) y = e.grid_length;
  const float edge = crossed ? e.edge_hit_penalty : 0.0f;

  e.x[agent] = x;
  e.y[agent] = y;
  e.speed[agent] = sp;
  e.dir[agent] = dir;
  e.acc[agent] = acc;
  e.edge_hit[agent] = edge;
  e.rewards[agent] = still ? wd_fadd_rn(edge, e.step_rewards[agent]) : 0.0f;
}

// Write the 7 features of `other` as seen by `me` into slot `slot` of a
// feature-major observation row with `width` slots per feature: the deltas
// (other minus me) over their scales, its type and its in-game flag.
__device__ __forceinline__ void tag_write_features(const TagEnv& e, float* obs, int width, int slot, int me,
                                                   int other, float other_still) {
  obs[0 * width + slot] = wd_fdiv_rn(wd_fsub_rn(e.x[other], e.x[me]), e.position_scale);
  obs[1 * width + slot] = wd_fdiv_rn(wd_fsub_rn(e.y[other], e.y[me]), e.position_scale);
  obs[2 * width + slot] = wd_fdiv_rn(wd_fsub_rn(e.speed[other], e.speed[me]), e.speed_scale);
  obs[3 * width + slot] = wd_fdiv_rn(wd_fsub_rn(e.acc[other], e.acc[me]), e.speed_scale);
  obs[4 * width + slot] = wd_fdiv_rn(wd_fsub_rn(e.dir[other], e.dir[me]), e.direction_scale);
  obs[5 * width + slot] = (float)e.agent_types[other];
  obs[6 * width + slot] = other_still;
}

__device__ __forceinline__ void tag_write_zeros(float* obs, int width, int slot, float type, float other_still) {
  for (int f = 0; f < 5; ++f) obs[f * width + slot] = 0.0f;
  obs[5 * width + slot] = type;
  obs[6 * width + slot] = other_still;
}

// Phase 3, observation of one agent. Full: every other agent in id order (an
// observer out of the game sees zero deltas and time, but still the others'
// types and flags). Partial: its k nearest others still in the game, by
// increasing distance, zero-padded (all zeros for an observer out of the
// game); `nearest` comes back holding them for the tagging.
__device__ __forceinline__ void tag_observe(const TagEnv& e, const WdGrid& grid, int agent, WdNearest& nearest) {
  const bool in_game = e.still[agent] != 0;
  if (e.k == 0) {
    const int width = e.n - 1;
    float* obs = e.observations + (size_t)agent * (TAG_NUM_FEATURES * width + 1);
    int slot = 0;
    for (int j = 0; j < e.n; ++j) {
      if (j == agent) continue;
      if (in_game) {
        tag_write_features(e, obs, width, slot, agent, j, (float)e.still[j]);
      } else {
        tag_write_zeros(obs, width, slot, (float)e.agent_types[j], (float)e.still[j]);
      }
      ++slot;
    }
    obs[TAG_NUM_FEATURES * width] = in_game ? e.time_feature : 0.0f;
    return;
  }
  const int k = e.k;
  float* obs = e.observations + (size_t)agent * (TAG_NUM_FEATURES * k + 1);
  if (in_game) {
    if (grid.side > 0) {
      wd_grid_nearest(grid, nearest, agent, e.x[agent], e.y[agent]);
    } else {
      wd_scan_nearest(nearest, agent, e.x[agent], e.y[agent], e.x, e.y, e.still, e.n);
    }
  }
  for (int slot = 0; slot < k; ++slot) {
    if (slot < nearest.count) {
      tag_write_features(e, obs, k, slot, agent, nearest.id(slot), 1.0f);  // only agents in the game are listed
    } else {
      tag_write_zeros(obs, k, slot, 0.0f, 0.0f);
    }
  }
  obs[TAG_NUM_FEATURES * k] = in_game ? e.time_feature : 0.0f;
}

// Whether a runner's k nearest include every agent still in the game closer
// than `margin`: true when the list holds fewer than k (it then holds them
// all) or when its k-th distance is beyond the margin. The factor 1 + 2^-10
// on the squared margin is far above float rounding: any d2 with
// wd_sqrtf(d2) < margin is below the k-th distance, so it was kept. Then the
// nearest tagger inside the margin is the first tagger in the list.
__device__ __forceinline__ bool tag_nearest_covers(const WdNearest& nearest, float margin) {
  if (nearest.k == 0) return false;  // full observation: no list
  if (nearest.count < nearest.k) return true;
  return nearest.worst > margin * margin * 1.0009765625f;
}

// Phase 3, tagging of one runner still in the game: tagged when its nearest
// tagger is within the margin; the end-of-game reward at the time limit for a
// runner still in the game after this step.
__device__ __forceinline__ void tag_resolve(const TagEnv& e, int agent, const WdNearest& nearest) {
  const float x = e.x[agent], y = e.y[agent];
  float tagger_d2 = INFINITY;
  int tagger = -1;
  if (tag_nearest_covers(nearest, e.distance_margin)) {
    // Every agent within the margin is in the list, taggers included (they
    // never leave the game), in (distance, id) order.
    for (int slot = 0; slot < nearest.count && tagger < 0; ++slot) {
      if (e.agent_types[nearest.id(slot)] != 0) {
        tagger = nearest.id(slot);
        tagger_d2 = nearest.distance(slot);
      }
    }
  } else {
    for (int i = 0; i < e.num_taggers; ++i) {  // tagger_ids ascending: ties go to the smaller id
      const int j = e.tagger_ids[i];
      const float d2 = wd_squared_distance(x, y, e.x[j], e.y[j]);
      if (d2 < tagger_d2) {
        tagger_d2 = d2;
        tagger = j;
      }
    }
  }
  float reward = e.rewards[agent];
  const bool tagged = tagger >= 0 && wd_sqrtf(tagger_d2) < e.distance_margin;
  if (tagged) {
    reward = wd_fadd_rn(reward, e.tag_penalty);
    atomicAdd(&e.rewards[tagger], e.tag_reward);
  }
  if (e.t == e.episode_length && !(tagged && e.runner_exits)) reward = wd_fadd_rn(reward, e.end_of_game_reward);
  e.rewards[agent] = reward;
  e.tagged_by[agent] = tagged ? tagger : -1;
}

}  // namespace

extern "C" __global__ void TagContinuousStep(
    float* loc_x, float* loc_y, float* speed, float* direction, float* acceleration,
    const int* __restrict__ agent_types, const int* __restrict__ tagger_ids, int num_taggers,
    float* edge_hit_reward_penalty, float edge_hit_penalty, float grid_length,
    const float* __restrict__ acceleration_actions, const float* __restrict__ turn_actions, float max_speed,
    int num_other_agents_observed, const float* __restrict__ skill_levels, int runner_exits_game_after_tagged,
    int* still_in_the_game, int use_full_observation, float* observations,
    const int* __restrict__ sampled_actions, float* rewards, const float* __restrict__ step_rewards,
    int* num_runners, float distance_margin_for_reward, float tag_reward_for_tagger, float tag_penalty_for_runner,
    float end_of_game_reward_for_runner, float position_scale, float speed_scale, float direction_scale,
    int* tagged_by, int* neighbor_grid, int* done, int* timestep, int num_agents, int episode_length) {
  const int env = wd_env_id();
  const int n = num_agents;
  TagEnv e;
  e.n = n;
  e.k = use_full_observation ? 0 : num_other_agents_observed;
  e.x = loc_x + env * n;
  e.y = loc_y + env * n;
  e.speed = speed + env * n;
  e.acc = acceleration + env * n;
  e.dir = direction + env * n;
  e.still = still_in_the_game + env * n;
  e.tagged_by = tagged_by + env * n;
  e.rewards = rewards + env * n;
  e.edge_hit = edge_hit_reward_penalty + env * n;
  e.observations = observations + (size_t)env * n * (TAG_NUM_FEATURES * (e.k == 0 ? n - 1 : e.k) + 1);
  e.actions = sampled_actions + (size_t)env * n * 2;
  e.acceleration_actions = acceleration_actions;
  e.turn_actions = turn_actions;
  e.skill_levels = skill_levels;
  e.step_rewards = step_rewards;
  e.agent_types = agent_types;
  e.tagger_ids = tagger_ids;
  e.num_taggers = num_taggers;
  e.grid_length = grid_length;
  e.max_speed = max_speed;
  e.edge_hit_penalty = edge_hit_penalty;
  e.position_scale = position_scale;
  e.speed_scale = speed_scale;
  e.direction_scale = direction_scale;
  e.distance_margin = distance_margin_for_reward;
  e.tag_reward = tag_reward_for_tagger;
  e.tag_penalty = tag_penalty_for_runner;
  e.end_of_game_reward = end_of_game_reward_for_runner;
  e.runner_exits = runner_exits_game_after_tagged;
  e.num_runners = num_runners + env;
  e.done = done + env;
  e.episode_length = episode_length;
  e.t = timestep[env] + 1;
  e.time_feature = wd_fdiv_rn((float)e.t, (float)episode_length);
  WdGrid grid = wd_grid_view(neighbor_grid, env, n, e.k, grid_length);

  // ------------------------------------------------------------ 1. move
  WD_FOR_EACH_AGENT(a, n) tag_move(e, a);
  wd_sync_env();
  if (wd_env_leader()) timestep[env] = e.t;  // every thread read it above

  // ------------------------------------------------------------ 2. neighbour grid
  wd_grid_build(grid, e.x, e.y, e.still, n);

  // ------------------------------------------------------------ 3. observe and tag
  WD_FOR_EACH_AGENT(a, n) {
    WdNearest nearest;
    nearest.init(e.k);
    tag_observe(e, grid, a, nearest);
    e.tagged_by[a] = -1;
    if (e.still[a] && agent_types[a] == 0) tag_resolve(e, a, nearest);
  }
  wd_sync_env();

  // ------------------------------------------------------------ 4. tagged runners exit
  if (e.runner_exits) {
    WD_FOR_EACH_AGENT(a, n) {
      if (e.tagged_by[a] < 0) continue;
      e.still[a] = 0;
      if (atomicSub(e.num_runners, 1) == 1) atomicExch(e.done, 1);  // the last runner: terminated
    }
  }
  if (wd_env_leader() && e.t >= episode_length) atomicCAS(e.done, 0, 2);  // truncated unless terminated
}
