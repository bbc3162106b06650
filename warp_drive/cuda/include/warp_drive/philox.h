// Counter-based random numbers: Philox4x32-10 (Salmon et al., "Parallel random
// numbers: as easy as 1, 2, 3", SC'11; the Random123 algorithm).
//
// A draw is a pure function of (seed, counter, stream, domain):
//   key = {lo32(seed), hi32(seed)},  ctr = {lo32(counter), hi32(counter), stream, domain}.
// No generator state lives anywhere -- the original kept one curandState per
// (env, agent) on the 8 MB device heap, which capped the number of agents and
// made CPU and GPU runs incomparable. Here a caller names its draw:
//   stream  = which thread's sequence (flat env*agents + agent index, env id, ...)
//   counter = which call (the host bumps it once per sampling / reset call)
//   domain  = which purpose (a tag per kernel/head), so two kernels that use the
//             same (counter, stream) still draw independent numbers.
// Everything is integer arithmetic, so both executors produce the same bits;
// the float conversions below use only portable_math.h.
#ifndef WARP_DRIVE_PHILOX_H
#define WARP_DRIVE_PHILOX_H

#include <assert.h>

#include <warp_drive/portable_math.h>

#ifndef WD_HOST_DEVICE
#define WD_HOST_DEVICE __host__ __device__ __forceinline__
#endif

// High and low halves of a 32x32-bit product.
WD_HOST_DEVICE unsigned int wd_detail_mulhilo32(unsigned int a, unsigned int b, unsigned int* hi) {
#ifdef __CUDA_ARCH__
  *hi = __umulhi(a, b);  // one instruction on the device
  return a * b;
#else
  unsigned long long product = (unsigned long long)a * b;
  *hi = (unsigned int)(product >> 32);
  return (unsigned int)product;
#endif
}

// The Philox4x32 bijection with 10 rounds (the count Random123 recommends; it
// passes BigCrush with margin). Matches Random123's philox4x32_R(10, ...).
WD_HOST_DEVICE uint4 wd_philox4x32_10(uint4 ctr, uint2 key) {
  const unsigned int kMul0 = 0xD2511F53u, kMul1 = 0xCD9E8D57u;
  const unsigned int kWeyl0 = 0x9E3779B9u, kWeyl1 = 0xBB67AE85u;  // golden ratio, sqrt(3) - 1
#ifdef __CUDACC__
#pragma unroll
#endif
  for (int round = 0; round < 10; ++round) {
    if (round > 0) {
      key.x += kWeyl0;
      key.y += kWeyl1;
    }
    unsigned int hi0, hi1;
    unsigned int lo0 = wd_detail_mulhilo32(kMul0, ctr.x, &hi0);
    unsigned int lo1 = wd_detail_mulhilo32(kMul1, ctr.z, &hi1);
    ctr = make_uint4(hi1 ^ ctr.y ^ key.x, lo1, hi0 ^ ctr.w ^ key.y, lo0);
  }
  return ctr;
}

// 128 random bits for (seed, counter, stream, domain).
WD_HOST_DEVICE uint4 wd_random_bits(unsigned long long seed, unsigned long long counter, unsigned int stream,
                                    unsigned int domain) {
  return wd_philox4x32_10(make_uint4((unsigned int)counter, (unsigned int)(counter >> 32), stream, domain),
                          make_uint2((unsigned int)seed, (unsigned int)(seed >> 32)));
}

// Uniform float in (0, 1]: ((x >> 8) + 1) * 2^-24. Exact in float (24 bits),
// evenly spaced, and never 0, so log(u) is always finite and an inverse-CDF
// target u * total is never 0 for a positive total.
WD_HOST_DEVICE float wd_uint_to_uniform(unsigned int x) {
  return (float)((x >> 8) + 1u) * 5.9604644775390625e-08f;  // 2^-24; the product is exact
}

WD_HOST_DEVICE float wd_random_uniform(unsigned long long seed, unsigned long long counter, unsigned int stream,
                                       unsigned int domain) {
  return wd_uint_to_uniform(wd_random_bits(seed, counter, stream, domain).x);
}

// Two independent standard normals from two 32-bit words (Box-Muller). The
// angle 2*pi*u is evaluated as sincos(pi * 2u), whose reduction is exact.
// With 24-bit uniforms the radius is at most sqrt(2 * 24 ln 2) = 5.77, so the
// tails beyond 5.77 sigma (probability 8e-9) are cut off.
__host__ __device__ inline float2 wd_box_muller(unsigned int a, unsigned int b) {
  float u1 = wd_uint_to_uniform(a);
  float u2 = wd_uint_to_uniform(b);
  float radius = wd_sqrtf(wd_fmul_rn(-2.0f, wd_logf(u1)));
  float s, c;
  wd_sincospif(wd_fmul_rn(2.0f, u2), &s, &c);
  return make_float2(wd_fmul_rn(radius, c), wd_fmul_rn(radius, s));
}

__host__ __device__ inline float2 wd_random_normal2(unsigned long long seed, unsigned long long counter,
                                                    unsigned int stream, unsigned int domain) {
  uint4 bits = wd_random_bits(seed, counter, stream, domain);
  return wd_box_muller(bits.x, bits.y);
}

// Draws of an env's reset kernel (Environment.reset_kernel): draw k of the start of env `env` at the reset
// call `reset_count` under `reset_seed` -- the kernel's reserved parameters of those names. A pure function
// of (reset_seed, reset_count, env, k): every thread of an env may recompute a draw it shares with the others
// (no barrier, no state), a (reset_count, env) pair names one start (each env is reset at most once per call),
// so starts never repeat by construction, and both executors and the NumPy twin (warp_drive/runtime/philox.py) give
// the same bits. The domain's top byte 'R' keeps them apart from the sampler's domains (small integers) and
// the pool row's ("pool"); its low 24 bits count blocks of four draws, so k < 2^26 per env and call.
#define WD_RESET_KERNEL_DOMAIN 0x52000000u

WD_HOST_DEVICE unsigned int wd_reset_bits(unsigned long long reset_seed, unsigned long long reset_count, int env,
                                          unsigned int k) {
  assert(k < (1u << 26) && "wd_reset_bits: at most 2^26 draws per env and reset");
  uint4 bits = wd_random_bits(reset_seed, reset_count, (unsigned int)env, WD_RESET_KERNEL_DOMAIN | (k >> 2));
  const unsigned int lane = k & 3u;
  return lane == 0 ? bits.x : lane == 1 ? bits.y : lane == 2 ? bits.z : bits.w;
}

// Uniform in (0, 1] (wd_uint_to_uniform of draw k).
WD_HOST_DEVICE float wd_reset_uniform(unsigned long long reset_seed, unsigned long long reset_count, int env,
                                      unsigned int k) {
  return wd_uint_to_uniform(wd_reset_bits(reset_seed, reset_count, env, k));
}

// low + (high - low) * u, each operation rounded to nearest (no contraction into an FMA), so the GPU, the cpu
// executor and float32 NumPy agree bit for bit. In [low, high] (u is in (0, 1]).
WD_HOST_DEVICE float wd_reset_uniform_in(unsigned long long reset_seed, unsigned long long reset_count, int env,
                                         unsigned int k, float low, float high) {
  const float u = wd_reset_uniform(reset_seed, reset_count, env, k);
  return wd_fadd_rn(low, wd_fmul_rn(wd_fsub_rn(high, low), u));
}

// An integer in [0, n) for n >= 1: floor(bits * n / 2^32), exact in 64-bit integers (bias below n / 2^32).
WD_HOST_DEVICE int wd_reset_int(unsigned long long reset_seed, unsigned long long reset_count, int env,
                                unsigned int k, int n) {
  return (int)(((unsigned long long)wd_reset_bits(reset_seed, reset_count, env, k) * (unsigned int)n) >> 32);
}

#endif  // WARP_DRIVE_PHILOX_H
