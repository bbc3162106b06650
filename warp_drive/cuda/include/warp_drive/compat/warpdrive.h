// WarpDrive 2.7's device-side names over warp_drive's core, so that its env
// kernels build unchanged. warp_drive.compat.cuda_build.build_warpdrive_source
// force-includes this header before the user's source and passes the sizes as
// -D defines (warpdrive_defines()); including it by hand works the same way.
//
//   wkNumberEnvs, wkNumberAgents, wkBlocksPerEnv   compile-time constants (WarpDrive
//       kernels size __shared__ arrays with them), from -DWD_COMPAT_NUM_ENVS,
//       -DWD_COMPAT_NUM_AGENTS, -DWD_COMPAT_BLOCKS_PER_ENV; wkMaxBlocks as in WarpDrive
//   getEnvID(blockIdx.x), getAgentID(threadIdx.x, blockIdx.x, blockDim.x), getRankInEnv(blockIdx.x)
//   __sync_env_threads()                           a barrier over one env's threads
//   get_flattened_array_index(index, shape, ndim)  row-major offset of a multi-index
//
// Launch geometry. WarpDrive launched a flat grid of num_envs * blocks_per_env
// blocks and decoded the env and agent from blockIdx.x. warp_drive launches a
// 2-D grid (num_envs, blocks_per_env): the env is blockIdx.x and the block
// within the env is blockIdx.y. The helpers therefore IGNORE their arguments
// and return warp_drive's ids (wd_env_id(), wd_agent_id() of core.h), which are
// right for every geometry warp_drive launches -- the arguments only keep
// WarpDrive's call sites compiling. A WarpDrive-style flat grid of
// num_envs * blocks_per_env blocks (gridDim.y == 1, wkBlocksPerEnv > 1) is
// decoded as WarpDrive did, but its __sync_env_threads() would need a barrier
// across blocks that only the 2-D launch provides, so it stops with an assert
// naming the fix (launch with grid=function_manager.grid).
//
// __sync_env_threads() is wd_sync_env(): __syncthreads() for one block per env,
// a cooperative grid-wide barrier for several blocks (GPU only). WarpDrive spun
// on flags in global memory instead, which deadlocks unless every block of the
// env happens to be resident at once (reference §9); that is not carried over.
#ifndef WARP_DRIVE_COMPAT_WARPDRIVE_H
#define WARP_DRIVE_COMPAT_WARPDRIVE_H

#include <assert.h>

#include <warp_drive/core.h>

#if !defined(WD_COMPAT_NUM_ENVS) || !defined(WD_COMPAT_NUM_AGENTS) || !defined(WD_COMPAT_BLOCKS_PER_ENV)
#error "warp_drive/compat/warpdrive.h needs -DWD_COMPAT_NUM_ENVS=, -DWD_COMPAT_NUM_AGENTS= and -DWD_COMPAT_BLOCKS_PER_ENV= (build the source with warp_drive.compat.cuda_build.build_warpdrive_source, or pass warpdrive_defines(num_envs, num_agents, blocks_per_env) as defines)"
#endif

// `const int` at namespace scope, as in WarpDrive's generated env_config.h: a
// constant expression usable in device code and in __shared__ array sizes.
const int wkNumberEnvs = WD_COMPAT_NUM_ENVS;
const int wkNumberAgents = WD_COMPAT_NUM_AGENTS;
const int wkBlocksPerEnv = WD_COMPAT_BLOCKS_PER_ENV;
const int wkMaxBlocks = wkNumberEnvs * wkBlocksPerEnv;

// True for WarpDrive's flat launch of several blocks per env (see above).
__device__ __forceinline__ bool wd_compat_flat_multiblock() { return gridDim.y == 1 && wkBlocksPerEnv > 1; }

__device__ __forceinline__ int getEnvID(const int /*block_idx, unused: see above*/) {
  return wd_compat_flat_multiblock() ? (int)blockIdx.x / wkBlocksPerEnv : wd_env_id();
}

__device__ __forceinline__ int getAgentID(const int /*thread_idx*/, const int /*block_idx*/, const int /*block_dim*/) {
  return wd_compat_flat_multiblock() ? (int)(threadIdx.x + (blockIdx.x % wkBlocksPerEnv) * blockDim.x)
                                     : wd_agent_id();
}

// The block's rank within its env.
__device__ __forceinline__ int getRankInEnv(const int /*block_idx*/) {
  return wd_compat_flat_multiblock() ? (int)blockIdx.x % wkBlocksPerEnv : (int)blockIdx.y;
}

__device__ __forceinline__ void __sync_env_threads() {
  assert(!wd_compat_flat_multiblock() &&
         "__sync_env_threads: several blocks per env need warp_drive's 2-D launch, "
         "grid=function_manager.grid (num_envs, blocks_per_env), not a flat grid of num_envs*blocks_per_env");
  wd_sync_env();
}

// Row-major offset of index_arr[0..dimensionality) in an array of shape dim_arr.
__device__ __forceinline__ int get_flattened_array_index(const int* index_arr, const int* dim_arr,
                                                         const int dimensionality) {
  int offset = 0;
  int stride = 1;
  for (int d = dimensionality - 1; d >= 0; d--) {
    offset += index_arr[d] * stride;
    stride *= dim_arr[d];
  }
  return offset;
}

#endif  // WARP_DRIVE_COMPAT_WARPDRIVE_H
