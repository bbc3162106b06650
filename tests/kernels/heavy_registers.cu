// A thread-per-agent step too heavy for a full block on a GPU: each agent keeps
// WIDTH floats live in registers at once (every round rescales each of them by
// the sum of all of them, so none can be retired or streamed). ptxas (nvcc 13,
// sm_90) gives it 96 registers per thread: at most 640 threads per block, so
// an env of 1024 agents does not fit one block (tests/runtime/test_kernel_resources.py).
#include <warp_drive/core.h>

#define WIDTH 80

extern "C" __global__ void HeavyRegistersStep(const float* __restrict__ inputs, float* __restrict__ outputs,
                                              int num_agents) {
  const int agent = wd_agent_id();
  if (agent >= num_agents) return;
  const int row = wd_agent_index(num_agents);
  const float* in = inputs + (size_t)row * WIDTH;
  float* out = outputs + (size_t)row * WIDTH;
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
#pragma unroll
  for (int i = 0; i < WIDTH; ++i) out[i] = v[i];
}
