// Where a CUDA thread sits in the (environment, agent) layout.
//
// Env kernels launch with grid = (num_envs, blocks_per_env, 1) and
// block = (ceil(num_agents / blocks_per_env), 1, 1). All sizes are read from
// the launch geometry or passed as arguments at run time -- never compiled in
// -- so one build serves every number of environments and agents (the original
// baked them into a generated header and rebuilt on every change).
//
// The same functions compile under nvcc and under the cpu executor's emulation
// header, where threadIdx/blockIdx/... are thread-local variables.
#ifndef WARP_DRIVE_INDEXING_H
#define WARP_DRIVE_INDEXING_H

// Environment replica handled by this block (all blocks of one env share it).
__device__ __forceinline__ int wd_env_id() { return (int)blockIdx.x; }

// Number of environment replicas in this launch.
__device__ __forceinline__ int wd_num_envs() { return (int)gridDim.x; }

// How many blocks one environment spans (1 unless an env has more agents than
// one block can hold).
__device__ __forceinline__ int wd_blocks_per_env() { return (int)gridDim.y; }

// Agent of this thread inside its environment. Threads past the last agent
// exist when num_agents is not a multiple of blocks_per_env * blockDim.x: a
// kernel must guard per-agent work with `wd_agent_id() < num_agents` but must
// still let those threads reach every wd_sync_env() (see sync.h).
__device__ __forceinline__ int wd_agent_id() { return (int)(blockIdx.y * blockDim.x + threadIdx.x); }

// Flat thread index for 1-D launches that are not env-by-block, e.g. one thread
// per environment in single-agent envs (one thread per block there would leave
// almost every lane idle).
__device__ __forceinline__ int wd_global_thread_id() { return (int)(blockIdx.x * blockDim.x + threadIdx.x); }

// Row of this (env, agent) pair in an (n_envs, num_agents, ...) array; it is
// also the natural RNG stream of the agent (see philox.h).
__device__ __forceinline__ int wd_agent_index(int num_agents) { return wd_env_id() * num_agents + wd_agent_id(); }

#endif  // WARP_DRIVE_INDEXING_H
