// A planted step kernel the build gate must refuse (tests/runtime/test_build_gate.py):
// each agent keeps WIDTH floats live and reads one of them at an index known
// only at run time, and __launch_bounds__(1024) holds ptxas to 64 registers
// per thread. The array cannot stay in registers: it gets a stack frame (local
// memory) and ptxas spills besides. Not part of the shipped gate: its files
// start with "planted_".
#include <warp_drive/core.h>

#define WIDTH 80

extern "C" __global__ void __launch_bounds__(1024)
PlantedSpillStep(const float* __restrict__ inputs, const int* __restrict__ picks, float* __restrict__ outputs,
                 int num_agents) {
  const int agent = wd_agent_id();
  if (agent >= num_agents) return;
  const int row = wd_agent_index(num_agents);
  const float* in = inputs + (size_t)row * WIDTH;
  float v[WIDTH];
#pragma unroll
  for (int i = 0; i < WIDTH; ++i) v[i] = in[i];
#pragma unroll
  for (int round = 0; round < 3; ++round) {
    float total = 0.0f;
#pragma unroll
    for (int i = 0; i < WIDTH; ++i) total = wd_fadd_rn(total, v[i]);
#pragma unroll
    for (int i = 0; i < WIDTH; ++i) v[i] = wd_fmul_rn(v[i], wd_fsub_rn(total, v[i]));
  }
  outputs[row] = v[picks[row] % WIDTH];  // a run-time index: the array must be addressable
}
