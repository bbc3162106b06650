// An env step written as phases over agents; the executor maps agents onto threads.
//
//   WD_FOR_EACH_AGENT(a, num_agents) { ...agent a's work in this phase... }
//   wd_sync_env();  // every agent's writes above are visible below
//   WD_FOR_EACH_AGENT(a, num_agents) { ...the next phase... }
//
// Each thread of the env takes the agents a = wd_agent_id(), + stride, + 2
// stride, ... (stride = the env's thread count), so a step written this way is
// correct for ANY number of threads per env. That lets the executor choose:
//
//   * on a GPU, one thread per agent up to the kernel's own limit (its register
//     use caps it, e.g. 512), and past that each thread loops over a few agents
//     -- one block per env, never a refusal for too many agents;
//   * on the cpu executor, one host thread per env that runs every agent as a
//     plain loop: its barriers return at once and no fiber ever switches.
//
// The environment class opts in with `thread_layout = AGENT_PHASES`; kernels
// written the classic way (thread = agent, `THREADS_PER_AGENT`) are unchanged.
//
// Rules of a phase kernel, which the GPU-shaped cpu executor checks in CI:
//   * state that crosses a wd_sync_env() lives in memory (arrays, __shared__),
//     not in locals: a thread holds several agents, one after another;
//   * in a phase an agent writes only its own rows (or uses atomics), and
//     reads others' rows only as they were at the last wd_sync_env();
//   * every thread reaches every wd_sync_env() and wd_env_min_u64() call: they
//     stand outside the loops, never inside a loop or a per-agent branch.
#ifndef WARP_DRIVE_AGENTS_H
#define WARP_DRIVE_AGENTS_H

#include <assert.h>

#include <warp_drive/indexing.h>
#include <warp_drive/sync.h>

// Threads working on this env (all its blocks).
__device__ __forceinline__ int wd_threads_per_env() { return (int)(blockDim.x * gridDim.y); }

// True in exactly one thread of the env: the one for once-per-env work (the
// clock, the done flag) in a phase.
__device__ __forceinline__ bool wd_env_leader() { return wd_agent_id() == 0; }

// The agents of this env that this thread handles, in increasing order.
#define WD_FOR_EACH_AGENT(a, num_agents)                                                     \
  for (int a = wd_agent_id(), wd_stride_##a = wd_threads_per_env(); a < (int)(num_agents); \
       a += wd_stride_##a)

// The smallest of one 64-bit value per thread over the env's threads, returned
// to every thread (threads with nothing to offer pass ~0ull). Pack a distance
// above an id -- ((unsigned long long)__float_as_uint(d2) << 32) | id, for
// d2 >= 0 -- and ties go to the smaller id whatever order threads run in.
// Every thread of the env must call it (it holds barriers); one block per env.
__device__ __forceinline__ unsigned long long wd_env_min_u64(unsigned long long value) {
  __shared__ unsigned long long wd_env_min_slot;
  assert(gridDim.y == 1 && "wd_env_min_u64: one block per env (AGENT_PHASES launches are)");
  if (threadIdx.x == 0) wd_env_min_slot = ~0ull;
  __syncthreads();
  atomicMin(&wd_env_min_slot, value);
  __syncthreads();
  const unsigned long long result = wd_env_min_slot;
  __syncthreads();  // every thread has read it before a next call starts over
  return result;
}

#endif  // WARP_DRIVE_AGENTS_H
