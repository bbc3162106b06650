// Host checks of the warp_drive headers and core kernels, compiled with g++
// against shim.h (blocks and threads are looped over by hand):
//   g++ -std=c++17 -O2 -ffp-contract=off -I ../../warp_drive/cuda/include check_kernels.cpp -o /tmp/check_kernels
//   /tmp/check_kernels
#include "shim.h"
#include <warp_drive/core.h>

#include "../../warp_drive/cuda/kernels/log.cu"
#include "../../warp_drive/cuda/kernels/reset.cu"
#include "../../warp_drive/cuda/kernels/sampler.cu"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <cstdint>
#include <vector>

static int g_failures = 0;
#define CHECK(cond, ...)                                  \
  do {                                                    \
    if (!(cond)) {                                        \
      ++g_failures;                                       \
      printf("FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond); \
      printf(__VA_ARGS__);                                \
      printf("\n");                                       \
    }                                                     \
  } while (0)

static unsigned long long addr(const void* p) { return (unsigned long long)(uintptr_t)p; }

// Random123 known-answer vectors for philox4x32_R(10, ...).
static void check_philox() {
  const unsigned int kat[3][10] = {
      {0, 0, 0, 0, 0, 0, 0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8},
      {0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff, 0x408f276d, 0x41c83b0e, 0xa20bc7c6,
       0x6d5451fd},
      {0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344, 0xa4093822, 0x299f31d0, 0xd16cfe09, 0x94fdcceb, 0x5001e420,
       0x24126ea1},
  };
  unsigned int in[18], out[12];
  for (int i = 0; i < 3; ++i) {
    uint4 r = wd_philox4x32_10(make_uint4(kat[i][0], kat[i][1], kat[i][2], kat[i][3]), make_uint2(kat[i][4], kat[i][5]));
    CHECK(r.x == kat[i][6] && r.y == kat[i][7] && r.z == kat[i][8] && r.w == kat[i][9], "KAT %d: %08x %08x %08x %08x", i,
          r.x, r.y, r.z, r.w);
    for (int j = 0; j < 6; ++j) in[6 * i + j] = kat[i][j];
  }
  HARNESS_LAUNCH(1, 1, 4, wd_philox_kat(in, out, 3));  // 4 threads: one past the end
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 4; ++j) CHECK(out[4 * i + j] == kat[i][6 + j], "kernel KAT %d word %d", i, j);
  printf("philox KAT: 3 vectors, header and wd_philox_kat kernel\n");

  // The (seed, counter, stream, domain) -> (key, ctr) mapping.
  unsigned long long seed = 0x0123456789abcdefull, counter = 0xfedcba9876543210ull;
  uint4 a = wd_random_bits(seed, counter, 7, 9);
  uint4 b = wd_philox4x32_10(make_uint4(0x76543210u, 0xfedcba98u, 7, 9), make_uint2(0x89abcdefu, 0x01234567u));
  CHECK(a.x == b.x && a.y == b.y && a.z == b.z && a.w == b.w, "wd_random_bits mapping");
}

static void check_uniform_and_normal() {
  CHECK(wd_uint_to_uniform(0u) == 0x1p-24f, "min uniform");
  CHECK(wd_uint_to_uniform(0xffffffffu) == 1.0f, "max uniform");
  CHECK(wd_uint_to_uniform(0x80000000u) == 0.5f + 0x1p-24f, "mid uniform");
  const int n = 1000000;
  double su = 0, sz = 0, szz = 0, sz3 = 0, sz4 = 0, cov = 0;
  long within1 = 0;
  float umin = 2, umax = -1;
  for (int i = 0; i < n; ++i) {
    float u = wd_random_uniform(42, 3, (unsigned)i, 0x1234);
    umin = fminf(umin, u);
    umax = fmaxf(umax, u);
    su += u;
    float2 z = wd_random_normal2(42, 3, (unsigned)i, 0x1234);
    for (float v : {z.x, z.y}) {
      sz += v;
      szz += (double)v * v;
      sz3 += (double)v * v * v;
      sz4 += (double)v * v * v * v;
      within1 += fabsf(v) < 1.0f;
    }
    cov += (double)z.x * z.y;
  }
  double m = 2.0 * n, mean = sz / m, var = szz / m - mean * mean;
  printf("uniform: %d draws, min %.3g max %.9g mean %.5f\n", n, umin, umax, su / n);
  printf("normal (Box-Muller): %.0f draws, mean %+.5f var %.5f skew %+.4f kurtosis %.4f P(|z|<1) %.5f corr(x,y) %+.5f\n",
         m, mean, var, sz3 / m, sz4 / m, within1 / m, cov / n);
  CHECK(umin > 0 && umax <= 1, "uniform range");
  CHECK(fabs(su / n - 0.5) < 2e-3, "uniform mean");
  CHECK(fabs(mean) < 5e-3, "normal mean %g", mean);  // sd of the mean: 7e-4
  CHECK(fabs(var - 1) < 1e-2, "normal var %g", var);  // sd of the var: 1e-3
  CHECK(fabs(sz4 / m - 3) < 5e-2, "normal kurtosis");
  CHECK(fabs(within1 / m - 0.682689) < 3e-3, "normal P(|z|<1)");
  CHECK(fabs(cov / n) < 5e-3, "normal pair correlation");
}

static void check_categorical() {
  // rows: zeros around the mass, an argmax tie, all zero, NaN/negatives, one-hot at the end
  const int rows = 5, A = 5, H = 2;
  const float nan = NAN;
  std::vector<float> p = {0.0f, 0.5f, 0.0f, 0.5f, 0.0f,   //
                          0.1f, 0.3f, 0.3f, 0.2f, 0.1f,   //
                          0.0f, 0.0f, 0.0f, 0.0f, 0.0f,   //
                          nan,  -1.f, 2.0f, nan,  1.0f,   //
                          0.0f, 0.0f, 0.0f, 0.0f, 1e-30f};
  std::vector<int> act(rows * H, -7);
  // argmax into head 1
  HARNESS_LAUNCH(2, 1, 4, wd_sample_categorical(p.data(), act.data(), rows, A, H, 1, 1, 1, 0, 0));
  int want_argmax[rows] = {1, 1, 0, 2, 4};
  for (int r = 0; r < rows; ++r) {
    CHECK(act[r * H + 1] == want_argmax[r], "argmax row %d got %d", r, act[r * H + 1]);
    CHECK(act[r * H + 0] == -7, "head 0 untouched");
  }
  // sampling into head 0, many counters
  std::vector<std::vector<long>> counts(rows, std::vector<long>(A, 0));
  const int draws = 200000;
  for (int c = 0; c < draws; ++c) {
    HARNESS_LAUNCH(1, 1, 8, wd_sample_categorical(p.data(), act.data(), rows, A, H, 0, 0, 99, (unsigned long long)c, 5));
    for (int r = 0; r < rows; ++r) counts[r][act[r * H]]++;
  }
  double expect[rows][A] = {{0, .5, 0, .5, 0}, {.1, .3, .3, .2, .1}, {1, 0, 0, 0, 0}, {0, 0, 2. / 3, 0, 1. / 3},
                            {0, 0, 0, 0, 1}};
  for (int r = 0; r < rows; ++r) {
    printf("categorical row %d frequencies:", r);
    for (int a = 0; a < A; ++a) {
      double f = counts[r][a] / (double)draws;
      printf(" %.4f", f);
      if (expect[r][a] == 0) CHECK(counts[r][a] == 0, "row %d zero-probability action %d chosen", r, a);
      else CHECK(fabs(f - expect[r][a]) < 5e-3, "row %d action %d freq %g want %g", r, a, f, expect[r][a]);
    }
    printf("\n");
  }
  // Inverse-CDF boundaries: find counters whose draw for row 0 is u = 1 and
  // u = 2^-24 (the extremes); u = 1 must take the last positive entry, never a
  // trailing zero, and the smallest u the first positive entry.
  long long c_max = -1, c_min = -1;
  for (long long c = 0; c < (1ll << 27) && (c_max < 0 || c_min < 0); ++c) {
    unsigned int top = wd_random_bits(99, (unsigned long long)c, 0, 5).x >> 8;
    if (top == 0xffffffu && c_max < 0) c_max = c;
    if (top == 0u && c_min < 0) c_min = c;
  }
  CHECK(c_max >= 0 && c_min >= 0, "found extreme draws");
  std::vector<float> edge = {0.0f, 0.1f, 0.2f, 0.7f, 0.0f, 0.0f};
  int edge_act = -1;
  HARNESS_LAUNCH(1, 1, 1, wd_sample_categorical(edge.data(), &edge_act, 1, 6, 1, 0, 0, 99, (unsigned long long)c_max, 5));
  CHECK(edge_act == 3, "u = 1 -> last positive action, got %d", edge_act);
  HARNESS_LAUNCH(1, 1, 1, wd_sample_categorical(edge.data(), &edge_act, 1, 6, 1, 0, 0, 99, (unsigned long long)c_min, 5));
  CHECK(edge_act == 1, "u = 2^-24 -> first positive action, got %d", edge_act);
  printf("categorical extremes: u=1 at counter %lld, u=2^-24 at counter %lld: checked\n", c_max, c_min);
  // Same (seed, counter, domain, row) -> same action regardless of block size.
  std::vector<int> a1(rows * H), a2(rows * H);
  HARNESS_LAUNCH(5, 1, 1, wd_sample_categorical(p.data(), a1.data(), rows, A, H, 0, 0, 7, 11, 5));
  HARNESS_LAUNCH(1, 1, 32, wd_sample_categorical(p.data(), a2.data(), rows, A, H, 0, 0, 7, 11, 5));
  for (int r = 0; r < rows; ++r) CHECK(a1[r * H] == a2[r * H], "block-size independence");
}

static void check_ou() {
  const int rows = 3, dim = 2, n = rows * dim;
  std::vector<float> mean = {0.f, 0.5f, 2.f, -3.f, 0.9f, 0.1f}, low = {-1.f, 0.f}, high = {1.f, 0.6f};
  std::vector<float> act(n), state(n, 0.25f);
  HARNESS_LAUNCH(1, 1, 8, wd_sample_ou(mean.data(), act.data(), state.data(), low.data(), high.data(), rows, dim, 0.15f,
                                       0.2f, 0.0f, 1, 2, 3));
  float want[n] = {0.f, 0.5f, 1.f, 0.f, 0.9f, 0.1f};
  for (int i = 0; i < n; ++i) {
    CHECK(act[i] == want[i], "ou deterministic %d", i);
    CHECK(state[i] == 0.25f, "ou state untouched %d", i);
  }
  // one noisy step, compared with the formula
  HARNESS_LAUNCH(2, 1, 4, wd_sample_ou(mean.data(), act.data(), state.data(), nullptr, nullptr, rows, dim, 0.15f, 0.2f,
                                       0.5f, 1, 2, 3));
  for (int i = 0; i < n; ++i) {
    float z = wd_random_normal2(1, 2, (unsigned)i, 3).x;
    float x = (1.0f - 0.15f) * 0.25f + 0.2f * z;
    CHECK(state[i] == x, "ou state %d", i);
    CHECK(act[i] == mean[i] + 0.5f * x, "ou action %d", i);
  }
  // damping 1 -> iid N(0, stddev^2), clipped
  double s = 0, ss = 0;
  const int big = 200000;
  std::vector<float> zm(big, 0.f), za(big), zs(big, 0.f), lo1 = {-10.f}, hi1 = {10.f};
  HARNESS_LAUNCH((big + 255) / 256, 1, 256,
                 wd_sample_ou(zm.data(), za.data(), zs.data(), lo1.data(), hi1.data(), big, 1, 1.0f, 2.0f, 1.0f, 5, 6, 7));
  for (float v : za) { s += v; ss += (double)v * v; }
  printf("ou (damping 1, stddev 2): mean %+.4f var %.4f\n", s / big, ss / big);
  CHECK(fabs(s / big) < 0.03 && fabs(ss / big - 4.0) < 0.08, "ou iid moments");
}

static void check_reset_and_log() {
  const int E = 6, W1 = 5, W2 = 3, P = 4;
  std::vector<float> a(E * W1, -1.f), a_src(E * W1);
  std::vector<int> b(E * W2, -1), pool_b(P * W2), pool_c(P * 1), c(E, -1);
  for (int i = 0; i < E * W1; ++i) a_src[i] = (float)i + 0.5f;
  for (int i = 0; i < P * W2; ++i) pool_b[i] = 1000 + i;
  for (int i = 0; i < P; ++i) pool_c[i] = i;  // paired with pool_b: row r of b must come with c == r
  std::vector<int> done = {0, 1, 0, 1, 1, 0}, timestep = {3, 4, 5, 6, 7, 8};
  unsigned long long table[12] = {addr(a.data()), addr(a_src.data()), W1, 0,  //
                                  addr(b.data()), addr(pool_b.data()), W2, P,  //
                                  addr(c.data()), addr(pool_c.data()), 1, P};
  HARNESS_LAUNCH(E, 1, 2, wd_reset_arrays(table, 3, done.data(), 0, 77, 1));
  for (int e = 0; e < E; ++e) {
    bool reset = done[e];
    for (int i = 0; i < W1; ++i) CHECK(a[e * W1 + i] == (reset ? a_src[e * W1 + i] : -1.f), "reset twin env %d", e);
    if (!reset) {
      CHECK(b[e * W2] == -1 && c[e] == -1, "not reset env %d", e);
      continue;
    }
    int r = c[e];
    unsigned k = (wd_random_bits(77, 1, e, 0x706f6f6cu).x >> 8) + 1;
    double u = k * 0x1p-24;
    int want = (int)fmin(floor(u * P), P - 1);
    CHECK(r == want, "pool row env %d: %d want %d", e, r, want);
    for (int i = 0; i < W2; ++i) CHECK(b[e * W2 + i] == pool_b[r * W2 + i], "pool copy env %d", e);
  }
  // block size and grid.y do not change the result; force resets every env
  std::vector<float> a2(E * W1, -1.f);
  std::vector<int> b2(E * W2, -1), c2(E, -1);
  unsigned long long table2[12] = {addr(a2.data()), addr(a_src.data()), W1, 0, addr(b2.data()), addr(pool_b.data()), W2, P,
                                   addr(c2.data()), addr(pool_c.data()), 1, P};
  HARNESS_LAUNCH(E, 2, 1, wd_reset_arrays(table2, 3, done.data(), 0, 77, 1));
  CHECK(a2 == a && b2 == b && c2 == c, "reset independent of launch shape");
  HARNESS_LAUNCH(E, 1, 64, wd_reset_arrays(table2, 3, done.data(), 1, 77, 1));
  for (int i = 0; i < E * W1; ++i) CHECK(a2[i] == a_src[i], "forced reset");
  // pool rows spread over the pool across envs / counters
  std::vector<long> hist(P, 0);
  std::vector<int> none(1, 0), one_c(1);
  for (int ctr = 0; ctr < 20000; ++ctr) {
    unsigned long long t[4] = {addr(one_c.data()), addr(pool_c.data()), 1, P};
    HARNESS_LAUNCH(1, 1, 1, wd_reset_arrays(t, 1, none.data(), 1, 5, (unsigned long long)ctr));
    hist[one_c[0]]++;
  }
  printf("pool rows over 20000 resets:");
  for (int r = 0; r < P; ++r) {
    printf(" %ld", hist[r]);
    CHECK(fabs(hist[r] / 20000.0 - 0.25) < 0.02, "pool row frequency");
  }
  printf("\n");

  HARNESS_LAUNCH(2, 1, 4, wd_clear_done_flags(done.data(), timestep.data(), E, 0));
  int want_t[E] = {3, 0, 5, 0, 0, 8};
  for (int e = 0; e < E; ++e) CHECK(done[e] == 0 && timestep[e] == want_t[e], "clear done env %d", e);
  HARNESS_LAUNCH(2, 1, 4, wd_clear_done_flags(done.data(), timestep.data(), E, 1));
  for (int e = 0; e < E; ++e) CHECK(timestep[e] == 0, "forced clear env %d", e);

  // log env 4 at steps 0..2
  const int T = 3;
  std::vector<float> log_a(T * W1, 0.f);
  std::vector<int> log_b(T * W2, 0);
  unsigned long long lt[6] = {addr(log_a.data()), addr(a_src.data()), W1, addr(log_b.data()), addr(b.data()), W2};
  for (int t = 0; t < T; ++t) HARNESS_LAUNCH(2, 1, 2, wd_log_step(lt, 2, 4, t));
  for (int t = 0; t < T; ++t) {
    for (int i = 0; i < W1; ++i) CHECK(log_a[t * W1 + i] == a_src[4 * W1 + i], "log a");
    for (int i = 0; i < W2; ++i) CHECK(log_b[t * W2 + i] == b[4 * W2 + i], "log b");
  }
  printf("reset / clear_done / log: checked\n");
}

static int g_index_ok = 1;
static void index_probe(int num_agents) {
  int want_agent = blockIdx.y * blockDim.x + threadIdx.x;
  g_index_ok &= wd_env_id() == (int)blockIdx.x && wd_num_envs() == (int)gridDim.x && wd_blocks_per_env() == (int)gridDim.y &&
                wd_agent_id() == want_agent && wd_agent_index(num_agents) == (int)blockIdx.x * num_agents + want_agent &&
                wd_global_thread_id() == (int)(blockIdx.x * blockDim.x + threadIdx.x);
  wd_sync_env();
}

static void check_indexing_and_sync() {
  HARNESS_LAUNCH(3, 1, 5, index_probe(5));
  CHECK(g_index_ok, "indexing with one block per env");
  // Several blocks per env must fail loudly off the GPU.
  pid_t pid = fork();
  if (pid == 0) {
    fclose(stderr);
    gridDim = {2, 2, 1};
    wd_sync_env();
    _exit(0);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  CHECK(WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT, "wd_sync_env with gridDim.y > 1 must abort");
  printf("indexing / wd_sync_env: checked\n");
}

int main() {
  check_philox();
  check_uniform_and_normal();
  check_categorical();
  check_ou();
  check_reset_and_log();
  check_indexing_and_sync();
  printf(g_failures ? "FAILED: %d checks\n" : "all checks passed\n", g_failures);
  return g_failures != 0;
}
