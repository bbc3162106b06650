// CUDA C on the host: the header the cpu executor force-includes (g++ -include)
// before every .cu source, so the very same kernels that nvcc builds for a GPU
// build into a host shared library.
//
// Execution model (implemented by runtime.cpp):
//   * a launch runs its blocks on a pool of host threads, one block per worker
//     at a time, so __shared__ can be a thread_local: one instance per block in
//     flight, also inside __device__ helpers;
//   * the threads of a block are fibers that switch at __syncthreads; a block
//     whose thread 0 finishes without reaching a barrier runs its other threads
//     as plain calls (the fast path), where reaching a barrier is an error;
//   * threadIdx/blockIdx/blockDim/gridDim are thread-local variables (not
//     macros), so a parameter named threadIdx still compiles.
#ifndef WARP_DRIVE_CUDA_EMULATION_H
#define WARP_DRIVE_CUDA_EMULATION_H

#ifndef __cplusplus
#error "the warp_drive cpu executor compiles CUDA sources as C++"
#endif

#include <assert.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmath>
#include <cstddef>
#include <tuple>  // these three for the tables the cpu executor generates after the sources
#include <type_traits>
#include <utility>

// Defined for code that must know it runs here (debugging aids); the
// GPU-shaped build (warp-drive's "cpu-gpu" backend) leaves it undefined, as
// nvcc does, so that it runs the very lines a GPU runs.
#ifndef WD_EMULATE_GPU_MACROS
#define WD_CPU_EXECUTOR 1
#endif

// ---------------------------------------------------------------- qualifiers
#ifdef WD_MARKER_PASS
// Signature pass: leave recognisable tokens in the preprocessed output
// (warp_drive/runtime/backends/signature.py reads them).
#define __global__ __wd_global__
#define __constant__ __wd_constant__
#define __shared__ __wd_shared__
#else
#define __global__
#define __constant__
#define __shared__ thread_local
#endif
#define __device__
#define __host__
#define __forceinline__ inline __attribute__((always_inline))
#define __noinline__ __attribute__((noinline))
#define __restrict__ __restrict
#define __align__(n) __attribute__((aligned(n)))
#define __launch_bounds__(...)
#define __grid_constant__

// ---------------------------------------------------------------- vector types
struct dim3 {
  unsigned int x, y, z;
  constexpr dim3(unsigned int x_ = 1, unsigned int y_ = 1, unsigned int z_ = 1) : x(x_), y(y_), z(z_) {}
};
typedef dim3 uint3;

#define WD_VEC2(T, N) \
  struct __attribute__((aligned(2 * sizeof(T)))) N { T x, y; }; \
  static inline N make_##N(T x, T y) { N v; v.x = x; v.y = y; return v; }
#define WD_VEC3(T, N) \
  struct N { T x, y, z; }; \
  static inline N make_##N(T x, T y, T z) { N v; v.x = x; v.y = y; v.z = z; return v; }
#define WD_VEC4(T, N) \
  struct __attribute__((aligned(4 * sizeof(T)))) N { T x, y, z, w; }; \
  static inline N make_##N(T x, T y, T z, T w) { N v; v.x = x; v.y = y; v.z = z; v.w = w; return v; }
WD_VEC2(int, int2) WD_VEC3(int, int3) WD_VEC4(int, int4)
WD_VEC2(unsigned int, uint2) WD_VEC4(unsigned int, uint4)
WD_VEC2(float, float2) WD_VEC3(float, float3) WD_VEC4(float, float4)
WD_VEC2(double, double2)
static inline uint3 make_uint3(unsigned int x, unsigned int y, unsigned int z) { return uint3(x, y, z); }
#undef WD_VEC2
#undef WD_VEC3
#undef WD_VEC4

// ---------------------------------------------------------------- built-in variables
// Per OS thread: the runtime sets them before each CUDA thread runs, and the
// barrier wrapper below restores threadIdx after a fiber switch.
static thread_local dim3 threadIdx(0, 0, 0);
static thread_local dim3 blockIdx(0, 0, 0);
static thread_local dim3 blockDim(1, 1, 1);
static thread_local dim3 gridDim(1, 1, 1);
static const int warpSize = 32;

// ---------------------------------------------------------------- runtime interface
extern "C" {
// Index of the CUDA thread the runtime is about to run (see runtime.cpp).
struct wd_thread_index {
  dim3 thread, block, block_dim, grid_dim;
  int block_changed;  // 0 while the same block keeps running on this host thread
};
typedef void (*wd_thread_fn)(void* const* args, const struct wd_thread_index* index);
// Runs `count` threads in CUDA order starting at index->thread, keeping
// index->thread current (the runtime names it in error messages).
typedef void (*wd_threads_fn)(void* const* args, struct wd_thread_index* index, unsigned int count);
struct wd_kernel_entry {
  const char* name;
  wd_thread_fn run_thread;
  wd_threads_fn run_threads;
};
struct wd_symbol_entry {
  const char* name;
  void* address;
  unsigned long long size;
};
int wd_cpu_barrier(const char* file, int line, int predicate);
void wd_cpu_poll_interrupt(void);
__attribute__((noreturn)) void wd_cpu_device_fail(const char* what, const char* file, int line);
}

// Race mode (-fsanitize=thread): the runtime's writes of the built-in index
// variables are hidden from ThreadSanitizer. Every CUDA thread of a block
// writes them on the same host thread, which TSan would otherwise report as a
// race between CUDA threads; kernels only read them.
#if defined(__SANITIZE_THREAD__)
#define WD_RUNTIME_WRITE __attribute__((no_sanitize_thread, noinline))
#else
#define WD_RUNTIME_WRITE inline
#endif

static WD_RUNTIME_WRITE void wd_set_thread_idx(dim3 me) { threadIdx = me; }

static WD_RUNTIME_WRITE void wd_set_thread_index(const wd_thread_index* index) {
  threadIdx = index->thread;
  if (index->block_changed) {
    blockIdx = index->block;
    blockDim = index->block_dim;
    gridDim = index->grid_dim;
  }
}

// Barriers carry their call site so a divergent barrier can be reported.
// A block of one thread waits for nobody: its barriers return at once, so the
// runtime runs it as a plain call (the one-thread-per-env launches of
// AGENT_PHASES kernels on this executor).
static inline int wd_barrier_at(const char* file, int line, int predicate) {
  if (blockDim.x * blockDim.y * blockDim.z == 1) return predicate;
  dim3 me = threadIdx;  // on this fiber's own stack: survives the switch
  int result = wd_cpu_barrier(file, line, predicate);
  wd_set_thread_idx(me);
  return result;
}
#define __syncthreads() ((void)wd_barrier_at(__FILE__, __LINE__, 0))
#define __syncthreads_count(p) wd_barrier_at(__FILE__, __LINE__, (p) ? 1 : 0)
#define __syncthreads_and(p) (wd_barrier_at(__FILE__, __LINE__, (p) ? 1 : 0) == (int)(blockDim.x * blockDim.y * blockDim.z))
#define __syncthreads_or(p) (wd_barrier_at(__FILE__, __LINE__, (p) ? 1 : 0) != 0)
#define __trap() wd_cpu_device_fail("__trap()", __FILE__, __LINE__)

static inline void __threadfence() { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
static inline void __threadfence_block() { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
static inline void __threadfence_system() { __atomic_thread_fence(__ATOMIC_SEQ_CST); }

// A failed device assert reports kernel, block, thread, file and line to
// Python instead of aborting the interpreter: glibc's assert() calls
// __assert_fail, which this library defines (linked -Bsymbolic, so its own
// calls bind here and not to libc).
extern "C" __attribute__((noreturn)) void __assert_fail(const char* expr, const char* file, unsigned int line,
                                                        const char* function) noexcept {
  (void)function;
  wd_cpu_device_fail(expr, file, (int)line);
}

// Device printf: libc's, then a look for Ctrl-C. A kernel looping through
// printf spends its time inside libc, where the runtime's SIGINT handler never
// abandons it (libc's locks); here, back in kernel code, it can. Defined in
// the kernel library like __assert_fail above (built -fno-builtin-printf, so
// every printf call comes here).
extern "C" int printf(const char* __restrict format, ...) {
  va_list args;
  va_start(args, format);
  const int written = vprintf(format, args);
  va_end(args);
  wd_cpu_poll_interrupt();
  return written;
}

// ---------------------------------------------------------------- atomics
// Real atomics: blocks run in parallel on several host threads.
#define WD_ATOMIC_INT_OPS(T)                                                                         \
  static inline T atomicAdd(T* p, T v) { return __atomic_fetch_add(p, v, __ATOMIC_RELAXED); }       \
  static inline T atomicSub(T* p, T v) { return __atomic_fetch_sub(p, v, __ATOMIC_RELAXED); }       \
  static inline T atomicExch(T* p, T v) { return __atomic_exchange_n(p, v, __ATOMIC_RELAXED); }     \
  static inline T atomicAnd(T* p, T v) { return __atomic_fetch_and(p, v, __ATOMIC_RELAXED); }       \
  static inline T atomicOr(T* p, T v) { return __atomic_fetch_or(p, v, __ATOMIC_RELAXED); }         \
  static inline T atomicXor(T* p, T v) { return __atomic_fetch_xor(p, v, __ATOMIC_RELAXED); }       \
  static inline T atomicCAS(T* p, T compare, T v) {                                                 \
    __atomic_compare_exchange_n(p, &compare, v, false, __ATOMIC_RELAXED, __ATOMIC_RELAXED);        \
    return compare;                                                                                 \
  }                                                                                                 \
  static inline T atomicMin(T* p, T v) {                                                            \
    T old = __atomic_load_n(p, __ATOMIC_RELAXED);                                                   \
    while (v < old && !__atomic_compare_exchange_n(p, &old, v, true, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) { \
    }                                                                                               \
    return old;                                                                                     \
  }                                                                                                 \
  static inline T atomicMax(T* p, T v) {                                                            \
    T old = __atomic_load_n(p, __ATOMIC_RELAXED);                                                   \
    while (v > old && !__atomic_compare_exchange_n(p, &old, v, true, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) { \
    }                                                                                               \
    return old;                                                                                     \
  }
WD_ATOMIC_INT_OPS(int)
WD_ATOMIC_INT_OPS(unsigned int)
WD_ATOMIC_INT_OPS(unsigned long long)
WD_ATOMIC_INT_OPS(long long)
#undef WD_ATOMIC_INT_OPS

#define WD_ATOMIC_FLOAT_OPS(T)                                                                      \
  static inline T atomicAdd(T* p, T v) {                                                           \
    T old;                                                                                         \
    __atomic_load(p, &old, __ATOMIC_RELAXED);                                                      \
    T next;                                                                                        \
    do {                                                                                           \
      next = old + v;                                                                              \
    } while (!__atomic_compare_exchange(p, &old, &next, true, __ATOMIC_RELAXED, __ATOMIC_RELAXED)); \
    return old;                                                                                    \
  }                                                                                                \
  static inline T atomicSub(T* p, T v) { return atomicAdd(p, -v); }                                \
  static inline T atomicExch(T* p, T v) {                                                          \
    T old;                                                                                         \
    __atomic_exchange(p, &v, &old, __ATOMIC_RELAXED);                                              \
    return old;                                                                                    \
  }                                                                                                \
  static inline T atomicMin(T* p, T v) {                                                           \
    T old;                                                                                         \
    __atomic_load(p, &old, __ATOMIC_RELAXED);                                                      \
    while (v < old && !__atomic_compare_exchange(p, &old, &v, true, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) { \
    }                                                                                              \
    return old;                                                                                    \
  }                                                                                                \
  static inline T atomicMax(T* p, T v) {                                                           \
    T old;                                                                                         \
    __atomic_load(p, &old, __ATOMIC_RELAXED);                                                      \
    while (v > old && !__atomic_compare_exchange(p, &old, &v, true, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) { \
    }                                                                                              \
    return old;                                                                                    \
  }
WD_ATOMIC_FLOAT_OPS(float)
WD_ATOMIC_FLOAT_OPS(double)
#undef WD_ATOMIC_FLOAT_OPS

static inline unsigned int atomicInc(unsigned int* p, unsigned int limit) {
  unsigned int old = __atomic_load_n(p, __ATOMIC_RELAXED), next;
  do {
    next = old >= limit ? 0u : old + 1u;
  } while (!__atomic_compare_exchange_n(p, &old, next, true, __ATOMIC_RELAXED, __ATOMIC_RELAXED));
  return old;
}
static inline unsigned int atomicDec(unsigned int* p, unsigned int limit) {
  unsigned int old = __atomic_load_n(p, __ATOMIC_RELAXED), next;
  do {
    next = (old == 0u || old > limit) ? limit : old - 1u;
  } while (!__atomic_compare_exchange_n(p, &old, next, true, __ATOMIC_RELAXED, __ATOMIC_RELAXED));
  return old;
}

// ---------------------------------------------------------------- math
// The float overloads of sqrt/pow/abs/... come from <cmath> through libstdc++'s
// <math.h>; CUDA's global min/max overloads are defined here.
#define WD_MINMAX(T)                                          \
  static inline T min(T a, T b) { return b < a ? b : a; }    \
  static inline T max(T a, T b) { return a < b ? b : a; }
WD_MINMAX(int)
WD_MINMAX(unsigned int)
WD_MINMAX(long long)
WD_MINMAX(unsigned long long)
#undef WD_MINMAX
static inline float min(float a, float b) { return fminf(a, b); }
static inline float max(float a, float b) { return fmaxf(a, b); }
static inline double min(double a, double b) { return fmin(a, b); }
static inline double max(double a, double b) { return fmax(a, b); }
static inline unsigned int min(int a, unsigned int b) { return min((unsigned int)a, b); }
static inline unsigned int min(unsigned int a, int b) { return min(a, (unsigned int)b); }
static inline unsigned int max(int a, unsigned int b) { return max((unsigned int)a, b); }
static inline unsigned int max(unsigned int a, int b) { return max(a, (unsigned int)b); }

static inline float rsqrtf(float x) { return 1.0f / sqrtf(x); }
static inline double rsqrt(double x) { return 1.0 / sqrt(x); }
static inline float __fdividef(float a, float b) { return a / b; }
static inline float fdividef(float a, float b) { return a / b; }
// glibc declares __expf & co. itself (extern); CUDA's fast intrinsics are the
// precise functions here.
inline float __expf(float x) { return expf(x); }
inline float __logf(float x) { return logf(x); }
inline float __sinf(float x) { return sinf(x); }
inline float __cosf(float x) { return cosf(x); }
inline float __powf(float x, float y) { return powf(x, y); }
static inline float __saturatef(float x) { return x < 0.0f ? 0.0f : (x > 1.0f ? 1.0f : x); }
static inline int __float2int_rn(float x) { return (int)nearbyintf(x); }
static inline int __float2int_rz(float x) { return (int)x; }
static inline int __float2int_rd(float x) { return (int)floorf(x); }
static inline int __float2int_ru(float x) { return (int)ceilf(x); }
static inline float __int2float_rn(int x) { return (float)x; }

static inline int __float_as_int(float x) { int r; memcpy(&r, &x, 4); return r; }
static inline float __int_as_float(int x) { float r; memcpy(&r, &x, 4); return r; }
static inline unsigned int __float_as_uint(float x) { unsigned int r; memcpy(&r, &x, 4); return r; }
static inline float __uint_as_float(unsigned int x) { float r; memcpy(&r, &x, 4); return r; }
static inline long long __double_as_longlong(double x) { long long r; memcpy(&r, &x, 8); return r; }
static inline double __longlong_as_double(long long x) { double r; memcpy(&r, &x, 8); return r; }

static inline unsigned int __umulhi(unsigned int a, unsigned int b) {
  return (unsigned int)(((unsigned long long)a * b) >> 32);
}
static inline int __mulhi(int a, int b) { return (int)(((long long)a * b) >> 32); }
static inline unsigned long long __umul64hi(unsigned long long a, unsigned long long b) {
  return (unsigned long long)(((unsigned __int128)a * b) >> 64);
}
static inline int __popc(unsigned int x) { return __builtin_popcount(x); }
static inline int __popcll(unsigned long long x) { return __builtin_popcountll(x); }
static inline int __clz(int x) { return x == 0 ? 32 : __builtin_clz((unsigned int)x); }
static inline int __clzll(long long x) { return x == 0 ? 64 : __builtin_clzll((unsigned long long)x); }
static inline int __ffs(int x) { return __builtin_ffs(x); }
static inline int __ffsll(long long x) { return __builtin_ffsll(x); }
static inline unsigned int __brev(unsigned int x) {
  x = ((x >> 1) & 0x55555555u) | ((x & 0x55555555u) << 1);
  x = ((x >> 2) & 0x33333333u) | ((x & 0x33333333u) << 2);
  x = ((x >> 4) & 0x0F0F0F0Fu) | ((x & 0x0F0F0F0Fu) << 4);
  x = ((x >> 8) & 0x00FF00FFu) | ((x & 0x00FF00FFu) << 8);
  return (x >> 16) | (x << 16);
}
template <class T>
static inline T __ldg(const T* p) { return *p; }

#endif  // WARP_DRIVE_CUDA_EMULATION_H
