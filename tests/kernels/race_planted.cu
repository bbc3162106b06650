// Kernels with the bugs race mode exists to catch, each with its fix behind
// -DFIXED=1 (tests/runtime/test_race_mode.py builds both). Plain CUDA C. Most
// of the buggy ones give the right answer in the cpu executor's default order
// (threads one after another), which is why they need race mode to be seen.
#ifndef FIXED
#define FIXED 0
#endif
#define MAX_BLOCK 256

// Missing barrier: each thread writes its cell, then reads its neighbour's.
extern "C" __global__ void neighbour_sum(const int* in, int* out) {
  __shared__ int cells[MAX_BLOCK];
  const int t = (int)threadIdx.x, n = (int)blockDim.x;
  const int row = (int)blockIdx.x * n;
  cells[t] = in[row + t];
#if FIXED
  __syncthreads();
#endif
  out[row + t] = cells[t] + cells[(t + 1) % n];
}

// Non-atomic accumulation: every thread adds its value into its block's total.
extern "C" __global__ void block_total(const int* in, int* totals) {
  const int i = (int)(blockIdx.x * blockDim.x + threadIdx.x);
#if FIXED
  atomicAdd(&totals[blockIdx.x], in[i]);
#else
  totals[blockIdx.x] += in[i];
#endif
}

// Warp lockstep: the last steps of a tree reduction without barriers, correct
// only while the 32 threads of a warp run each instruction together (pre-Volta
// folklore; independent thread scheduling breaks it).
extern "C" __global__ void warp_reduce(const int* in, int* out) {
  __shared__ int partial[64];
  const int t = (int)threadIdx.x;  // blockDim.x == 64
  partial[t] = in[blockIdx.x * 64 + t];
  __syncthreads();
  if (t < 32) partial[t] += partial[t + 32];
#if FIXED
  __syncthreads();
  for (int s = 16; s > 0; s >>= 1) {
    if (t < s) partial[t] += partial[t + s];
    __syncthreads();
  }
#else
  if (t < 32) {
    for (int s = 16; s > 0; s >>= 1)
      if (t < s) partial[t] += partial[t + s];
  }
#endif
  if (t == 0) out[blockIdx.x] = partial[0];
}

// Inter-block race: thread 0 of every block bumps one global counter.
extern "C" __global__ void count_blocks(int* counter) {
  if (threadIdx.x == 0) {
#if FIXED
    atomicAdd(counter, 1);
#else
    *counter = *counter + 1;
#endif
  }
}

// Order-dependent (no race TSan could see: the writes are atomic): the block's
// "winner" is whichever thread's exchange came last.
extern "C" __global__ void last_writer(int* winner) {
#if FIXED
  atomicMax(&winner[blockIdx.x], (int)threadIdx.x);
#else
  atomicExch(&winner[blockIdx.x], (int)threadIdx.x);
#endif
}
