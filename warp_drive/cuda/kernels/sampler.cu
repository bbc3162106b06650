// Action samplers, plus small self-test kernels that let the test suite check,
// through the real executors, that the RNG and the portable math give the
// same bits on the CPU and the GPU.
//
// All kernels are flat 1-D launches (index = blockIdx.x * blockDim.x +
// threadIdx.x), barrier-free and bounds-checked, so any block size works and
// the cpu executor runs them on its fast no-fiber path. Randomness is
// stateless (philox.h): the host passes (seed, counter, domain) and bumps the
// counter per call; the stream is the row / element index.
#include <warp_drive/core.h>

// Categorical sampling, one thread per (env, agent) row.
//
// Inverse CDF against the row's running sum, kept in registers: the original
// wrote the cumulative distribution to a global array on every call and
// binary-searched it. Only positive probabilities count (zeros, negatives and
// NaN are skipped), so a zero-probability action is never chosen even when the
// uniform lands exactly on a CDF step. Both passes add the same terms in the
// same order, so the running sum at the last positive entry equals the total
// exactly and target = u * total <= total is always reached; the fallback to
// the last positive entry only guards against the unforeseen. A row with no
// positive entry takes the argmax rule (action 0 if everything is NaN).
extern "C" __global__ void wd_sample_categorical(const float* __restrict__ probabilities, int* __restrict__ actions,
                                                 int n_rows, int n_actions, int n_heads, int head, int argmax,
                                                 unsigned long long seed, unsigned long long counter,
                                                 unsigned int domain) {
  long long row = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (row >= n_rows || n_actions <= 0) return;
  const float* p = probabilities + row * n_actions;
  int* out = actions + row * n_heads + head;

  float total = 0.0f;
  int first_max = 0;
  float best = 0.0f;
  bool have_best = false;
  for (int i = 0; i < n_actions; ++i) {
    float prob = p[i];
    if (prob > 0.0f) total = wd_fadd_rn(total, prob);
    if (prob == prob && (!have_best || prob > best)) {  // first maximum, NaN never wins
      best = prob;
      first_max = i;
      have_best = true;
    }
  }
  if (argmax || !(total > 0.0f)) {
    *out = first_max;
    return;
  }

  float u = wd_random_uniform(seed, counter, (unsigned int)row, domain);
  float target = wd_fmul_rn(u, total);
  float running = 0.0f;
  int chosen = -1, last_positive = 0;
  for (int i = 0; i < n_actions; ++i) {
    float prob = p[i];
    if (!(prob > 0.0f)) continue;
    running = wd_fadd_rn(running, prob);
    last_positive = i;
    if (running >= target) {
      chosen = i;
      break;
    }
  }
  *out = chosen >= 0 ? chosen : last_positive;
}

// Continuous actions with Ornstein-Uhlenbeck exploration noise (iid Gaussian
// when damping == 1), one thread per action element idx = row * dim + d:
//   x <- (1 - damping) * x + stddev * N(0, 1);  action = clamp(mean + scale * x, low[d], high[d]).
// scale == 0 is deterministic evaluation: action = clamp(mean), state untouched.
// low / high may be null for an unbounded side. Clamping uses comparisons, so a
// NaN mean stays visible instead of being silently clipped.
extern "C" __global__ void wd_sample_ou(const float* __restrict__ mean, float* __restrict__ actions,
                                        float* __restrict__ ou_state, const float* __restrict__ low,
                                        const float* __restrict__ high, int n_rows, int dim, float damping,
                                        float stddev, float scale, unsigned long long seed,
                                        unsigned long long counter, unsigned int domain) {
  long long idx = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (dim <= 0 || idx >= (long long)n_rows * dim) return;
  int d = (int)(idx % dim);
  float a = mean[idx];
  if (scale != 0.0f) {
    float noise = wd_random_normal2(seed, counter, (unsigned int)idx, domain).x;
    float x = wd_fadd_rn(wd_fmul_rn(wd_fsub_rn(1.0f, damping), ou_state[idx]), wd_fmul_rn(stddev, noise));
    ou_state[idx] = x;
    a = wd_fadd_rn(a, wd_fmul_rn(scale, x));
  }
  if (low && a < low[d]) a = low[d];
  if (high && a > high[d]) a = high[d];
  actions[idx] = a;
}

// ---------------------------------------------------------------- self tests
// Philox4x32-10 on given (ctr, key) rows: ctr_key is n x 6 words
// {ctr.x, ctr.y, ctr.z, ctr.w, key.x, key.y}, out is n x 4 words. The test
// suite feeds Random123's known-answer vectors through each executor.
extern "C" __global__ void wd_philox_kat(const unsigned int* __restrict__ ctr_key, unsigned int* __restrict__ out,
                                         int n) {
  long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const unsigned int* in = ctr_key + 6 * i;
  uint4 r = wd_philox4x32_10(make_uint4(in[0], in[1], in[2], in[3]), make_uint2(in[4], in[5]));
  out[4 * i + 0] = r.x;
  out[4 * i + 1] = r.y;
  out[4 * i + 2] = r.z;
  out[4 * i + 3] = r.w;
}

// The portable math on n inputs; out is n x 6:
// {logf, expf, sinf, cosf, sin(pi x), cos(pi x)}. Comparing its output between
// the executors checks bit-identity of the math the samplers and envs rely on.
extern "C" __global__ void wd_math_probe(const float* __restrict__ x, float* __restrict__ out, int n) {
  long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  float v = x[i], s, c, sp, cp;
  wd_sincosf(v, &s, &c);
  wd_sincospif(v, &sp, &cp);
  float* o = out + 6 * i;
  o[0] = wd_logf(v);
  o[1] = wd_expf(v);
  o[2] = s;
  o[3] = c;
  o[4] = sp;
  o[5] = cp;
}

// Draws for streams 0..n-1; out is n x 3: {uniform, normal.x, normal.y}.
extern "C" __global__ void wd_rng_probe(float* __restrict__ out, int n, unsigned long long seed,
                                        unsigned long long counter, unsigned int domain) {
  long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  float2 z = wd_random_normal2(seed, counter, (unsigned int)i, domain);
  out[3 * i + 0] = wd_random_uniform(seed, counter, (unsigned int)i, domain);
  out[3 * i + 1] = z.x;
  out[3 * i + 2] = z.y;
}
