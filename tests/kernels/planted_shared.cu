// A planted kernel whose documented launch fits sm_90 but not sm_75
// (tests/runtime/test_build_gate.py): 40 KiB of static shared memory (under the
// 48 KiB every architecture allows statically) plus the 32 KiB of dynamic
// shared memory its configuration launches it with: 72 KiB per block, over the
// 64 KiB a block (and an SM) of sm_75 has, well within the 227 KiB of sm_90.
// Not part of the shipped gate: its files start with "planted_".
#include <warp_drive/core.h>

#define STATIC_FLOATS (40 * 1024 / 4)

extern "C" __global__ void PlantedSharedStep(const float* __restrict__ inputs, float* __restrict__ outputs, int n) {
  __shared__ float table[STATIC_FLOATS];
  extern __shared__ float scratch[];
  const int t = threadIdx.x;
  for (int i = t; i < STATIC_FLOATS; i += blockDim.x) table[i] = i < n ? inputs[i] : 0.0f;
  scratch[t] = (float)t;
  __syncthreads();
  if (t < n) outputs[t] = wd_fadd_rn(table[(t * 7) % STATIC_FLOATS], scratch[(t + 1) % blockDim.x]);
}
