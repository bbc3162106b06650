// Elementary functions that give the SAME BITS on the GPU (nvcc) and on the
// host (g++), so the cpu executor reproduces a GPU run exactly.
//
// Why not logf/expf/sinf? CUDA's and glibc's versions are different
// implementations (and CUDA's depend on FMA contraction and fast-math flags),
// so they disagree in the last bits, and a single different bit in a sampled
// normal or an env's trigonometry sends the two executors apart for good.
// Everything below is built from IEEE-754 single-precision +, -, *, / and sqrt
// in round-to-nearest, integer arithmetic and bit casts -- operations that are
// correctly rounded, hence identical, on both sides. On the device they go
// through the __f*_rn intrinsics, which nvcc never contracts into FMAs nor
// relaxes under --use_fast_math (fast math does flush subnormals, which changes
// results for subnormal inputs and outputs only; so does a host process whose
// MXCSR has FTZ/DAZ set by some -ffast-math library). On the host, the build
// must not contract either (g++ -ffp-contract=off, which the cpu executor
// passes) and x86-64 evaluates float in SSE without excess precision.
//
// Accuracy, measured exhaustively (every float of each domain) against
// double-precision libm by a host harness when these were written (it was
// retired in commit f7b4f13; tests/runtime/test_philox_math.py keeps checking <= 1 ulp
// on thousands of samples of each domain), as the max error in units in the
// last place of the correctly rounded float result:
//   wd_logf       every positive float, subnormals included     0.84 ulp
//   wd_expf       [-87, 88.72] (normal results)                 0.63 ulp
//   wd_sincosf    every finite float (Cody-Waite below |x| 800,
//                 exact Payne-Hanek reduction above)            0.82 ulp
//   wd_sincospif  sin(pi x), cos(pi x), every finite float       0.79 ulp
// Special values follow C: logf(0) = -inf, logf(<0) = NaN, expf overflows to
// +inf and underflows to 0, sin/cos of +-inf are NaN, NaN propagates.
#ifndef WARP_DRIVE_PORTABLE_MATH_H
#define WARP_DRIVE_PORTABLE_MATH_H

#include <math.h>    // sqrtf on the host
#include <string.h>  // memcpy: the host-side bit casts

#ifndef WD_HOST_DEVICE
#define WD_HOST_DEVICE __host__ __device__ __forceinline__
#endif

// ------------------------------------------------------------ bit casts
// Own names rather than __float_as_uint: the CUDA intrinsic is device-only, and
// these helpers are __host__ __device__.
WD_HOST_DEVICE unsigned int wd_float_as_uint(float x) {
#ifdef __CUDA_ARCH__
  return __float_as_uint(x);
#else
  unsigned int u;
  memcpy(&u, &x, sizeof u);
  return u;
#endif
}

WD_HOST_DEVICE float wd_uint_as_float(unsigned int u) {
#ifdef __CUDA_ARCH__
  return __uint_as_float(u);
#else
  float x;
  memcpy(&x, &u, sizeof x);
  return x;
#endif
}

// ------------------------------------------------------------ correctly rounded arithmetic
// Env kernels may use these too wherever they need bit-identical results that
// must survive any nvcc flags.
WD_HOST_DEVICE float wd_fadd_rn(float a, float b) {
#ifdef __CUDA_ARCH__
  return __fadd_rn(a, b);
#else
  return a + b;
#endif
}

WD_HOST_DEVICE float wd_fsub_rn(float a, float b) {
#ifdef __CUDA_ARCH__
  return __fsub_rn(a, b);
#else
  return a - b;
#endif
}

WD_HOST_DEVICE float wd_fmul_rn(float a, float b) {
#ifdef __CUDA_ARCH__
  return __fmul_rn(a, b);
#else
  return a * b;
#endif
}

WD_HOST_DEVICE float wd_fdiv_rn(float a, float b) {
#ifdef __CUDA_ARCH__
  return __fdiv_rn(a, b);
#else
  return a / b;
#endif
}

// IEEE square root is correctly rounded on both sides, so it is portable as is.
WD_HOST_DEVICE float wd_sqrtf(float x) {
#ifdef __CUDA_ARCH__
  return __fsqrt_rn(x);
#else
  return sqrtf(x);
#endif
}

// a*b + c with two roundings, never fused (an FMA would round once and differ).
WD_HOST_DEVICE float wd_detail_mad(float a, float b, float c) { return wd_fadd_rn(wd_fmul_rn(a, b), c); }

// ------------------------------------------------------------ error-free transformations
// Classic double-float building blocks (Knuth, Dekker). They hold only when
// every operation is rounded separately -- one more reason for the _rn helpers.

// s + e == a + b exactly, for any a, b (no overflow).
WD_HOST_DEVICE void wd_detail_two_sum(float a, float b, float* s, float* e) {
  float sum = wd_fadd_rn(a, b);
  float bb = wd_fsub_rn(sum, a);
  *e = wd_fadd_rn(wd_fsub_rn(a, wd_fsub_rn(sum, bb)), wd_fsub_rn(b, bb));
  *s = sum;
}

// Same, cheaper, when |a| >= |b| (or a == 0).
WD_HOST_DEVICE void wd_detail_fast_two_sum(float a, float b, float* s, float* e) {
  float sum = wd_fadd_rn(a, b);
  *e = wd_fsub_rn(b, wd_fsub_rn(sum, a));
  *s = sum;
}

// p + e == a * b exactly (no FMA available by design). Veltkamp's split cuts a
// float into two 12-bit halves whose products are exact.
WD_HOST_DEVICE void wd_detail_split(float a, float* hi, float* lo) {
  float c = wd_fmul_rn(4097.0f, a);  // 2^12 + 1
  float h = wd_fsub_rn(c, wd_fsub_rn(c, a));
  *hi = h;
  *lo = wd_fsub_rn(a, h);
}

WD_HOST_DEVICE void wd_detail_two_prod(float a, float b, float* p, float* e) {
  float prod = wd_fmul_rn(a, b);
  float ah, al, bh, bl;
  wd_detail_split(a, &ah, &al);
  wd_detail_split(b, &bh, &bl);
  float err = wd_fsub_rn(wd_fmul_rn(ah, bh), prod);
  err = wd_fadd_rn(err, wd_fmul_rn(ah, bl));
  err = wd_fadd_rn(err, wd_fmul_rn(al, bh));
  *e = wd_fadd_rn(err, wd_fmul_rn(al, bl));
  *p = prod;
}

// float <-> int conversions: truncation toward zero and round-to-nearest
// int-to-float are the C defaults on both sides.
WD_HOST_DEVICE int wd_detail_round_to_int(float t) {
  return (int)wd_fadd_rn(t, t < 0.0f ? -0.5f : 0.5f);
}

// ------------------------------------------------------------ logarithm
// x = 2^k * m with m in [sqrt(2)/2, sqrt(2)), f = m - 1 (exact). With
// s = f / (2 + f), log(1 + f) = 2 atanh(s) = f - s*f + s*R(s^2), rewritten as
// f - hfsq + s*(hfsq + R) (hfsq = f^2/2) so the rounding of s only touches the
// small last term. R's Taylor series is truncated where its remainder is below
// 1e-9 relative (|s| <= 0.172). k*ln2 uses a 16-bit head so k*head is exact for
// every exponent, including subnormals.
WD_HOST_DEVICE float wd_logf(float x) {
  const float kLn2Hi = 6.93145751953125e-01f;   // 0x3f317200, 16 significant bits
  const float kLn2Lo = 1.428606765330187e-06f;  // 0x35bfbe8e, ln2 - kLn2Hi
  unsigned int ix = wd_float_as_uint(x);
  if (ix >= 0x7f800000u) {  // +inf, NaN, or sign bit set
    if (ix == 0x7f800000u) return x;
    if (ix == 0x80000000u) return wd_uint_as_float(0xff800000u);  // log(-0) = -inf
    return wd_uint_as_float(0x7fc00000u);                           // negative or NaN
  }
  if (ix == 0u) return wd_uint_as_float(0xff800000u);
  int k = 0;
  if (ix < 0x00800000u) {  // subnormal: scale into the normal range, exactly
    ix = wd_float_as_uint(wd_fmul_rn(x, 33554432.0f));  // 2^25
    k = -25;
  }
  k += (int)(ix >> 23) - 127;
  unsigned int mantissa = ix & 0x007fffffu;
  if (mantissa >= 0x3504f3u) {  // 1.mantissa >= sqrt(2): use m/2 in [0.707, 1)
    mantissa |= 0x3f000000u;
    k += 1;
  } else {
    mantissa |= 0x3f800000u;
  }
  float f = wd_fsub_rn(wd_uint_as_float(mantissa), 1.0f);
  float s = wd_fdiv_rn(f, wd_fadd_rn(2.0f, f));
  float z = wd_fmul_rn(s, s);
  float r = wd_detail_mad(z, 1.8181818181818182e-01f, 2.2222222222222222e-01f);  // 2/11, 2/9
  r = wd_detail_mad(z, r, 2.8571428571428571e-01f);                                // 2/7
  r = wd_detail_mad(z, r, 4.0000000000000000e-01f);                                // 2/5
  r = wd_detail_mad(z, r, 6.6666666666666667e-01f);                                // 2/3
  r = wd_fmul_rn(z, r);
  float hfsq = wd_fmul_rn(0.5f, wd_fmul_rn(f, f));
  float small = wd_fmul_rn(s, wd_fadd_rn(hfsq, r));
  if (k == 0) return wd_fsub_rn(f, wd_fsub_rn(hfsq, small));
  float fk = (float)k;
  float tail = wd_fsub_rn(wd_fsub_rn(hfsq, wd_fadd_rn(small, wd_fmul_rn(fk, kLn2Lo))), f);
  return wd_fsub_rn(wd_fmul_rn(fk, kLn2Hi), tail);
}

// ------------------------------------------------------------ exponential
// exp(x) = 2^n * exp(r), r = x - n*ln2 in about [-ln2/2, ln2/2], kept as an
// unevaluated sum rh + rl so the reduction adds no rounding error. Then
// exp(r) = 1 + rh + [rl + rl*rh + E(rh)], E(r) = exp(r) - 1 - r (Taylor to r^8,
// remainder < 3e-10), and 1 + rh is itself split exactly so that the only
// large rounding is the final one.
WD_HOST_DEVICE float wd_expf(float x) {
  const float kLn2Hi = 6.93145751953125e-01f;   // 16 bits: n*kLn2Hi exact for |n| <= 256
  const float kLn2Lo = 1.428606765330187e-06f;
  const float kInvLn2 = 1.4426950216293335f;
  if (x != x) return x;
  if (x > 89.0f) return wd_uint_as_float(0x7f800000u);
  if (x < -104.0f) return 0.0f;
  int n = wd_detail_round_to_int(wd_fmul_rn(x, kInvLn2));
  float fn = (float)n;
  float rh, rl, e;
  wd_detail_two_sum(x, -wd_fmul_rn(fn, kLn2Hi), &rh, &rl);
  wd_detail_two_sum(rh, -wd_fmul_rn(fn, kLn2Lo), &rh, &e);
  rl = wd_fadd_rn(rl, e);
  float p = wd_detail_mad(rh, 2.4801587301587302e-05f, 1.9841269841269841e-04f);  // 1/40320, 1/5040
  p = wd_detail_mad(rh, p, 1.3888888888888889e-03f);                                // 1/720
  p = wd_detail_mad(rh, p, 8.3333333333333333e-03f);                                // 1/120
  p = wd_detail_mad(rh, p, 4.1666666666666667e-02f);                                // 1/24
  p = wd_detail_mad(rh, p, 1.6666666666666667e-01f);                                // 1/6
  p = wd_detail_mad(rh, p, 0.5f);
  p = wd_fmul_rn(wd_fmul_rn(rh, rh), p);  // E(rh)
  float tail = wd_fadd_rn(wd_fadd_rn(rl, wd_fmul_rn(rl, rh)), p);
  float hi, lo;
  wd_detail_fast_two_sum(1.0f, rh, &hi, &lo);
  float y = wd_fadd_rn(hi, wd_fadd_rn(lo, tail));
  // Scale by 2^n through exact powers of two; the two-step forms keep 2^n
  // itself representable at both ends of the range.
  if (n > 127) {  // y * 2^127 * 2^(n-127); overflows to +inf where it must
    return wd_fmul_rn(wd_fmul_rn(y, wd_uint_as_float(0x7f000000u)), wd_uint_as_float((unsigned int)n << 23));
  }
  if (n < -126) {  // subnormal result: y * 2^(n+64) * 2^-64
    return wd_fmul_rn(wd_fmul_rn(y, wd_uint_as_float((unsigned int)(n + 64 + 127) << 23)), 5.421010862427522e-20f);
  }
  return wd_fmul_rn(y, wd_uint_as_float((unsigned int)(n + 127) << 23));
}

// ------------------------------------------------------------ sine and cosine
// Kernel on |r| <= ~pi/4 + tiny, r = rh + rl (rl below half an ulp of rh).
// Taylor series: the remainders are < 3e-9 (sin) and < 2e-10 (cos) relative.
// cos uses 1 - r^2/2 with r^2 split exactly and the rounding of 1 - r^2/2
// recovered, since that subtraction would otherwise cost a quarter ulp.
WD_HOST_DEVICE void wd_detail_sincos_kernel(float rh, float rl, int quadrant, float* sin_out, float* cos_out) {
  float z = wd_fmul_rn(rh, rh);
  // sin(r) = r + r^3 * S(r^2) + rl * cos(r)
  float ps = wd_detail_mad(z, -2.5052108385441720e-08f, 2.7557319223985891e-06f);  // -1/11!, 1/9!
  ps = wd_detail_mad(z, ps, -1.9841269841269841e-04f);                                // -1/7!
  ps = wd_detail_mad(z, ps, 8.3333333333333333e-03f);                                 // 1/5!
  ps = wd_detail_mad(z, ps, -1.6666666666666667e-01f);                                // -1/3!
  float v = wd_fmul_rn(z, rh);
  float sin_tail = wd_fadd_rn(wd_fmul_rn(v, ps), wd_fmul_rn(rl, wd_fsub_rn(1.0f, wd_fmul_rn(0.5f, z))));
  float s = wd_fadd_rn(rh, sin_tail);
  // cos(r) = 1 - r^2/2 + r^4 * C(r^2), r^2/2 = (zh + zl)/2 + rh*rl
  float zh, zl;
  wd_detail_two_prod(rh, rh, &zh, &zl);
  float hz = wd_fmul_rn(0.5f, zh);
  float w = wd_fsub_rn(1.0f, hz);
  float corr = wd_fsub_rn(wd_fsub_rn(1.0f, w), hz);  // both steps exact (Sterbenz)
  float pc = wd_detail_mad(z, -2.7557319223985891e-07f, 2.4801587301587302e-05f);  // -1/10!, 1/8!
  pc = wd_detail_mad(z, pc, -1.3888888888888889e-03f);                               // -1/6!
  pc = wd_detail_mad(z, pc, 4.1666666666666667e-02f);                                // 1/4!
  pc = wd_fmul_rn(wd_fmul_rn(z, z), pc);
  float cos_tail = wd_fadd_rn(corr, wd_fsub_rn(pc, wd_fadd_rn(wd_fmul_rn(0.5f, zl), wd_fmul_rn(rh, rl))));
  float c = wd_fadd_rn(w, cos_tail);
  // Quadrant q: (sin, cos) = (s, c), (c, -s), (-s, -c), (-c, s). Selected and
  // negated on the bits, without branches: the quadrant of an agent's heading
  // is random, and a branch on it mispredicts most of the time.
  const unsigned int q = (unsigned int)quadrant & 3u;
  const unsigned int odd = 0u - (q & 1u);  // all ones in quadrants 1 and 3
  const unsigned int sb = wd_float_as_uint(s), cb = wd_float_as_uint(c);
  *sin_out = wd_uint_as_float(((cb & odd) | (sb & ~odd)) ^ ((q & 2u) << 30));
  *cos_out = wd_uint_as_float(((sb & odd) | (cb & ~odd)) ^ (((q + 1u) & 2u) << 30));
}

// Bits of 2/pi after the binary point, 32 per word, most significant first.
// A switch, not an array: a table would need a memory space that differs
// between nvcc (__constant__/local) and the host; this compiles everywhere.
WD_HOST_DEVICE unsigned int wd_detail_two_over_pi_word(int i) {
  switch (i) {
    case 0: return 0xa2f9836eu;
    case 1: return 0x4e441529u;
    case 2: return 0xfc2757d1u;
    case 3: return 0xf534ddc0u;
    case 4: return 0xdb629599u;
    case 5: return 0x3c439041u;
    case 6: return 0xfe5163abu;
    case 7: return 0xdebbc561u;
    case 8: return 0xb7246e3au;
    default: return 0x424dd2e0u;
  }
}

// Payne-Hanek: reduce a large finite |x| (>= 2^-7, used from 800 up) exactly
// in integers. |x| = m * 2^E; the bits of 2/pi whose products with m are
// multiples of 4 cannot change the quadrant and are skipped, so a 96-bit window
// of 2/pi starting at bit E-1 suffices for any float. The product's 64 bits
// below the quadrant bits give r/(pi/2) to 2^-62, far below the closest any
// float comes to a multiple of pi/2.
__host__ __device__ inline void wd_detail_reduce_large(float ax, int* quadrant, float* rh, float* rl) {
  const float kPio2Hi = 1.5707963705062866f;     // 0x3fc90fdb
  const float kPio2Lo = -4.371138828673793e-08f;  // pi/2 - kPio2Hi
  unsigned int ix = wd_float_as_uint(ax);
  int exponent = (int)(ix >> 23) - 150;  // ax = m * 2^exponent
  unsigned int m = (ix & 0x007fffffu) | 0x00800000u;
  int first_bit = exponent - 1 > 1 ? exponent - 1 : 1;  // 1-based index into 2/pi
  int extra = first_bit - exponent + 1;                 // >= 0, < 32 for ax >= 2^-7
  int word = (first_bit - 1) >> 5, shift = (first_bit - 1) & 31;
  unsigned int t0 = wd_detail_two_over_pi_word(word), t1 = wd_detail_two_over_pi_word(word + 1);
  unsigned int t2 = wd_detail_two_over_pi_word(word + 2), t3 = wd_detail_two_over_pi_word(word + 3);
  unsigned int w0 = t0, w1 = t1, w2 = t2;
  if (shift) {
    w0 = (t0 << shift) | (t1 >> (32 - shift));
    w1 = (t1 << shift) | (t2 >> (32 - shift));
    w2 = (t2 << shift) | (t3 >> (32 - shift));
  }
  // 24 x 96 -> 120-bit product; bit j weighs 2^(j - 94 - extra) quadrants.
  unsigned long long acc = (unsigned long long)m * w2;
  unsigned long long lo64 = acc & 0xffffffffull;
  acc = (acc >> 32) + (unsigned long long)m * w1;
  lo64 |= acc << 32;
  acc = (acc >> 32) + (unsigned long long)m * w0;
  unsigned long long hi64 = acc;
  // 2 quadrant bits + 62 fraction bits: product bits [32 + extra, 95 + extra].
  unsigned long long chunk = (hi64 << (32 - extra)) | (lo64 >> (32 + extra));
  // Round to the nearest quadrant; wrap-around mod 2^64 is the mod-4 we want.
  unsigned long long rounded = chunk + (1ull << 61);
  *quadrant = (int)(rounded >> 62);
  long long frac = (long long)(chunk - ((rounded >> 62) << 62));  // in [-2^61, 2^61)
  float fh = (float)frac;
  float fl = (float)(frac - (long long)fh);
  const float kTwoM62 = 2.168404344971009e-19f;  // 2^-62
  fh = wd_fmul_rn(fh, kTwoM62);
  fl = wd_fmul_rn(fl, kTwoM62);
  float p, e;
  wd_detail_two_prod(fh, kPio2Hi, &p, &e);
  e = wd_fadd_rn(e, wd_fadd_rn(wd_fmul_rn(fh, kPio2Lo), wd_fmul_rn(fl, kPio2Hi)));
  wd_detail_fast_two_sum(p, e, rh, rl);
}

// sin(x) and cos(x) together (they share the reduction).
__host__ __device__ inline void wd_sincosf(float x, float* sin_out, float* cos_out) {
  // pi/2 in three 15-bit heads (n * head exact for |n| <= 2^9) and a tail.
  const float kPio2_1 = 1.57073974609375f;          // 0x3fc90e00
  const float kPio2_2 = 5.657970905303955e-05f;     // 0x386d5000
  const float kPio2_3 = 9.920881893776823e-10f;     // 0x30885a00
  const float kPio2_4 = 5.390302953474238e-15f;     // 0x27c234c5
  const float kTwoOverPi = 0.6366197466850281f;
  float ax = x < 0.0f ? -x : x;
  if (!(ax <= 3.4028234663852886e+38f)) {  // inf or NaN
    float nan = wd_uint_as_float(0x7fc00000u);
    *sin_out = nan;
    *cos_out = nan;
    return;
  }
  float rh, rl;
  int quadrant;
  if (ax < 2.44140625e-04f) {  // 2^-12: sin x = x and cos x = 1 once rounded (keeps -0)
    *sin_out = x;
    *cos_out = 1.0f;
    return;
  }
  if (ax <= 0.785398185253143310546875f) {  // float(pi/4): no reduction
    rh = x;
    rl = 0.0f;
    quadrant = 0;
  } else if (ax < 800.0f) {
    // Cody-Waite: x - n*pi/2 with every product exact and the differences
    // accumulated error-free, so even x next to a multiple of pi/2 keeps its
    // full relative accuracy.
    quadrant = wd_detail_round_to_int(wd_fmul_rn(x, kTwoOverPi));
    float fn = (float)quadrant, e;
    wd_detail_two_sum(x, -wd_fmul_rn(fn, kPio2_1), &rh, &rl);
    wd_detail_two_sum(rh, -wd_fmul_rn(fn, kPio2_2), &rh, &e);
    rl = wd_fadd_rn(rl, e);
    wd_detail_two_sum(rh, -wd_fmul_rn(fn, kPio2_3), &rh, &e);
    rl = wd_fadd_rn(rl, e);
    wd_detail_two_sum(rh, -wd_fmul_rn(fn, kPio2_4), &rh, &e);
    rl = wd_fadd_rn(rl, e);
    wd_detail_fast_two_sum(rh, rl, &rh, &rl);
  } else {
    wd_detail_reduce_large(ax, &quadrant, &rh, &rl);
    if (x < 0.0f) {  // sin is odd: reduce |x| and mirror
      quadrant = -quadrant;
      rh = -rh;
      rl = -rl;
    }
  }
  wd_detail_sincos_kernel(rh, rl, quadrant, sin_out, cos_out);
}

__host__ __device__ inline float wd_sinf(float x) {
  float s, c;
  wd_sincosf(x, &s, &c);
  return s;
}

__host__ __device__ inline float wd_cosf(float x) {
  float s, c;
  wd_sincosf(x, &s, &c);
  return c;
}

// sin(pi*x) and cos(pi*x). The reduction is exact (it works in half turns), so
// angles given as fractions of a turn -- like Box-Muller's 2*pi*u -- need no
// pi/2 reduction at all.
__host__ __device__ inline void wd_sincospif(float x, float* sin_out, float* cos_out) {
  const float kPio2Hi = 1.5707963705062866f;
  const float kPio2Lo = -4.371138828673793e-08f;
  float ax = x < 0.0f ? -x : x;
  if (!(ax <= 3.4028234663852886e+38f)) {
    float nan = wd_uint_as_float(0x7fc00000u);
    *sin_out = nan;
    *cos_out = nan;
    return;
  }
  if (ax < 6.103515625e-05f) {  // 2^-14: pi*x < 2^-12, so sin(pi x) = pi*x, cos = 1 once rounded
    // pi*x as a double-float product, on x scaled by 2^64 so that Dekker's
    // split stays exact for subnormal x too; scaling back rounds once (twice
    // where the result is itself subnormal).
    float xs = wd_fmul_rn(x, 1.8446744073709552e+19f), p, e;  // 2^64
    wd_detail_two_prod(xs, wd_fmul_rn(2.0f, kPio2Hi), &p, &e);
    e = wd_fadd_rn(e, wd_fmul_rn(xs, wd_fmul_rn(2.0f, kPio2Lo)));
    *sin_out = wd_fmul_rn(wd_fadd_rn(p, e), 5.421010862427522e-20f);  // 2^-64
    *cos_out = 1.0f;
    return;
  }
  // Quadrants of pi*x are units of t = 2x.
  int quadrant;
  float f;
  if (ax < 4194304.0f) {  // 2^22: t < 2^23 still has a fractional part to keep
    float t = wd_fmul_rn(2.0f, x);
    quadrant = wd_detail_round_to_int(t);
    f = wd_fsub_rn(t, (float)quadrant);  // exact
  } else {
    // t is an integer; beyond 2^25 a multiple of 4 (quadrant 0).
    quadrant = ax < 16777216.0f ? (int)wd_fmul_rn(2.0f, x) : 0;
    f = 0.0f;
  }
  float rh, rl;
  wd_detail_two_prod(f, kPio2Hi, &rh, &rl);
  rl = wd_fadd_rn(rl, wd_fmul_rn(f, kPio2Lo));
  wd_detail_fast_two_sum(rh, rl, &rh, &rl);
  wd_detail_sincos_kernel(rh, rl, quadrant, sin_out, cos_out);
}

#endif  // WARP_DRIVE_PORTABLE_MATH_H
