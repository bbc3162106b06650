// The one header an environment kernel includes: #include <warp_drive/core.h>
//
//   indexing.h       wd_env_id(), wd_agent_id(), wd_agent_index(n), ... (run-time geometry)
//   sync.h           wd_sync_env(): barrier over one environment's threads
//   agents.h         WD_FOR_EACH_AGENT(a, n): a step as phases over agents, any
//                    number of threads per env; wd_env_min_u64 (env-wide minimum)
//   portable_math.h  wd_logf, wd_expf, wd_sincosf, wd_sincospif, wd_sqrtf, wd_f*_rn:
//                    bit-identical on the GPU and in the cpu executor
//   philox.h         wd_random_bits / wd_random_uniform / wd_random_normal2:
//                    stateless counter-based RNG (Philox4x32-10)
//
// The same source builds with nvcc for a GPU and with the host C++ compiler
// against warp_drive/cuda/cpu/cuda_emulation.h (force-included), so kernels
// should use only what both provide: the qualifiers, threadIdx & co.,
// __syncthreads, __shared__, __constant__, atomics, CUDA vector types, assert,
// printf, and the helpers here. Use the wd_ math functions wherever the CPU and
// GPU results must agree bit for bit (logf/expf/sinf differ between the two).
#ifndef WARP_DRIVE_CORE_H
#define WARP_DRIVE_CORE_H

#include <assert.h>

#include <warp_drive/indexing.h>
#include <warp_drive/sync.h>
#include <warp_drive/agents.h>
#include <warp_drive/portable_math.h>
#include <warp_drive/philox.h>

#endif  // WARP_DRIVE_CORE_H
