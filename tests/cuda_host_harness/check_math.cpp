// Accuracy of warp_drive/portable_math.h against double-precision libm.
//   g++ -std=c++17 -O2 -ffp-contract=off -pthread -I ../../warp_drive/cuda/include check_math.cpp -o /tmp/check_math
//   /tmp/check_math [stride]      (stride 1 = every float of each domain)
// Prints the max error in ulps of the correctly rounded float result per
// function and domain, and the worst input.
#include "shim.h"
#include <warp_drive/portable_math.h>

#include <cstdint>
#include <cstdlib>
#include <thread>
#include <vector>

static double ulp_of(double t) {
  double a = fabs(t);
  if (a < 0x1p-126) return 0x1p-149;
  int e;
  frexp(a, &e);          // a = f * 2^e, f in [0.5, 1)
  return ldexp(1.0, e - 24);
}

static double ulp_err(float y, double t) {
  if (isnan(t)) return isnan(y) ? 0.0 : INFINITY;
  if (isinf(t) || fabs(t) > 0x1.fffffep127) return (double)y == (double)(float)t ? 0.0 : INFINITY;
  if (isnan(y) || isinf(y)) return INFINITY;
  return fabs((double)y - t) / ulp_of(t);
}

// sin(pi x), cos(pi x) for float x with an exact reduction in double: t = 2x
// and its distance to the nearest integer are exact, and exact zeros stay zero.
static void ref_sincospi(float xf, double* s, double* c) {
  double t = 2.0 * (double)xf;
  double n = nearbyint(t);
  double r = (t - n) * (M_PI / 2);
  double sr = sin(r), cr = cos(r);
  int q = (int)fmod(n, 4.0);
  if (q < 0) q += 4;
  switch (q) {
    case 0: *s = sr; *c = cr; break;
    case 1: *s = cr; *c = -sr; break;
    case 2: *s = -sr; *c = -cr; break;
    default: *s = -cr; *c = sr; break;
  }
}

struct Worst {
  double err = 0;
  float x = 0;
  void add(double e, float v) {
    if (e > err) { err = e; x = v; }
  }
  void merge(const Worst& o) { add(o.err, o.x); }
};

enum Fn { LOG, EXP, SIN, COS, SINPI, COSPI, NFN };

// Scan bit patterns [lo, hi] (positive floats) with a stride, on all cores.
template <class F>
static void scan(uint32_t lo, uint32_t hi, uint32_t stride, F body, Worst* worst) {
  unsigned n = std::thread::hardware_concurrency();
  if (n == 0) n = 2;
  std::vector<std::thread> threads;
  std::vector<std::vector<Worst>> partial(n, std::vector<Worst>(NFN));
  for (unsigned t = 0; t < n; ++t) {
    threads.emplace_back([=, &partial] {
      for (uint64_t b = (uint64_t)lo + (uint64_t)t * stride; b <= hi; b += (uint64_t)n * stride) {
        float x;
        uint32_t u = (uint32_t)b;
        memcpy(&x, &u, 4);
        body(x, partial[t].data());
      }
    });
  }
  for (auto& th : threads) th.join();
  for (unsigned t = 0; t < n; ++t)
    for (int f = 0; f < NFN; ++f) worst[f].merge(partial[t][f]);
}

static uint32_t bits(float x) { uint32_t u; memcpy(&u, &x, 4); return u; }

static void report(const char* what, const Worst& w) {
  printf("  %-40s max %.3f ulp at x = %.9g (0x%08x)\n", what, w.err, w.x, bits(w.x));
}

int main(int argc, char** argv) {
  uint32_t stride = argc > 1 ? (uint32_t)atoi(argv[1]) : 1;
  printf("portable_math accuracy, every %u-th float of each domain\n", stride);
  int failures = 0;
  auto check = [&](const char* what, const Worst& w, double bound) {
    report(what, w);
    if (!(w.err <= bound)) { printf("    FAIL: above %.1f ulp\n", bound); ++failures; }
  };

  {  // log on (0, 1] incl. subnormals, and on (1, FLT_MAX]
    Worst a[NFN], b[NFN];
    scan(1u, bits(1.0f), stride, [](float x, Worst* w) { w[LOG].add(ulp_err(wd_logf(x), log((double)x)), x); }, a);
    scan(bits(1.0f) + 1, 0x7f7fffffu, stride, [](float x, Worst* w) { w[LOG].add(ulp_err(wd_logf(x), log((double)x)), x); }, b);
    check("wd_logf on (0, 1]", a[LOG], 2.0);
    check("wd_logf on (1, FLT_MAX]", b[LOG], 2.0);
  }
  {  // exp on [-80, 80] and the rest of the normal-result range
    Worst a[NFN], b[NFN];
    auto body = [](float x, Worst* w) {
      w[EXP].add(ulp_err(wd_expf(x), exp((double)x)), x);
      w[EXP].add(ulp_err(wd_expf(-x), exp(-(double)x)), -x);
    };
    scan(0u, bits(80.0f), stride, body, a);
    scan(bits(80.0f) + 1, bits(87.0f), stride, body, b);
    check("wd_expf on [-80, 80]", a[EXP], 2.0);
    check("wd_expf on +-(80, 87]", b[EXP], 2.0);
    Worst c[NFN];
    scan(bits(88.0f), bits(88.72283f), stride, [](float x, Worst* w) { w[EXP].add(ulp_err(wd_expf(x), exp((double)x)), x); }, c);
    check("wd_expf on [88, 88.72283]", c[EXP], 2.0);
  }
  {  // sin/cos: [0, 2pi], then up to the Cody-Waite limit, then everything
    auto body = [](float x, Worst* w) {
      float s, c;
      wd_sincosf(x, &s, &c);
      w[SIN].add(ulp_err(s, sin((double)x)), x);
      w[COS].add(ulp_err(c, cos((double)x)), x);
      wd_sincosf(-x, &s, &c);
      w[SIN].add(ulp_err(s, -sin((double)x)), -x);
      w[COS].add(ulp_err(c, cos((double)x)), -x);
    };
    Worst a[NFN], b[NFN], c[NFN];
    scan(0u, bits(6.2831855f), stride, body, a);
    scan(bits(6.2831855f) + 1, bits(800.0f), stride, body, b);
    scan(bits(800.0f) + 1, 0x7f7fffffu, stride, body, c);
    check("wd_sincosf.sin on [-2pi, 2pi]", a[SIN], 2.0);
    check("wd_sincosf.cos on [-2pi, 2pi]", a[COS], 2.0);
    check("wd_sincosf.sin on 2pi < |x| <= 800", b[SIN], 2.0);
    check("wd_sincosf.cos on 2pi < |x| <= 800", b[COS], 2.0);
    check("wd_sincosf.sin on |x| > 800 (Payne-Hanek)", c[SIN], 2.0);
    check("wd_sincosf.cos on |x| > 800 (Payne-Hanek)", c[COS], 2.0);
  }
  {  // sin(pi x), cos(pi x): (0, 2] (Box-Muller's 2u) and beyond
    auto body = [](float x, Worst* w) {
      float s, c;
      double rs, rc;
      wd_sincospif(x, &s, &c);
      ref_sincospi(x, &rs, &rc);
      w[SINPI].add(ulp_err(s, rs), x);
      w[COSPI].add(ulp_err(c, rc), x);
    };
    Worst a[NFN], b[NFN];
    scan(0u, bits(2.0f), stride, body, a);
    scan(bits(2.0f) + 1, 0x7f7fffffu, stride, body, b);
    check("wd_sincospif.sin on [0, 2]", a[SINPI], 2.0);
    check("wd_sincospif.cos on [0, 2]", a[COSPI], 2.0);
    check("wd_sincospif.sin on (2, FLT_MAX]", b[SINPI], 2.0);
    check("wd_sincospif.cos on (2, FLT_MAX]", b[COSPI], 2.0);
  }
  {  // special values
    float inf = INFINITY, nan = NAN;
    float s, c;
    int ok = isinf(wd_logf(0.0f)) && wd_logf(0.0f) < 0 && isinf(wd_logf(-0.0f)) && isnan(wd_logf(-1.0f)) &&
             isnan(wd_logf(nan)) && wd_logf(inf) == inf && wd_logf(1.0f) == 0.0f && wd_expf(0.0f) == 1.0f &&
             wd_expf(100.0f) == inf && wd_expf(-200.0f) == 0.0f && wd_expf(-inf) == 0.0f && wd_expf(inf) == inf &&
             isnan(wd_expf(nan));
    wd_sincosf(inf, &s, &c);
    ok = ok && isnan(s) && isnan(c);
    wd_sincosf(-0.0f, &s, &c);
    ok = ok && s == 0.0f && signbit(s) && c == 1.0f;
    wd_sincospif(nan, &s, &c);
    ok = ok && isnan(s) && isnan(c);
    printf("  special values: %s\n", ok ? "ok" : "FAIL");
    failures += !ok;
  }
  printf(failures ? "FAILED (%d)\n" : "all within bounds\n", failures);
  return failures != 0;
}
