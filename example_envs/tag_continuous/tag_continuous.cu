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
// On the cpu executor with the neighbour grid, thread 0 of the block instead
// runs the three steps for every agent in turn, binning the agents into the
// grid after step 1, and the other threads return at once. There a block's
// threads run one after another on one host thread anyway: as one loop the
// step has no barrier (at 1000 agents the fiber switches of two barriers cost
// a third of the step) and no per-thread setup. The per-agent work is the same
// helpers (tag_move, tag_observe, tag_resolve) on both paths.
//
// Bookkeeping without extra barriers: every thread reads _timestep_ before the
// first barrier and thread 0 of the env writes t back after it (nobody reads it
// afterwards). _done_ is only ever
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
// The grid search's first block holds about this many agents per neighbour
// observed, at the env's mean density (see tag_grid_search).
#define TAG_SEARCH_AREA_PER_NEIGHBOR 1.6f
// Distance slices of the grid search's selection (tag_select_smallest).
#define TAG_SORT_SLICES 32
// Candidates the selection ranks at once, their counters in registers
// (tag_rank_smallest): six SSE registers. Measured at 1000 agents, K=10: 16
// lanes cost 2% more, 20 lanes 10%, and 28 or 32 spill the counters to memory.
#define TAG_RANK_LANES 24

// One env's staged state in shared memory (one struct: one address to look up
// where __shared__ is thread-local storage, on the cpu executor).
struct TagShared {
  float x[TAG_STAGE_CAP];  // +inf for agents out of the game: the neighbour scan needs no flag test
  float y[TAG_STAGE_CAP];
  int still[TAG_STAGE_CAP];  // the flags before this step's tags
  // The grid: cell_of[a] is agent a's cell (-1 when out of the game); entries
  // cell_start[c] .. cell_start[c + 1] - 1 of cell_agents/cell_x/cell_y are
  // the agents of cell c and their positions, stored in cell order so that the
  // search reads them one after another; entry_of[a] is agent a's entry.
  int cell_of[TAG_GRID_MAX_CELLS > 0 ? TAG_STAGE_CAP : 1];
  int entry_of[TAG_GRID_MAX_CELLS > 0 ? TAG_STAGE_CAP : 1];
  int cell_agents[TAG_GRID_MAX_CELLS > 0 ? TAG_STAGE_CAP : 1];
  float cell_x[TAG_GRID_MAX_CELLS > 0 ? TAG_STAGE_CAP : 1];
  float cell_y[TAG_GRID_MAX_CELLS > 0 ? TAG_STAGE_CAP : 1];
  int cell_start[TAG_GRID_MAX_CELLS + 2];
  // The grid search's candidates (at most every other agent) and the scratch of their sort.
  // (padded for tag_rank_smallest's reads).
  int search_d2[TAG_GRID_MAX_CELLS > 0 ? TAG_STAGE_CAP + TAG_RANK_LANES : 1];  // float bits
  int search_id[TAG_GRID_MAX_CELLS > 0 ? TAG_STAGE_CAP + TAG_RANK_LANES : 1];
  // The candidates the selection's histogram keeps, split into distance bits and ids (padded likewise).
  int kept_d2[TAG_GRID_MAX_CELLS > 0 ? TAG_STAGE_CAP + TAG_RANK_LANES : 1];
  int kept_id[TAG_GRID_MAX_CELLS > 0 ? TAG_STAGE_CAP + TAG_RANK_LANES : 1];
  unsigned char search_slices[TAG_GRID_MAX_CELLS > 0 ? TAG_STAGE_CAP : 1];
};

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
  unsigned long long keys[TAG_MAX_NEIGHBORS + 1];  // keys[k]: scratch of the grid search's selection
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

// fminf without the libm call (no NaN here).
__device__ __forceinline__ float tag_min(float a, float b) { return a < b ? a : b; }

// Cell of a coordinate in [0, L] on a side x side grid (clamped: L itself
// belongs to the last cell).
__device__ __forceinline__ int tag_cell_coordinate(float p, float inv_cell, int side) {
  const int c = (int)wd_fmul_rn(p, inv_cell);
  return c < 0 ? 0 : (c < side ? c : side - 1);
}

// A distance's slice of [0, bound2] (scale = TAG_SORT_SLICES / bound2, or 0
// and bound2 0: all in slice 0), the last slice taking everything above:
// monotone in d2, as a float product rounds monotonically. The clamps are
// integer minimums on the bits (never negative floats order as ints), which
// compile to conditional moves: a branch here would be taken at random.
__device__ __forceinline__ int tag_slice(float d2, float bound2, float scale) {
  const unsigned int a = wd_float_as_uint(d2), b = wd_float_as_uint(bound2);
  const int s = (int)(wd_uint_as_float(a < b ? a : b) * scale);
  return s < TAG_SORT_SLICES - 1 ? s : TAG_SORT_SLICES - 1;
}

// Ranks the n candidates (distances as float bits, ids distinct) in
// (distance, id) order and writes the k smallest, as TagNearest keys, to
// out[rank], the others to the sink out[k]. The ranks are counted on the
// distances alone first: each candidate in turn is compared with
// TAG_RANK_LANES others at once, into counters that stay in registers (the
// host compiler vectorises the lanes; nothing branches on the data, where a
// comparison sort's branches mispredict about every other time). Two equal
// distances (two agents at one spot, say in a corner) would get the same
// rank; the ranks then sum to less than n(n-1)/2, and the candidates are
// ranked again, comparing ids on equal distances. d2s is read up to the next
// multiple of TAG_RANK_LANES (padding, never ranked).
__device__ __forceinline__ void tag_rank_smallest(const int* d2s, const int* ids, int n, int k,
                                                  unsigned long long* out) {
  long long rank_sum = 0;
  for (int i0 = 0; i0 < n; i0 += TAG_RANK_LANES) {
    int below[TAG_RANK_LANES];
    for (int u = 0; u < TAG_RANK_LANES; ++u) below[u] = 0;
    for (int j = 0; j < n; ++j) {
      const int dj = d2s[j];  // never negative floats: their bits order as ints
#ifdef WD_CPU_EXECUTOR  // all lanes unrolled: the counters then live in registers
#pragma GCC unroll 32
#endif
      for (int u = 0; u < TAG_RANK_LANES; ++u) below[u] += dj < d2s[i0 + u];
    }
    const int lanes = n - i0 < TAG_RANK_LANES ? n - i0 : TAG_RANK_LANES;
    for (int u = 0; u < lanes; ++u) {
      rank_sum += below[u];
      out[below[u] < k ? below[u] : k] = TagNearest::key(wd_uint_as_float((unsigned int)d2s[i0 + u]), ids[i0 + u]);
    }
  }
  if (rank_sum == (long long)n * (n - 1) / 2) return;  // no two distances equal
  for (int i = 0; i < n; ++i) {
    const int d2 = d2s[i], id = ids[i];
    int below = 0;
    for (int j = 0; j < n; ++j) below += (d2s[j] < d2) | ((d2s[j] == d2) & (ids[j] < id));
    out[below < k ? below : k] = TagNearest::key(wd_uint_as_float((unsigned int)d2), id);
  }
}

// Puts the k smallest (squared distance, id) pairs of the m candidates
// (0 < k <= m; distances as float bits, ids distinct) in increasing order, as
// TagNearest keys, in out[0..k) (out[k] is scratch). Up to TAG_RANK_LANES
// candidates are ranked directly. More go first through a histogram of
// TAG_SORT_SLICES distance slices of [0, bound2] (bound2 at least every
// distance): the slice of the k-th smallest bounds the candidates that can be
// among the k -- k and a few more, as the candidates of a block of cells lie
// spread over an area and their squared distances about evenly spread --
// and only those, compacted into kept_d2/kept_id, are ranked.
__device__ __forceinline__ void tag_select_smallest(const int* d2s, const int* ids, int m, int k, float bound2,
                                                    unsigned char* slice, int* kept_d2, int* kept_id,
                                                    unsigned long long* out) {
  if (m <= TAG_RANK_LANES) {
    tag_rank_smallest(d2s, ids, m, k, out);
    return;
  }
  const float scale = bound2 > 0.0f ? (float)TAG_SORT_SLICES / bound2 : 0.0f;
  int count[TAG_SORT_SLICES];
  for (int b = 0; b < TAG_SORT_SLICES; ++b) count[b] = 0;
  for (int i = 0; i < m; ++i) {
    slice[i] = (unsigned char)tag_slice(wd_uint_as_float((unsigned int)d2s[i]), bound2, scale);
    ++count[slice[i]];
  }
  int last = 0;  // the slice of the k-th smallest
  for (int below = count[0]; below < k; below += count[++last]) {
  }
  int n = 0;
  for (int i = 0; i < m; ++i) {
    kept_d2[n] = d2s[i];
    kept_id[n] = ids[i];
    n += slice[i] <= last;
  }
  tag_rank_smallest(kept_d2, kept_id, n, k, out);
}

// The neighbour grid of one env step (side 0: no grid, scan every agent).
struct TagGrid {
  int side;         // cells per side
  float cell;       // a cell's side length
  float inv_cell;   // cells per unit length
  float search_r;  // the half-width the search starts from
};

// The k nearest others through the uniform grid of cells (only agents still
// in the game are binned): exactly those of a scan of every agent. The search
// gathers the cells that meet the square of half-width r around the observer,
// keeping the candidates certainly closer than every cell outside that block,
// and stops once it keeps at least k -- the k nearest of those are then the k
// nearest of all -- or once the block covers the grid; otherwise it grows r.
// r starts where a disc holds about TAG_SEARCH_AREA_PER_NEIGHBOR * k agents
// at the env's mean density (`grid.search_r`), so the first block usually
// suffices, and the grid's cells are small beside r, so the block hugs the
// square. "Certainly closer": a margin of a thousandth of a cell on the
// distance, 2^-10 relative on its square, far above float rounding. Cells are
// numbered row by row and the grid entries are in cell order, so each row of
// a block is one contiguous range of entries, read in one branch-free pass;
// then one selection (tag_select_smallest) instead of an insertion per
// candidate.
__device__ __forceinline__ void tag_grid_search(TagNearest& nearest, int self, float x, float y, TagShared& sh, const TagGrid& grid) {
  const int side = grid.side;
  const float cell = grid.cell, inv_cell = grid.inv_cell;
  const float slack = cell * 0.0009765625f;
  const float grid_length = cell * (float)side;
  const int k = nearest.k;
  // The observer's own entry reads as infinitely far while it searches, so
  // that no candidate needs an id test.
  const int own = sh.entry_of[self];
  sh.cell_x[own] = INFINITY;
  float r = grid.search_r;
  for (;; r *= 1.41421356f) {
    if (r > grid_length) r = grid_length;  // the block covers the grid (and cell coordinates stay small)
    const int x0 = tag_cell_coordinate(x - r, inv_cell, side), x1 = tag_cell_coordinate(x + r, inv_cell, side);
    const int y0 = tag_cell_coordinate(y - r, inv_cell, side), y1 = tag_cell_coordinate(y + r, inv_cell, side);
    // Distance to the nearest cell outside the block (none beyond the grid's border).
    float gap = INFINITY;
    if (x0 > 0) gap = tag_min(gap, x - (float)x0 * cell);
    if (x1 < side - 1) gap = tag_min(gap, (float)(x1 + 1) * cell - x);
    if (y0 > 0) gap = tag_min(gap, y - (float)y0 * cell);
    if (y1 < side - 1) gap = tag_min(gap, (float)(y1 + 1) * cell - y);
    const bool whole_grid = gap == INFINITY;
    // Too few agents in the block (the observer is one of them): grow before reading any.
    int in_block = 0;
    for (int gy = y0; gy <= y1; ++gy) in_block += sh.cell_start[gy * side + x1 + 1] - sh.cell_start[gy * side + x0];
    if (in_block <= k && !whole_grid) continue;
    const float clear = gap - slack;
    const float clear2 = clear > 0.0f ? clear * clear : 0.0f;
    const float certain2 = clear2 * 0.9990234375f;  // (1 - 2^-10): the margin on the squares
    int m = 0;
    for (int gy = y0; gy <= y1; ++gy) {
      const int lo = sh.cell_start[gy * side + x0], hi = sh.cell_start[gy * side + x1 + 1];
      for (int i = lo; i < hi; ++i) {
        const float d2 = tag_squared_distance(x, y, sh.cell_x[i], sh.cell_y[i]);
        const int j = sh.cell_agents[i];
        sh.search_d2[m] = (int)wd_float_as_uint(d2);  // never negative: the bits order as ints
        sh.search_id[m] = j;
        m += d2 < certain2;
      }
    }
    if (m < k && !whole_grid) continue;  // too few certain: a larger block
    // Every kept distance is below clear2, or, over the whole grid, at most the largest.
    float bound2 = clear2;
    if (whole_grid) {
      int largest = 0;
      for (int i = 0; i < m; ++i) largest = sh.search_d2[i] > largest ? sh.search_d2[i] : largest;
      bound2 = wd_uint_as_float((unsigned int)largest);
    }
    const int found = m < k ? m : k;
    if (found > 0) {
      tag_select_smallest(sh.search_d2, sh.search_id, m, found, bound2, sh.search_slices, sh.kept_d2, sh.kept_id,
                          nearest.keys);
    }
    nearest.count = found;
    if (found == k) {
      nearest.worst_key = nearest.keys[k - 1];
      nearest.worst = nearest.distance(k - 1);
    }
    sh.cell_x[own] = x;
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
// constants, so that the per-agent helpers below take one argument instead of
// thirty.
struct TagEnv {
  int n, k;  // agents; neighbours observed (0 with full observation)
  float *x, *y, *speed, *acc, *dir;  // moved state, final after step 1
  const int* still;                   // flags the observations see (staged or global, before the tags)
  int* still_global;                  // flags the tags clear
  float* rewards;
  float* edge_hit;                    // this step's edge penalties
  float* observations;
  const int* actions;                 // (acceleration, turn) index pairs
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

// One agent's own state after its move.
struct TagAgent {
  float x, y, sp, acc, dir;
  int still;
};

// Step 1 for one agent: apply its actions, move it (clamped to the square,
// with the edge penalty), write its state and base reward, and return it.
// Runners add tag rewards into taggers' rows in step 3.
__device__ __forceinline__ TagAgent tag_move(const TagEnv& e, int agent) {
  const float two_pi = tag_two_pi();
  TagAgent me;
  me.still = e.still_global[agent];
  const float delta_acc = e.acceleration_actions[e.actions[2 * agent]];
  const float delta_turn = e.turn_actions[e.actions[2 * agent + 1]];

  float acc = wd_fadd_rn(e.acc[agent], delta_acc);
  float dir = me.still ? tag_fmod_two_pi(wd_fadd_rn(e.dir[agent], delta_turn)) : 0.0f;
  if (dir < 0.0f) dir = wd_fadd_rn(dir, two_pi);

  const float top_speed = wd_fmul_rn(e.max_speed, e.skill_levels[agent]);
  float sp = wd_fadd_rn(e.speed[agent], acc);
  if (sp < 0.0f) sp = 0.0f;
  if (sp > top_speed) sp = top_speed;
  if (!me.still) sp = 0.0f;
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
  e.rewards[agent] = me.still ? wd_fadd_rn(edge, e.step_rewards[agent]) : 0.0f;
  me.x = x;
  me.y = y;
  me.sp = sp;
  me.acc = acc;
  me.dir = dir;
  return me;
}

// Step 2 for one agent: its observation row from the moved state and the
// pre-tag flags. With partial observation `nearest` comes back holding its k
// nearest, which step 3 reuses.
__device__ __forceinline__ void tag_observe(const TagEnv& e, TagShared& sh, bool staged, const TagGrid& grid, int agent,
                            const TagAgent& me, TagNearest& nearest) {
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
    if (grid.side > 0) {
      tag_grid_search(nearest, agent, me.x, me.y, sh, grid);
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
    sh.entry_of[a] = i;
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
    int stage_in_shared, int grid_side, int* done, int* timestep, int num_agents, int episode_length) {
  __shared__ TagShared sh;

  const int env = wd_env_id();
  const int agent = wd_agent_id();
  const int n = num_agents;
  // Uniform over the env: every thread takes the same branch at the barriers.
  const bool staged = stage_in_shared && wd_blocks_per_env() == 1 && n <= TAG_STAGE_CAP;
  const int cells = grid_side * grid_side;
  const bool use_grid = staged && !use_full_observation && grid_side > 0 && cells <= TAG_GRID_MAX_CELLS;
  // The grid path (cpu executor only): thread 0 steps the whole env, one
  // agent after another, and the other threads have nothing to do. There a
  // block's threads run one after another on one host thread anyway; run as
  // one loop, the step needs no barrier (which would switch 1000 fibers) and
  // no per-thread setup, and thread 0 bins the agents into the grid itself.
  if (use_grid && agent != 0) return;

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

  if (use_grid) {
    const float cell = wd_fdiv_rn(grid_length, (float)grid_side);
    const float inv_cell = wd_fdiv_rn((float)grid_side, grid_length);
    for (int a = 0; a < n; ++a) {
      const TagAgent moved = tag_move(e, a);
      sh.x[a] = moved.still ? moved.x : INFINITY;
      sh.y[a] = moved.y;
      sh.still[a] = moved.still;
      sh.cell_of[a] = moved.still ? tag_cell_coordinate(moved.y, inv_cell, grid_side) * grid_side +
                                        tag_cell_coordinate(moved.x, inv_cell, grid_side)
                                  : -1;
    }
    tag_bin(sh, n, cells);
    // The search starts from a disc that holds about TAG_SEARCH_AREA_PER_NEIGHBOR
    // * k agents at the mean density of the agents still in the game.
    const int in_game = sh.cell_start[cells];
    const TagGrid grid = {grid_side, cell, inv_cell,
                          sqrtf(TAG_SEARCH_AREA_PER_NEIGHBOR * (float)e.k * grid_length * grid_length /
                                (3.14159265f * (float)(in_game > 0 ? in_game : 1)))};
    for (int a = 0; a < n; ++a) {
      const TagAgent other = {e.x[a], e.y[a], e.speed[a], e.acc[a], e.dir[a], sh.still[a]};
      TagNearest nearest;
      nearest.init(e.k);
      tag_observe(e, sh, staged, grid, a, other, nearest);
      if (other.still && agent_types[a] == 0) tag_resolve(e, a, other, nearest);
    }
    timestep[env] = e.t;
    if (e.t >= episode_length) atomicCAS(&done[env], 0, 2);  // truncated unless terminated
    return;
  }

  // ------------------------------------------------------------ 1. move
  const bool is_agent = agent < n;
  TagAgent me = {0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0};
  if (is_agent) {
    me = tag_move(e, agent);
    if (staged) {
      sh.x[agent] = me.still ? me.x : INFINITY;
      sh.y[agent] = me.y;
      sh.still[agent] = me.still;
    }
  }
  // Every thread has read _timestep_ above; thread 0 of the env writes it
  // back after the barrier (nobody reads it afterwards).
  wd_sync_env();
  if (agent == 0) timestep[env] = e.t;

  // ------------------------------------------------------------ 2. observe
  TagNearest nearest;
  nearest.init(e.k);
  const TagGrid no_grid = {0, 0.0f, 0.0f, 0.0f};
  if (is_agent) tag_observe(e, sh, staged, no_grid, agent, me, nearest);
  // Unstaged, the observations above read still_in_the_game from global
  // memory: wait for every agent before runners start clearing their flags.
  if (!staged) wd_sync_env();

  // ------------------------------------------------------------ 3. tag
  if (is_agent && me.still && agent_types[agent] == 0) tag_resolve(e, agent, me, nearest);
  if (agent == 0 && e.t >= episode_length) atomicCAS(&done[env], 0, 2);  // truncated unless terminated
}
