// TagContinuous step: taggers chase runners on a continuous square of side L.
//
// One block row per environment replica, one thread per agent (an env may span
// several blocks: wd_agent_id() runs across them and wd_sync_env() is then a
// cooperative grid barrier). Semantics are those of the original WarpDrive env
// (reference doc, section 3.2), with its bugs fixed:
//
//   * a tagger tagged-for by several runners in one step gets every reward:
//     runners add into the tagger's reward with atomicAdd (the added value is
//     always tag_reward, so the float result does not depend on the order),
//     and the runner counter is decremented with atomicSub;
//   * every thread, including threads past the last agent, reaches every
//     barrier -- the per-agent work is guarded, never the barrier;
//   * a runner tagged on the last step (when runners exit) is out of the game
//     and gets no end-of-game reward; the NumPy reference applies the same
//     rule (the original GPU and CPU versions disagreed);
//   * neighbour and nearest-tagger ties (equal squared distance) go to the
//     smaller agent id;
//   * no O(N^2) scratch: each agent keeps its K nearest still-in-game others
//     in a small sorted list in registers/local memory (K <= TAG_MAX_NEIGHBORS,
//     checked in Python) while it looks at the others once -- all of them, or,
//     on the cpu executor with many agents, only those in nearby cells of a
//     grid built in shared memory (same result, see tag_grid_search);
//   * with partial observation a runner's nearest tagger comes from its k
//     nearest when they cover the tagging distance (tag_nearest_covers), and
//     from a scan of every tagger otherwise (same result).
//
// Step order: (1) every agent moves and writes its base reward; positions and
// the pre-tag "still in the game" flags are staged in shared memory when they
// fit (one block per env, at most TAG_STAGE_CAP agents); barrier; (2)
// observations from the moved state and the pre-tag flags, then (3) tagging.
// Unstaged (an env spanning several blocks, or too many agents), the
// observations read the flags from global memory, so a second barrier
// separates them from the tagging writes. Every thread reaches every barrier:
// the conditions above are the same for the whole env.
//
// On the cpu executor with the neighbour grid, steps 2 and 3 instead run in
// the last thread of the block to finish step 1, for every agent in turn (the
// threadFenceReduction pattern: arrivals[env] counts the threads in). That
// thread also bins the agents into the grid. The kernel then has no barrier,
// so the executor runs the threads as plain calls rather than fibers; at 1000
// agents the two barriers' fiber switches cost a third of the step.
//
// Bookkeeping without extra barriers: every thread reads _timestep_ before the
// first barrier and thread 0 of the env writes t back after it (nobody reads it
// afterwards; on the grid path the last thread does both). _done_ is only ever
// set: the runner whose atomicSub empties the runner count stores 1
// (terminated), and thread 0 turns a still-clear flag into 2 (truncated) with
// atomicCAS at the time limit, so a termination on the last step wins whatever
// the order.
//
// Float math is IEEE single precision with every operation rounded on its own
// (wd_f*_rn, wd_sincosf, wd_sqrtf, fmodf which is exact), so the GPU, the cpu
// executor and the NumPy reference compute the same bits.
#include <warp_drive/core.h>

// Largest num_other_agents_observed (the per-thread neighbour list lives in
// registers/local memory). TagContinuous.MAX_NEIGHBORS mirrors it.
#define TAG_MAX_NEIGHBORS 32
// Most agents per env whose positions and flags are staged in shared memory
// (12 bytes each). On a GPU 512 (6 KiB) keeps shared memory from limiting how
// many small-env blocks share an SM; larger envs read global memory, which the
// L1 cache serves. The cpu executor's __shared__ is per-worker memory with no
// such limit. Staging can also be switched off from Python (stage_in_shared),
// which the tests use to check the unstaged path.
#ifdef WD_CPU_EXECUTOR
#define TAG_STAGE_CAP 4096
#else
#define TAG_STAGE_CAP 512
#endif
#define TAG_NUM_FEATURES 7
// Uniform grid of cells for the neighbour search of partial observations:
// each step the kernel bins the env's agents still in the game into
// grid_side^2 <= TAG_GRID_MAX_CELLS cells in shared memory (a counting sort)
// and each observer visits the cells around its own. That turns the O(N) scan
// per agent into O(k) on average, which pays off where a block's threads run
// one after another (the cpu executor). On a GPU a block scans its (at most
// TAG_STAGE_CAP staged) agents in parallel, so the grid is compiled out there.
#ifdef WD_CPU_EXECUTOR
#define TAG_GRID_MAX_CELLS (TAG_STAGE_CAP / 2)
#else
#define TAG_GRID_MAX_CELLS 0
#endif
// Candidates examined per round of the neighbour scan: their distances are
// computed together (vectorisable), and the rare ones that beat the current
// k-th nearest are inserted one by one.
#define TAG_SCAN_CHUNK 8
// Distance slices of the grid search's counting sort (tag_sort_smallest).
#define TAG_SORT_SLICES 32

// One env's staged state in shared memory (one struct: one address to look up
// where __shared__ is thread-local storage, on the cpu executor).
struct TagShared {
  float x[TAG_STAGE_CAP];  // +inf for agents out of the game: the neighbour scan needs no flag test
  float y[TAG_STAGE_CAP];
  int still[TAG_STAGE_CAP];  // the flags before this step's tags
  // The grid: cell_of[a] is agent a's cell (-1 when out of the game); entries
  // cell_start[c] .. cell_start[c + 1] - 1 of cell_agents/cell_x/cell_y are
  // the agents of cell c and their positions, stored in cell order so that the
  // search reads them one after another.
  int cell_of[TAG_GRID_MAX_CELLS > 0 ? TAG_STAGE_CAP : 1];
  int cell_agents[TAG_GRID_MAX_CELLS > 0 ? TAG_STAGE_CAP : 1];
  float cell_x[TAG_GRID_MAX_CELLS > 0 ? TAG_STAGE_CAP : 1];
  float cell_y[TAG_GRID_MAX_CELLS > 0 ? TAG_STAGE_CAP : 1];
  int cell_start[TAG_GRID_MAX_CELLS + 2];
  // The grid search's candidates (at most every other agent) and the scratch of their sort.
  unsigned long long search_keys[TAG_GRID_MAX_CELLS > 0 ? TAG_STAGE_CAP : 1];
  unsigned long long search_scratch[TAG_GRID_MAX_CELLS > 0 ? TAG_STAGE_CAP : 1];
  unsigned char search_slices[TAG_GRID_MAX_CELLS > 0 ? TAG_STAGE_CAP : 1];
};

namespace {

// 2*pi rounded to float (the original's kTwoPi = 6.283185308f is the same float).
__device__ __forceinline__ float tag_two_pi() { return 6.28318548202514648f; }

__device__ __forceinline__ float tag_squared_distance(float x0, float y0, float x1, float y1) {
  const float dx = wd_fsub_rn(x1, x0);
  const float dy = wd_fsub_rn(y1, y0);
  return wd_fadd_rn(wd_fmul_rn(dx, dx), wd_fmul_rn(dy, dy));
}

// Write the 7 features of `other` into slot `slot` of a feature-major
// observation row with `width` slots per feature.
__device__ __forceinline__ void tag_write_features(float* obs, int width, int slot, float dx, float dy,
                                                   float dspeed, float dacc, float ddir, float type,
                                                   float still) {
  obs[0 * width + slot] = dx;
  obs[1 * width + slot] = dy;
  obs[2 * width + slot] = dspeed;
  obs[3 * width + slot] = dacc;
  obs[4 * width + slot] = ddir;
  obs[5 * width + slot] = type;
  obs[6 * width + slot] = still;
}

// The k nearest so far, sorted by (squared distance, id): ties go to the
// smaller id. Each entry is one 64-bit key, the distance's bits above the id:
// squared distances are never negative, so their IEEE bits order like the
// floats, and one integer comparison orders by distance and then by id. The
// list lives in registers/local memory (k <= TAG_MAX_NEIGHBORS).
struct TagNearest {
  unsigned long long keys[TAG_MAX_NEIGHBORS];
  int count;
  int k;
  unsigned long long worst_key;  // the k-th kept key once k are kept, above every key before
  float worst;                   // its distance: candidates farther than this cannot enter

  __device__ __forceinline__ void init(int k_) {
    count = 0;
    k = k_;
    worst_key = ~0ull;
    worst = INFINITY;
  }

  static __device__ __forceinline__ unsigned long long key(float d2, int j) {
    return ((unsigned long long)wd_float_as_uint(d2) << 32) | (unsigned int)j;
  }
  __device__ __forceinline__ int id(int slot) const { return (int)(unsigned int)keys[slot]; }
  __device__ __forceinline__ float distance(int slot) const { return wd_uint_as_float((unsigned int)(keys[slot] >> 32)); }

  // A candidate (d2 finite), in any order of ids.
  __device__ __forceinline__ void offer(float d2, int j) {
    const unsigned long long candidate = key(d2, j);
    if (candidate >= worst_key) return;
    int pos = count < k ? count : k - 1;
    while (pos > 0 && keys[pos - 1] > candidate) {
      keys[pos] = keys[pos - 1];
      --pos;
    }
    keys[pos] = candidate;
    if (count < k) ++count;
    if (count == k) {
      worst_key = keys[k - 1];
      worst = distance(k - 1);
    }
  }
};

// Offer agents lo..hi-1 (never the observer itself). Staged, out-of-game agents
// carry x = +inf, so their distance is +inf and never beats anything; unstaged,
// their flags are read. Distances go in chunks with no branch inside, so the
// host compiler can vectorise them and the GPU keeps them in registers.
template <bool kStaged>
__device__ __forceinline__ void tag_scan(TagNearest& nearest, float x, float y, const float* px, const float* py,
                                         const int* pstill, int lo, int hi) {
  int j = lo;
  for (; j + TAG_SCAN_CHUNK <= hi; j += TAG_SCAN_CHUNK) {
    float d2[TAG_SCAN_CHUNK];
    for (int u = 0; u < TAG_SCAN_CHUNK; ++u) {
      const float d = tag_squared_distance(x, y, px[j + u], py[j + u]);
      d2[u] = kStaged || pstill[j + u] ? d : INFINITY;
    }
    int maybe = 0;
    for (int u = 0; u < TAG_SCAN_CHUNK; ++u) maybe |= d2[u] <= nearest.worst;
    if (!maybe) continue;
    for (int u = 0; u < TAG_SCAN_CHUNK; ++u) {
      if (d2[u] <= nearest.worst && d2[u] != INFINITY) nearest.offer(d2[u], j + u);
    }
  }
  for (; j < hi; ++j) {
    const float d = tag_squared_distance(x, y, px[j], py[j]);
    if ((kStaged || pstill[j]) && d <= nearest.worst && d != INFINITY) nearest.offer(d, j);
  }
}

// Cell of a coordinate in [0, L] on a side x side grid (clamped: L itself
// belongs to the last cell).
__device__ __forceinline__ int tag_cell_coordinate(float p, float inv_cell, int side) {
  const int c = (int)wd_fmul_rn(p, inv_cell);
  return c < 0 ? 0 : (c < side ? c : side - 1);
}

// Puts the k smallest of the distinct keys[0..m) (0 < k <= m), in increasing
// order, in keys[0..k). A counting sort by distance into TAG_SORT_SLICES
// equal slices of [0, the largest distance] nearly sorts them: the candidates
// of a block of cells lie spread over an area, so their squared distances are
// about evenly spread and a slice holds one or two. An insertion sort of the
// slices that hold the k smallest finishes the order. Sorting the candidates
// by comparisons instead branches on keys in random order, and those branches
// mispredict about every other time. `sorted` and `slices` are scratch for m.
__device__ void tag_sort_smallest(unsigned long long* keys, unsigned long long* sorted, unsigned char* slices, int m,
                                  int k) {
  unsigned long long largest = 0;
  for (int i = 0; i < m; ++i) largest = keys[i] > largest ? keys[i] : largest;
  const float largest_d2 = wd_uint_as_float((unsigned int)(largest >> 32));
  const float scale = largest_d2 > 0.0f ? (float)TAG_SORT_SLICES / largest_d2 : 0.0f;
  int start[TAG_SORT_SLICES + 1];
  for (int b = 0; b <= TAG_SORT_SLICES; ++b) start[b] = 0;
  // A key's slice, monotone in its distance (a float product rounds monotonically).
  for (int i = 0; i < m; ++i) {
    const int b = (int)(wd_uint_as_float((unsigned int)(keys[i] >> 32)) * scale);
    slices[i] = (unsigned char)(b < TAG_SORT_SLICES ? b : TAG_SORT_SLICES - 1);
    ++start[slices[i] + 1];
  }
  for (int b = 1; b <= TAG_SORT_SLICES; ++b) start[b] += start[b - 1];
  // The slices up to the one holding the k-th smallest: sorted[0..end) once scattered.
  int end = m;
  for (int b = 1; b <= TAG_SORT_SLICES; ++b) {
    if (start[b] >= k) {
      end = start[b];
      break;
    }
  }
  for (int i = 0; i < m; ++i) sorted[start[slices[i]]++] = keys[i];
  for (int i = 1; i < end; ++i) {  // nearly in order already: few moves, rarely mispredicted
    const unsigned long long v = sorted[i];
    int j = i;
    for (; j > 0 && sorted[j - 1] > v; --j) sorted[j] = sorted[j - 1];
    sorted[j] = v;
  }
  for (int i = 0; i < k; ++i) keys[i] = sorted[i];
}

// The k nearest others through the uniform grid of cells (only agents still
// in the game are binned): exactly those of a scan of every agent. The search
// gathers the square block of cells within r of the observer's cell, r = 1, 2,
// ..., keeping the candidates certainly closer than every cell outside the
// block, and stops once it keeps at least k -- the k nearest of those are then
// the k nearest of all -- or once the block covers the grid. The grid is sized
// so that r = 1 usually does (see TagContinuous.grid_side). "Certainly
// closer": a margin of a thousandth of a cell on the distance, 2^-10 relative
// on its square, far above float rounding. Cells are numbered row by row and
// the grid entries are in cell order, so each row of a block is one
// contiguous range of entries, read in one branch-free pass; then one
// selection (tag_sort_smallest) instead of an insertion per candidate.
__device__ void tag_grid_search(TagNearest& nearest, int self, float x, float y, TagShared& sh, int side,
                                float cell, float inv_cell) {
  const int cx = tag_cell_coordinate(x, inv_cell, side);
  const int cy = tag_cell_coordinate(y, inv_cell, side);
  const float slack = cell * 0.0009765625f;
  const int k = nearest.k;
  for (int r = 1;; ++r) {
    const int x0 = cx > r ? cx - r : 0, x1 = cx + r < side - 1 ? cx + r : side - 1;
    const int y0 = cy > r ? cy - r : 0, y1 = cy + r < side - 1 ? cy + r : side - 1;
    // Distance to the nearest cell outside the block (none beyond the grid's border).
    float gap = INFINITY;
    if (x0 > 0) gap = fminf(gap, x - (float)x0 * cell);
    if (x1 < side - 1) gap = fminf(gap, (float)(x1 + 1) * cell - x);
    if (y0 > 0) gap = fminf(gap, y - (float)y0 * cell);
    if (y1 < side - 1) gap = fminf(gap, (float)(y1 + 1) * cell - y);
    const float clear = gap - slack;
    const float clear2 = clear > 0.0f ? clear * clear : 0.0f;
    int m = 0;
    for (int gy = y0; gy <= y1; ++gy) {
      const int lo = sh.cell_start[gy * side + x0], hi = sh.cell_start[gy * side + x1 + 1];
      for (int i = lo; i < hi; ++i) {
        const float d2 = tag_squared_distance(x, y, sh.cell_x[i], sh.cell_y[i]);
        const int j = sh.cell_agents[i];
        sh.search_keys[m] = TagNearest::key(d2, j);
        m += (d2 * 1.0009765625f < clear2) & (j != self);
      }
    }
    if (m < k && gap != INFINITY) continue;  // too few certain: a larger block
    const int count = m < k ? m : k;
    if (count > 0) tag_sort_smallest(sh.search_keys, sh.search_scratch, sh.search_slices, m, count);
    for (int slot = 0; slot < count; ++slot) nearest.keys[slot] = sh.search_keys[slot];
    nearest.count = count;
    if (count == k) {
      nearest.worst_key = nearest.keys[k - 1];
      nearest.worst = nearest.distance(k - 1);
    }
    return;
  }
}

// Whether a runner's k nearest include every agent still in the game closer
// than `margin`: true when the list holds fewer than k (it then holds them
// all: nothing was pruned) or when its k-th distance is beyond the margin. The
// factor 1 + 2^-10 on the squared margin is far above float rounding: any d2
// with wd_sqrtf(d2) < margin is below the k-th distance, so it was kept.
// Then the nearest tagger inside the margin is the first tagger in the list,
// and the scan over all taggers can be skipped.
__device__ __forceinline__ bool tag_nearest_covers(const TagNearest& nearest, float margin) {
  if (nearest.k == 0) return false;  // full observation: no list
  if (nearest.count < nearest.k) return true;
  return nearest.worst > margin * margin * 1.0009765625f;
}

// The step's inputs for one env: pointers already offset to its rows, and the
// constants. Built once per thread so that the per-agent helpers below take
// one argument instead of thirty.
struct TagEnv {
  int n, k;  // agents; neighbours observed (0 with full observation)
  float *x, *y, *speed, *acc, *dir;  // moved state, final after step 1
  const int* still;                   // flags the observations see (staged or global, before the tags)
  int* still_global;                  // flags the tags clear
  float* rewards;
  float* observations;
  const int* agent_types;
  const int* tagger_ids;
  int num_taggers;
  float position_scale, speed_scale, direction_scale, time_feature;
  float distance_margin, tag_reward, tag_penalty, end_of_game_reward;
  int runner_exits;
  int* num_runners;  // this env's counter
  int* done;         // this env's flag
  int t, episode_length;
};

// One agent's own state after its move.
struct TagAgent {
  float x, y, sp, acc, dir;
  int still;
};

// Step 2 for one agent: its observation row from the moved state and the
// pre-tag flags. With partial observation `nearest` comes back holding its k
// nearest, which step 3 reuses.
__device__ void tag_observe(const TagEnv& e, TagShared& sh, bool staged, bool use_grid, int grid_side,
                            float cell, float inv_cell, int agent, const TagAgent& me, TagNearest& nearest) {
  if (e.k == 0) {  // full observation: every other agent, in id order
    const int width = e.n - 1;
    float* obs = e.observations + (size_t)agent * (TAG_NUM_FEATURES * width + 1);
    int slot = 0;
    for (int j = 0; j < e.n; ++j) {
      if (j == agent) continue;
      const float type = (float)e.agent_types[j];
      const float other_still = (float)e.still[j];
      if (me.still) {
        tag_write_features(obs, width, slot, wd_fdiv_rn(wd_fsub_rn(e.x[j], me.x), e.position_scale),
                           wd_fdiv_rn(wd_fsub_rn(e.y[j], me.y), e.position_scale),
                           wd_fdiv_rn(wd_fsub_rn(e.speed[j], me.sp), e.speed_scale),
                           wd_fdiv_rn(wd_fsub_rn(e.acc[j], me.acc), e.speed_scale),
                           wd_fdiv_rn(wd_fsub_rn(e.dir[j], me.dir), e.direction_scale), type, other_still);
      } else {
        tag_write_features(obs, width, slot, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, type, other_still);
      }
      ++slot;
    }
    obs[TAG_NUM_FEATURES * width] = me.still ? e.time_feature : 0.0f;
    return;
  }
  const int k = e.k;
  float* obs = e.observations + (size_t)agent * (TAG_NUM_FEATURES * k + 1);
  if (me.still) {
    // The k nearest others still in the game: through the grid, or a scan of
    // the ids below, then above the observer's own (increasing ids).
    if (use_grid) {
      tag_grid_search(nearest, agent, me.x, me.y, sh, grid_side, cell, inv_cell);
    } else if (staged) {
      tag_scan<true>(nearest, me.x, me.y, sh.x, sh.y, sh.still, 0, agent);
      tag_scan<true>(nearest, me.x, me.y, sh.x, sh.y, sh.still, agent + 1, e.n);
    } else {
      tag_scan<false>(nearest, me.x, me.y, e.x, e.y, e.still, 0, agent);
      tag_scan<false>(nearest, me.x, me.y, e.x, e.y, e.still, agent + 1, e.n);
    }
  }
  for (int slot = 0; slot < k; ++slot) {
    if (slot < nearest.count) {
      const int j = nearest.id(slot);
      tag_write_features(obs, k, slot, wd_fdiv_rn(wd_fsub_rn(e.x[j], me.x), e.position_scale),
                         wd_fdiv_rn(wd_fsub_rn(e.y[j], me.y), e.position_scale),
                         wd_fdiv_rn(wd_fsub_rn(e.speed[j], me.sp), e.speed_scale),
                         wd_fdiv_rn(wd_fsub_rn(e.acc[j], me.acc), e.speed_scale),
                         wd_fdiv_rn(wd_fsub_rn(e.dir[j], me.dir), e.direction_scale), (float)e.agent_types[j],
                         1.0f);  // only agents still in the game are observed
    } else {
      tag_write_features(obs, k, slot, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f);
    }
  }
  obs[TAG_NUM_FEATURES * k] = me.still ? e.time_feature : 0.0f;
}

// Step 3 for one runner still in the game: tagged when its nearest tagger is
// within the margin; the end-of-game reward at the time limit.
__device__ void tag_resolve(const TagEnv& e, int agent, const TagAgent& me, const TagNearest& nearest) {
  float reward = e.rewards[agent];
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
      const float d2 = tag_squared_distance(me.x, me.y, e.x[j], e.y[j]);
      if (d2 < tagger_d2) {
        tagger_d2 = d2;
        tagger = j;
      }
    }
  }
  int in_game = 1;
  if (tagger >= 0 && wd_sqrtf(tagger_d2) < e.distance_margin) {
    reward = wd_fadd_rn(reward, e.tag_penalty);
    atomicAdd(&e.rewards[tagger], e.tag_reward);
    if (e.runner_exits) {
      in_game = 0;
      e.still_global[agent] = 0;
      if (atomicSub(e.num_runners, 1) == 1) atomicExch(e.done, 1);  // the last runner: terminated
    }
  }
  // Runners still in the game at the time limit (not those tagged out on
  // this very step) collect the end-of-game reward.
  if (e.t == e.episode_length && in_game) reward = wd_fadd_rn(reward, e.end_of_game_reward);
  e.rewards[agent] = reward;
}

// Counting sort of the agents still in the game into their cells (grid
// entries in cell order). Counts go to cell_start[c + 2]; after the prefix sum
// cell_start[c + 1] is where cell c starts, and after the scatter (which
// advances it) cell_start[c] is.
__device__ void tag_bin(TagShared& sh, int n, int cells) {
  for (int c = 0; c < cells + 2; ++c) sh.cell_start[c] = 0;
  for (int a = 0; a < n; ++a) {
    if (sh.cell_of[a] >= 0) ++sh.cell_start[sh.cell_of[a] + 2];
  }
  for (int c = 2; c < cells + 2; ++c) sh.cell_start[c] += sh.cell_start[c - 1];
  for (int a = 0; a < n; ++a) {
    if (sh.cell_of[a] < 0) continue;
    const int i = sh.cell_start[sh.cell_of[a] + 1]++;
    sh.cell_agents[i] = a;
    sh.cell_x[i] = sh.x[a];
    sh.cell_y[i] = sh.y[a];
  }
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
    int stage_in_shared, int grid_side, int* arrivals, int* done, int* timestep, int num_agents,
    int episode_length) {
  __shared__ TagShared sh;

  const int env = wd_env_id();
  const int agent = wd_agent_id();
  const int n = num_agents;
  const bool is_agent = agent < n;
  const int row = env * n + agent;
  // Uniform over the env: every thread takes the same branch at the barriers.
  const bool staged = stage_in_shared && wd_blocks_per_env() == 1 && n <= TAG_STAGE_CAP;
  const int cells = grid_side * grid_side;
  const bool use_grid = staged && !use_full_observation && grid_side > 0 && cells <= TAG_GRID_MAX_CELLS;
  const float cell = use_grid ? wd_fdiv_rn(grid_length, (float)grid_side) : 0.0f;
  const float inv_cell = use_grid ? wd_fdiv_rn((float)grid_side, grid_length) : 0.0f;

  // ------------------------------------------------------------ 1. move
  TagAgent me = {0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0};
  if (is_agent) {
    const float two_pi = tag_two_pi();
    me.still = still_in_the_game[row];
    const float delta_acc = acceleration_actions[sampled_actions[2 * row]];
    const float delta_turn = turn_actions[sampled_actions[2 * row + 1]];

    float acc = wd_fadd_rn(acceleration[row], delta_acc);
    float dir = me.still ? fmodf(wd_fadd_rn(direction[row], delta_turn), two_pi) : 0.0f;
    if (dir < 0.0f) dir = wd_fadd_rn(dir, two_pi);

    const float top_speed = wd_fmul_rn(max_speed, skill_levels[agent]);
    float sp = wd_fadd_rn(speed[row], acc);
    if (sp < 0.0f) sp = 0.0f;
    if (sp > top_speed) sp = top_speed;
    if (!me.still) sp = 0.0f;
    if (sp <= 0.0f || sp >= top_speed) acc = 0.0f;  // stop accelerating at either speed limit

    float s, c;
    wd_sincosf(dir, &s, &c);
    float x = wd_fadd_rn(loc_x[row], wd_fmul_rn(sp, c));
    float y = wd_fadd_rn(loc_y[row], wd_fmul_rn(sp, s));
    const bool crossed = x < 0.0f || x > grid_length || y < 0.0f || y > grid_length;
    if (x < 0.0f) x = 0.0f;
    if (x > grid_length) x = grid_length;
    if (y < 0.0f) y = 0.0f;
    if (y > grid_length) y = grid_length;
    const float edge = crossed ? edge_hit_penalty : 0.0f;

    loc_x[row] = x;
    loc_y[row] = y;
    speed[row] = sp;
    direction[row] = dir;
    acceleration[row] = acc;
    edge_hit_reward_penalty[row] = edge;
    // Base reward; runners add tag rewards into taggers' rows in step 3.
    rewards[row] = me.still ? wd_fadd_rn(edge, step_rewards[agent]) : 0.0f;
    me.x = x;
    me.y = y;
    me.sp = sp;
    me.acc = acc;
    me.dir = dir;
    if (staged) {
      sh.x[agent] = me.still ? x : INFINITY;
      sh.y[agent] = y;
      sh.still[agent] = me.still;
    }
    if (use_grid) {
      sh.cell_of[agent] = me.still ? tag_cell_coordinate(y, inv_cell, grid_side) * grid_side +
                                         tag_cell_coordinate(x, inv_cell, grid_side)
                                   : -1;
    }
  }

  if (use_grid) {
    // Steps 2 and 3 by the last thread of the block to finish its move, for
    // every agent (the grid is only compiled for the cpu executor, whose
    // threads run one after another on one host thread anyway). With no
    // barrier in the kernel the executor runs the block's threads as plain
    // calls, not fibers: on 1000 agents a barrier costs as much as an agent's
    // whole observation. arrivals[env] counts the block's threads in; the
    // last one sets it back to 0 for the next launch.
    if (atomicAdd(&arrivals[env], 1) != (int)(blockDim.x * blockDim.y * blockDim.z) - 1) return;
    arrivals[env] = 0;
  }

  TagEnv e;
  e.n = n;
  e.k = use_full_observation ? 0 : num_other_agents_observed;
  e.x = loc_x + env * n;
  e.y = loc_y + env * n;
  e.speed = speed + env * n;
  e.acc = acceleration + env * n;
  e.dir = direction + env * n;
  e.still = staged ? sh.still : still_in_the_game + env * n;
  e.still_global = still_in_the_game + env * n;
  e.rewards = rewards + env * n;
  e.observations = observations + (size_t)env * n * (TAG_NUM_FEATURES * (e.k == 0 ? n - 1 : e.k) + 1);
  e.agent_types = agent_types;
  e.tagger_ids = tagger_ids;
  e.num_taggers = num_taggers;
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

  if (use_grid) {
    tag_bin(sh, n, cells);
    e.t = timestep[env] + 1;
    e.time_feature = wd_fdiv_rn((float)e.t, (float)episode_length);
    for (int a = 0; a < n; ++a) {
      const TagAgent other = {e.x[a], e.y[a], e.speed[a], e.acc[a], e.dir[a], sh.still[a]};
      TagNearest nearest;
      nearest.init(e.k);
      tag_observe(e, sh, staged, use_grid, grid_side, cell, inv_cell, a, other, nearest);
      if (other.still && agent_types[a] == 0) tag_resolve(e, a, other, nearest);
    }
    timestep[env] = e.t;
    if (e.t >= episode_length) atomicCAS(&done[env], 0, 2);  // truncated unless terminated
    return;
  }

  // Every thread reads _timestep_ before the barrier; thread 0 of the env
  // writes it back after (nobody reads it afterwards).
  e.t = timestep[env] + 1;
  e.time_feature = wd_fdiv_rn((float)e.t, (float)episode_length);
  wd_sync_env();
  if (agent == 0) timestep[env] = e.t;

  // ------------------------------------------------------------ 2. observe
  TagNearest nearest;
  nearest.init(e.k);
  if (is_agent) tag_observe(e, sh, staged, use_grid, grid_side, cell, inv_cell, agent, me, nearest);
  // Unstaged, the observations above read still_in_the_game from global
  // memory: wait for every agent before runners start clearing their flags.
  if (!staged) wd_sync_env();

  // ------------------------------------------------------------ 3. tag
  if (is_agent && me.still && agent_types[agent] == 0) tag_resolve(e, agent, me, nearest);
  if (agent == 0 && e.t >= episode_length) atomicCAS(&done[env], 0, 2);  // truncated unless terminated
}
