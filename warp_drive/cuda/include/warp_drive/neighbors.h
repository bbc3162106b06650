// The k nearest neighbours of every agent in a 2-D square: a reusable search
// for env steps written as phases over agents (agents.h).
//
//   WdNearest     the k nearest so far, as (squared distance, id) keys in a
//                 small sorted list (k <= WD_MAX_NEIGHBORS); ties go to the
//                 smaller id, so every executor finds the same neighbours.
//   wd_scan_nearest(...)   offer every agent (O(N) per observer).
//   WdGrid        a uniform grid of cells over [0, L]^2 rebuilt every step in
//                 a per-env scratch row of global memory, so that each
//                 observer looks at O(k) candidates instead of all N:
//     grid = wd_grid_view(scratch, env, n, k, L);     // every thread
//     wd_grid_build(grid, x, y, in_game, n);          // every thread: holds barriers
//     WD_FOR_EACH_AGENT(a, n) wd_grid_nearest(grid, nearest, a, x[a], y[a]);
//
// The grid pays off from about WD_GRID_MIN_AGENTS agents with a few
// neighbours observed; wd_grid_view returns an empty grid (side 0) below that,
// and for k == 0. The scratch row holds wd_grid_scratch_words(n) ints
// (warp_drive.env.neighbors.grid_scratch_words in Python, which a test checks
// against this header).
//
// Results are exact: the same keys as a scan over every agent, whatever the
// number of threads and whatever order they run in. How the candidates of a
// block of cells are ranked is chosen at run time: with one thread per env (the
// cpu executor) the env's scratch serves that thread alone, and candidates are
// gathered there and ranked in a branch-free batch; with many threads (a GPU)
// each thread inserts its candidates into its own list.
#ifndef WARP_DRIVE_NEIGHBORS_H
#define WARP_DRIVE_NEIGHBORS_H

#include <math.h>

#include <warp_drive/agents.h>
#include <warp_drive/portable_math.h>

// Largest k (the list lives in registers/local memory).
#define WD_MAX_NEIGHBORS 32
// Fewer agents than this: no grid (a scan is as fast).
#define WD_GRID_MIN_AGENTS 64
// Cells per side at most (WD_GRID_MAX_SIDE^2 <= 2048 cells).
#define WD_GRID_MAX_SIDE 45
// Agents per cell per neighbour observed (at least WD_GRID_MIN_OCCUPANCY):
// small cells make a block of cells hug the square searched; 0.3 k was
// fastest at k = 10 (0.1 k to 0.45 k are within a few percent).
#define WD_GRID_OCCUPANCY_PER_NEIGHBOR 0.3f
#define WD_GRID_MIN_OCCUPANCY 0.5f
// The first block searched holds about this many agents per neighbour, at the
// env's mean density.
#define WD_GRID_SEARCH_AREA_PER_NEIGHBOR 1.6f
// Distance slices of the batched selection, and candidates it ranks at once
// with counters in registers (six SSE registers on x86: 16 lanes cost 2% more
// at 1000 agents, k = 10; 28 or 32 spill the counters).
#define WD_GRID_SORT_SLICES 32
#define WD_GRID_RANK_LANES 24

// fminf without the libm call (never NaN here).
__device__ __forceinline__ float wd_grid_min(float a, float b) { return a < b ? a : b; }

__device__ __forceinline__ float wd_squared_distance(float x0, float y0, float x1, float y1) {
  const float dx = wd_fsub_rn(x1, x0);
  const float dy = wd_fsub_rn(y1, y0);
  return wd_fadd_rn(wd_fmul_rn(dx, dx), wd_fmul_rn(dy, dy));
}

// The k nearest so far, sorted by (squared distance, id). Each entry is one
// 64-bit key, the distance's bits above the id: squared distances are never
// negative, so their IEEE bits order like the floats, and one integer
// comparison orders by distance and then by id.
struct WdNearest {
  unsigned long long keys[WD_MAX_NEIGHBORS + 1];  // keys[k]: scratch of the batched selection
  int count;
  int k;
  unsigned long long worst_key;  // the k-th key once k are kept, above every key before
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
  __device__ __forceinline__ float distance(int slot) const {
    return wd_uint_as_float((unsigned int)(keys[slot] >> 32));
  }
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

// Offer every agent j != self with in_game[j] (distances in chunks with no
// branch inside: the host compiler vectorises them, a GPU keeps them in registers).
#define WD_SCAN_CHUNK 8
__device__ __forceinline__ void wd_scan_nearest(WdNearest& nearest, int self, float x, float y, const float* px,
                                                const float* py, const int* in_game, int n) {
  int j = 0;
  for (; j + WD_SCAN_CHUNK <= n; j += WD_SCAN_CHUNK) {
    float d2[WD_SCAN_CHUNK];
    for (int u = 0; u < WD_SCAN_CHUNK; ++u) {
      const float d = wd_squared_distance(x, y, px[j + u], py[j + u]);
      d2[u] = in_game[j + u] && j + u != self ? d : INFINITY;
    }
    int maybe = 0;
    for (int u = 0; u < WD_SCAN_CHUNK; ++u) maybe |= d2[u] <= nearest.worst;
    if (!maybe) continue;
    for (int u = 0; u < WD_SCAN_CHUNK; ++u) {
      if (d2[u] <= nearest.worst && d2[u] != INFINITY) nearest.offer(d2[u], j + u);
    }
  }
  for (; j < n; ++j) {
    const float d = wd_squared_distance(x, y, px[j], py[j]);
    if (in_game[j] && j != self && d <= nearest.worst) nearest.offer(d, j);
  }
}

// ---------------------------------------------------------------- the grid

// One env's grid: views into its scratch row (see wd_grid_scratch_words).
// Entries cell_start[c] .. cell_start[c + 1] - 1 of entry_agent/x/y are the
// agents of cell c (cells numbered row by row), so a row of a block of cells
// is one contiguous range; entry_of[a] is agent a's entry (-1: not binned).
struct WdGrid {
  int side;        // cells per side; 0: no grid
  int cells;
  float cell;      // a cell's side length
  float inv_cell;  // cells per unit length
  float search_r;  // the half-width a search starts from (set by wd_grid_build)
  int k;
  int* cell_start;  // cells + 2
  int* entry_agent;
  float* entry_x;
  float* entry_y;
  int* entry_of;
  // The batched selection's scratch (one thread per env only).
  int* search_d2;  // float bits
  int* search_id;
  int* kept_d2;
  int* kept_id;
  unsigned char* slices;
};

// Ints of one env's scratch row for n agents.
__host__ __device__ __forceinline__ long long wd_grid_scratch_words(int n) {
  const long long padded = (long long)n + WD_GRID_RANK_LANES;
  return (long long)WD_GRID_MAX_SIDE * WD_GRID_MAX_SIDE + 2 + 4LL * n + 4 * padded + (n + 3) / 4;
}

// Cells per side for n agents and k neighbours (0: no grid). Only speed
// depends on it, never results.
__device__ __forceinline__ int wd_grid_side(int n, int k) {
  if (k <= 0 || n < WD_GRID_MIN_AGENTS) return 0;
  const float occupancy = fmaxf(WD_GRID_MIN_OCCUPANCY, WD_GRID_OCCUPANCY_PER_NEIGHBOR * (float)k);
  const int side = (int)sqrtf((float)n / occupancy);
  return side < 1 ? 1 : (side > WD_GRID_MAX_SIDE ? WD_GRID_MAX_SIDE : side);
}

// Env `env`'s grid over [0, length]^2 in its row of `scratch` (rows of
// wd_grid_scratch_words(n) ints; no rows at all where wd_grid_side is 0).
__device__ __forceinline__ WdGrid wd_grid_view(int* scratch, int env, int n, int k, float length) {
  WdGrid g;
  g.side = wd_grid_side(n, k);
  g.cells = g.side * g.side;
  g.k = k;
  g.cell = g.side > 0 ? wd_fdiv_rn(length, (float)g.side) : 0.0f;
  g.inv_cell = g.side > 0 ? wd_fdiv_rn((float)g.side, length) : 0.0f;
  g.search_r = 0.0f;
  const int padded = n + WD_GRID_RANK_LANES;
  int* p = g.side > 0 ? scratch + (size_t)env * wd_grid_scratch_words(n) : scratch;
  g.cell_start = p;
  p += WD_GRID_MAX_SIDE * WD_GRID_MAX_SIDE + 2;
  g.entry_agent = p;
  p += n;
  g.entry_x = (float*)p;
  p += n;
  g.entry_y = (float*)p;
  p += n;
  g.entry_of = p;
  p += n;
  g.search_d2 = p;
  p += padded;
  g.search_id = p;
  p += padded;
  g.kept_d2 = p;
  p += padded;
  g.kept_id = p;
  p += padded;
  g.slices = (unsigned char*)p;
  return g;
}

// Cell of a coordinate in [0, L] (clamped: L itself belongs to the last cell).
__device__ __forceinline__ int wd_grid_coordinate(float p, float inv_cell, int side) {
  const int c = (int)wd_fmul_rn(p, inv_cell);
  return c < 0 ? 0 : (c < side ? c : side - 1);
}

__device__ __forceinline__ int wd_grid_cell_of(const WdGrid& g, float x, float y) {
  return wd_grid_coordinate(y, g.inv_cell, g.side) * g.side + wd_grid_coordinate(x, g.inv_cell, g.side);
}

// A counter shared by the env's threads: a plain increment when the env has one.
__device__ __forceinline__ int wd_grid_increment(int* counter) {
  return wd_threads_per_env() == 1 ? (*counter)++ : atomicAdd(counter, 1);
}

// Bin the agents with in_game[a] != 0 at (x[a], y[a]) (a counting sort).
// Every thread of the env calls it (it holds barriers); afterwards the grid is
// read-only until the next build. Entry order inside a cell may differ
// between runs on a GPU (atomics); the search's results do not depend on it.
__device__ __forceinline__ void wd_grid_build(WdGrid& g, const float* x, const float* y, const int* in_game,
                                              int n) {
  if (g.side == 0) return;  // the same for every thread
  // Counts of cell c go to cell_start[c + 2]; after the prefix sum
  // cell_start[c + 1] is where cell c starts, and after the scatter (which
  // advances it) cell_start[c] is.
  for (int c = wd_agent_id(); c < g.cells + 2; c += wd_threads_per_env()) g.cell_start[c] = 0;
  wd_sync_env();
  WD_FOR_EACH_AGENT(a, n) {
    if (in_game[a]) wd_grid_increment(&g.cell_start[wd_grid_cell_of(g, x[a], y[a]) + 2]);
  }
  wd_sync_env();
  if (wd_env_leader()) {
    for (int c = 2; c < g.cells + 2; ++c) g.cell_start[c] += g.cell_start[c - 1];
  }
  wd_sync_env();
  WD_FOR_EACH_AGENT(a, n) {
    int i = -1;
    if (in_game[a]) {
      i = wd_grid_increment(&g.cell_start[wd_grid_cell_of(g, x[a], y[a]) + 1]);
      g.entry_agent[i] = a;
      g.entry_x[i] = x[a];
      g.entry_y[i] = y[a];
    }
    g.entry_of[a] = i;
  }
  wd_sync_env();
  // Searches start from a disc that holds about WD_GRID_SEARCH_AREA_PER_NEIGHBOR * k
  // agents at the mean density of the binned agents.
  const int binned = g.cell_start[g.cells];
  const float length = g.cell * (float)g.side;
  g.search_r = sqrtf(WD_GRID_SEARCH_AREA_PER_NEIGHBOR * (float)g.k * length * length /
                     (3.14159265f * (float)(binned > 0 ? binned : 1)));
}

// A distance's slice of [0, bound2] (scale = WD_GRID_SORT_SLICES / bound2, or
// 0 when bound2 is 0: all in slice 0), the last slice taking everything above;
// monotone in d2. The clamps are integer minimums on the bits (never negative
// floats order as ints), which compile to conditional moves.
__device__ __forceinline__ int wd_grid_slice(float d2, float bound2, float scale) {
  const unsigned int a = wd_float_as_uint(d2), b = wd_float_as_uint(bound2);
  const int s = (int)(wd_uint_as_float(a < b ? a : b) * scale);
  return s < WD_GRID_SORT_SLICES - 1 ? s : WD_GRID_SORT_SLICES - 1;
}

// Ranks n candidates (distances as float bits, ids distinct) in (distance, id)
// order and writes the k smallest as WdNearest keys to out[rank], the others
// to the sink out[k]. Each candidate in turn is compared with
// WD_GRID_RANK_LANES others at once, into counters that stay in registers;
// nothing branches on the data. Equal distances would share a rank: the ranks
// then sum to less than n(n-1)/2, and the candidates are ranked again with ids.
// d2s is read up to the next multiple of WD_GRID_RANK_LANES (padding).
__device__ __forceinline__ void wd_grid_rank_smallest(const int* d2s, const int* ids, int n, int k,
                                                      unsigned long long* out) {
  long long rank_sum = 0;
  for (int i0 = 0; i0 < n; i0 += WD_GRID_RANK_LANES) {
    int below[WD_GRID_RANK_LANES];
    for (int u = 0; u < WD_GRID_RANK_LANES; ++u) below[u] = 0;
    for (int j = 0; j < n; ++j) {
      const int dj = d2s[j];
#if defined(__GNUC__) && !defined(__CUDACC__)  // host compilers: all lanes unrolled, counters in registers
#pragma GCC unroll 32
#endif
      for (int u = 0; u < WD_GRID_RANK_LANES; ++u) below[u] += dj < d2s[i0 + u];
    }
    const int lanes = n - i0 < WD_GRID_RANK_LANES ? n - i0 : WD_GRID_RANK_LANES;
    for (int u = 0; u < lanes; ++u) {
      rank_sum += below[u];
      out[below[u] < k ? below[u] : k] = WdNearest::key(wd_uint_as_float((unsigned int)d2s[i0 + u]), ids[i0 + u]);
    }
  }
  if (rank_sum == (long long)n * (n - 1) / 2) return;  // no two distances equal
  for (int i = 0; i < n; ++i) {
    const int d2 = d2s[i], id = ids[i];
    int below = 0;
    for (int j = 0; j < n; ++j) below += (d2s[j] < d2) | ((d2s[j] == d2) & (ids[j] < id));
    out[below < k ? below : k] = WdNearest::key(wd_uint_as_float((unsigned int)d2), id);
  }
}

// The k smallest of m gathered candidates (0 < k <= m) into out[0..k), in
// order. Up to WD_GRID_RANK_LANES are ranked directly; more go first through a
// histogram of distance slices of [0, bound2] (bound2 at least every
// distance): the slice of the k-th smallest bounds the candidates that can be
// among the k -- k and a few more -- and only those are ranked.
__device__ __forceinline__ void wd_grid_select_smallest(const WdGrid& g, int m, int k, float bound2,
                                                        unsigned long long* out) {
  if (m <= WD_GRID_RANK_LANES) {
    wd_grid_rank_smallest(g.search_d2, g.search_id, m, k, out);
    return;
  }
  const float scale = bound2 > 0.0f ? (float)WD_GRID_SORT_SLICES / bound2 : 0.0f;
  int count[WD_GRID_SORT_SLICES];
  for (int b = 0; b < WD_GRID_SORT_SLICES; ++b) count[b] = 0;
  for (int i = 0; i < m; ++i) {
    g.slices[i] = (unsigned char)wd_grid_slice(wd_uint_as_float((unsigned int)g.search_d2[i]), bound2, scale);
    ++count[g.slices[i]];
  }
  int last = 0;  // the slice of the k-th smallest
  for (int below = count[0]; below < k; below += count[++last]) {
  }
  int n = 0;
  for (int i = 0; i < m; ++i) {
    g.kept_d2[n] = g.search_d2[i];
    g.kept_id[n] = g.search_id[i];
    n += g.slices[i] <= last;
  }
  wd_grid_rank_smallest(g.kept_d2, g.kept_id, n, k, out);
}

// The k nearest others of agent `self` at (x, y) among the binned agents, into
// `nearest` (init'ed with the grid's k): exactly those of a scan of every
// binned agent. The search takes the cells that meet the square of
// half-width r around the observer and keeps the candidates certainly closer
// than every cell outside that block ("certainly": a margin of a thousandth of
// a cell on the distance, 2^-10 relative on its square, far above float
// rounding); with at least k kept, the k nearest of those are the k nearest
// of all; otherwise, unless the block covers the grid, r grows. r starts at
// grid.search_r, where the first block usually suffices.
__device__ __forceinline__ void wd_grid_nearest(const WdGrid& g, WdNearest& nearest, int self, float x, float y) {
  const int side = g.side, k = g.k;
  const float cell = g.cell, inv_cell = g.inv_cell;
  const float slack = cell * 0.0009765625f;
  const float grid_length = cell * (float)side;
  const bool batched = wd_threads_per_env() == 1;  // the scratch is this thread's alone
  // Batched, the observer's own entry reads as infinitely far while it
  // searches, so no candidate needs an id test.
  const int own = g.entry_of[self];
  if (batched && own >= 0) g.entry_x[own] = INFINITY;
  for (float r = g.search_r;; r *= 1.41421356f) {
    if (r > grid_length) r = grid_length;  // the block covers the grid (and cell coordinates stay small)
    const int x0 = wd_grid_coordinate(x - r, inv_cell, side), x1 = wd_grid_coordinate(x + r, inv_cell, side);
    const int y0 = wd_grid_coordinate(y - r, inv_cell, side), y1 = wd_grid_coordinate(y + r, inv_cell, side);
    // Distance to the nearest cell outside the block (none beyond the grid's border).
    float gap = INFINITY;
    if (x0 > 0) gap = wd_grid_min(gap, x - (float)x0 * cell);
    if (x1 < side - 1) gap = wd_grid_min(gap, (float)(x1 + 1) * cell - x);
    if (y0 > 0) gap = wd_grid_min(gap, y - (float)y0 * cell);
    if (y1 < side - 1) gap = wd_grid_min(gap, (float)(y1 + 1) * cell - y);
    const bool whole_grid = gap == INFINITY;
    // Too few agents in the block (the observer may be one of them): grow before reading any.
    int in_block = 0;
    for (int gy = y0; gy <= y1; ++gy) in_block += g.cell_start[gy * side + x1 + 1] - g.cell_start[gy * side + x0];
    if (in_block <= k && !whole_grid) continue;
    const float clear = gap - slack;
    const float clear2 = clear > 0.0f ? clear * clear : 0.0f;
    const float certain2 = clear2 * 0.9990234375f;  // (1 - 2^-10): the margin on the squares
    int m = 0;
    if (batched) {  // gather every certain candidate, then select once
      for (int gy = y0; gy <= y1; ++gy) {
        const int lo = g.cell_start[gy * side + x0], hi = g.cell_start[gy * side + x1 + 1];
        for (int i = lo; i < hi; ++i) {
          const float d2 = wd_squared_distance(x, y, g.entry_x[i], g.entry_y[i]);
          g.search_d2[m] = (int)wd_float_as_uint(d2);
          g.search_id[m] = g.entry_agent[i];
          m += d2 < certain2;
        }
      }
    } else {  // insert each certain candidate into this thread's list
      nearest.init(k);
      for (int gy = y0; gy <= y1; ++gy) {
        const int lo = g.cell_start[gy * side + x0], hi = g.cell_start[gy * side + x1 + 1];
        for (int i = lo; i < hi; ++i) {
          const float d2 = wd_squared_distance(x, y, g.entry_x[i], g.entry_y[i]);
          const bool certain = d2 < certain2 && i != own;
          m += certain;
          if (certain && d2 <= nearest.worst) nearest.offer(d2, g.entry_agent[i]);
        }
      }
    }
    if (m < k && !whole_grid) continue;  // too few certain: a larger block
    if (batched) {
      // Every kept distance is below clear2, or, over the whole grid, at most the largest.
      float bound2 = clear2;
      if (whole_grid) {
        int largest = 0;
        for (int i = 0; i < m; ++i) largest = g.search_d2[i] > largest ? g.search_d2[i] : largest;
        bound2 = wd_uint_as_float((unsigned int)largest);
      }
      const int found = m < k ? m : k;
      if (found > 0) wd_grid_select_smallest(g, m, found, bound2, nearest.keys);
      nearest.count = found;
      if (found == k) {
        nearest.worst_key = nearest.keys[k - 1];
        nearest.worst = nearest.distance(k - 1);
      }
      if (own >= 0) g.entry_x[own] = x;
    }
    return;
  }
}

#endif  // WARP_DRIVE_NEIGHBORS_H
