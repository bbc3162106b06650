// Minimal CUDA stand-ins for compiling the warp_drive headers and core kernels
// with plain g++ in these scratch harnesses (the real cpu executor uses
// warp_drive/cuda/cpu/cuda_emulation.h). Blocks and threads are looped over by
// hand, so threadIdx & co. are plain globals here.
#pragma once
#include <assert.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline __attribute__((always_inline))
#define __restrict__ __restrict
#define __shared__ static

struct dim3 {
  unsigned int x, y, z;
};
[[maybe_unused]] static dim3 threadIdx = {0, 0, 0}, blockIdx = {0, 0, 0}, blockDim = {1, 1, 1}, gridDim = {1, 1, 1};
static inline void __syncthreads() {}

struct uint2 { unsigned int x, y; };
struct uint4 { unsigned int x, y, z, w; };
struct float2 { float x, y; };
static inline uint2 make_uint2(unsigned int x, unsigned int y) { return {x, y}; }
static inline uint4 make_uint4(unsigned int x, unsigned int y, unsigned int z, unsigned int w) { return {x, y, z, w}; }
static inline float2 make_float2(float x, float y) { return {x, y}; }
static inline unsigned int __umulhi(unsigned int a, unsigned int b) {
  return (unsigned int)(((unsigned long long)a * b) >> 32);
}

// Run a kernel call `call` for every (block, thread) of a launch, sequentially.
#define HARNESS_LAUNCH(gx, gy, bx, call)                                        \
  do {                                                                          \
    gridDim = {(unsigned)(gx), (unsigned)(gy), 1};                              \
    blockDim = {(unsigned)(bx), 1, 1};                                          \
    for (unsigned by_ = 0; by_ < (unsigned)(gy); ++by_)                         \
      for (unsigned b_ = 0; b_ < (unsigned)(gx); ++b_)                          \
        for (unsigned t_ = 0; t_ < (unsigned)(bx); ++t_) {                      \
          blockIdx = {b_, by_, 0};                                              \
          threadIdx = {t_, 0, 0};                                               \
          call;                                                                 \
        }                                                                       \
  } while (0)
