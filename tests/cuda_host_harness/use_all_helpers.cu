// Compile check: an env-style kernel touching every helper of <warp_drive/core.h>.
//   nvcc -cubin -arch=sm_90 --fmad=false -I ../../warp_drive/cuda/include use_all_helpers.cu
//   g++ -std=c++17 -fsyntax-only -include ../../warp_drive/cuda/cpu/cuda_emulation.h
//       -I ../../warp_drive/cuda/include -x c++ use_all_helpers.cu
#include <warp_drive/core.h>

extern "C" __global__ void UseAllHelpersStep(float* __restrict__ out, unsigned int* __restrict__ bits, int* __restrict__ ids,
                                             int num_agents, unsigned long long seed, unsigned long long counter) {
  const int env = wd_env_id();
  const int agent = wd_agent_id();
  const bool active = agent < num_agents;  // guard the work, never the barrier
  if (active) {
    const int row = wd_agent_index(num_agents);
    float u = wd_random_uniform(seed, counter, (unsigned int)row, 1u);
    float2 z = wd_random_normal2(seed, counter, (unsigned int)row, 2u);
    float2 z2 = wd_box_muller(bits[row], ~bits[row]);
    uint4 r = wd_random_bits(seed, counter, (unsigned int)row, 3u);
    uint4 k = wd_philox4x32_10(make_uint4(r.x, r.y, r.z, r.w), make_uint2(1u, 2u));
    float s, c, sp, cp;
    wd_sincosf(u, &s, &c);
    wd_sincospif(u, &sp, &cp);
    float v = wd_logf(u) + wd_expf(z.x) + wd_sinf(z.y) + wd_cosf(z2.x) + wd_sqrtf(u) + s + c + sp + cp +
              wd_uint_to_uniform(k.x);
    v = wd_fadd_rn(wd_fsub_rn(wd_fmul_rn(v, 2.0f), 1.0f), wd_fdiv_rn(z2.y, 3.0f));
    out[row] = v;
    bits[row] = wd_float_as_uint(wd_uint_as_float(k.y));
  }
  wd_sync_env();
  if (active && agent == 0) {
    ids[env] = wd_num_envs() * 1000 + wd_blocks_per_env() * 100 + wd_global_thread_id();
  }
}
