// Environment reset on the device.
//
// The original launched one kernel per registered array at every reset, each
// with a block shape tied to that array's dims (so a feature dim above 1024
// could not launch). Here one launch resets every array: the host builds a
// table of array descriptors once, and any block size works because threads
// stride over the words of each env's slice.
//
// Launch order on one stream: wd_reset_arrays first (it reads the done flags),
// then the env's own reset kernel if it has one (Environment.reset_kernel: it
// reads the done flags too, and writes the starts it draws over the twins' and
// pools'), then wd_clear_done_flags (it clears them). On a forced reset of an
// env with a reset kernel, wd_mark_done_flags runs first, so that the reset
// kernel's one test, done[env] != 0, holds for exactly the envs being reset.
#include <warp_drive/core.h>

// Philox domain of the pool-row draw ("pool" in ASCII): keeps it independent
// of every other use of the same (seed, counter, stream).
#define WD_RESET_POOL_DOMAIN 0x706f6f6cu

// table: n_arrays rows of {dst address, src address, words_per_env, pool_size},
// all arrays of 4-byte words (float32 / int32 copied bit for bit).
//   pool_size == 0: dst[env*w + i] = src[env*w + i]   (restore the *_at_reset twin)
//   pool_size  > 0: dst[env*w + i] = src[r*w + i]     (src is a pool of pool_size rows)
// The pool row r = min(floor(u * pool_size), pool_size - 1) comes from ONE draw
// per env and call, u = wd_random_uniform(seed, counter, env, "pool"), which
// every thread recomputes identically: all agents of an env see the same row
// (the original let each thread advance a shared RNG state, a race), and pools
// of equal size get the same row, so paired pools (e.g. positions and
// velocities) stay consistent. floor(u * pool_size) is computed exactly in
// integers -- u = k * 2^-24 with k = (bits >> 8) + 1 -- so it equals the exact
// real product that a float64 reference computes.
//
// Layout: `threads_per_env` consecutive threads of a block share one env and
// stride over its words; a block of B threads covers B / threads_per_env envs
// (B must be a multiple of it). Small envs (single-agent, a few words) then
// share blocks instead of each taking a block of mostly idle threads, and the
// threads of an env that is not done return at once. grid = ceil(n_envs /
// (B / threads_per_env)).
extern "C" __global__ void wd_reset_arrays(const unsigned long long* __restrict__ table, int n_arrays,
                                           const int* __restrict__ done, int force, unsigned long long seed,
                                           unsigned long long counter, int n_envs, int threads_per_env) {
  const unsigned int lane = threadIdx.x % threads_per_env;
  const unsigned long long env =
      (unsigned long long)blockIdx.x * (blockDim.x / threads_per_env) + threadIdx.x / threads_per_env;
  if (env >= (unsigned long long)n_envs || (!force && !done[env])) return;  // no barrier is involved
  unsigned int draw = wd_random_bits(seed, counter, (unsigned int)env, WD_RESET_POOL_DOMAIN).x;
  unsigned long long k = (unsigned long long)(draw >> 8) + 1ull;  // u = k * 2^-24 in (0, 1]
  for (int a = 0; a < n_arrays; ++a) {
    unsigned int* dst = reinterpret_cast<unsigned int*>(table[4 * a + 0]);
    const unsigned int* src = reinterpret_cast<const unsigned int*>(table[4 * a + 1]);
    unsigned long long words = table[4 * a + 2];
    unsigned long long pool_size = table[4 * a + 3];
    unsigned long long src_row = env;
    if (pool_size > 0) {
      // k * pool_size < 2^24 * 2^40: exact in 64 bits for pools below 2^40 rows.
      src_row = (k * pool_size) >> 24;
      if (src_row > pool_size - 1) src_row = pool_size - 1;
    }
    unsigned int* d = dst + env * words;
    const unsigned int* s = src + src_row * words;
    for (unsigned long long i = lane; i < words; i += threads_per_env) d[i] = s[i];
  }
}

// One thread per env (flat 1-D launch): clear the done flag and the step
// counter of every env that was reset.
extern "C" __global__ void wd_clear_done_flags(int* __restrict__ done, int* __restrict__ timestep, int n_envs,
                                               int force) {
  long long env = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (env >= n_envs) return;
  if (force || done[env]) {
    done[env] = 0;
    timestep[env] = 0;
  }
}

// One thread per env (flat 1-D launch): mark every env as being reset (a forced
// reset), keeping a flag already set (1 terminated, 2 truncated) as it is.
extern "C" __global__ void wd_mark_done_flags(int* __restrict__ done, int n_envs) {
  long long env = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (env < n_envs && !done[env]) done[env] = 1;
}
