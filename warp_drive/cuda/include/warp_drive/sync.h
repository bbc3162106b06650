// A barrier over all threads of one environment.
//
// One block per env (gridDim.y == 1) is the common case and needs nothing but
// __syncthreads(). When an env spans several blocks, blocks cannot wait for
// each other with __syncthreads(); the original spun on per-block flags in
// global memory, which deadlocks unless every block happens to be resident.
// We use the only barrier CUDA guarantees instead: a grid-wide
// cooperative-groups sync, which requires the kernel to be launched
// cooperatively (cuLaunchCooperativeKernel; the launcher refuses grids that
// cannot be co-resident rather than hanging). It waits for the whole grid, a
// superset of one env, so it is correct but costs a little more than an
// env-local barrier would.
//
// As with __syncthreads(), EVERY thread of the env must reach the call,
// including threads with wd_agent_id() >= num_agents: put the guard around the
// per-agent work, never around the barrier.
#ifndef WARP_DRIVE_SYNC_H
#define WARP_DRIVE_SYNC_H

#include <assert.h>

#ifdef __CUDACC__
#include <cooperative_groups.h>
#endif

__device__ __forceinline__ void wd_sync_env() {
  if (gridDim.y == 1) {
    __syncthreads();
    return;
  }
#ifdef __CUDACC__
  // The block-level barriers make the ordering explicit on both sides of the
  // grid barrier: every thread of this block has finished its writes before the
  // block arrives, and none runs ahead before the whole grid has arrived.
  __syncthreads();
  cooperative_groups::this_grid().sync();
  __syncthreads();
#else
  // The cpu executor runs one env as one block of fibers; it has no grid-wide
  // barrier. Failing here beats silently computing with a partial barrier.
  assert(!"wd_sync_env: several blocks per env are GPU-only; the cpu executor runs an env as one block");
#endif
}

#endif  // WARP_DRIVE_SYNC_H
