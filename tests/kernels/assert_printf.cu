// Device assert and printf.
#include <assert.h>
#include <stdio.h>

// Barrier-free: the failing thread runs on the plain fast path when it is not
// thread 0.
extern "C" __global__ void check_non_negative(const int* values, int* out, int n) {
  const int i = (int)(blockIdx.x * blockDim.x + threadIdx.x);
  if (i >= n) return;
  assert(values[i] >= 0);  // ASSERT_PLAIN
  out[i] = values[i] * 2;
}

// With a barrier: the failing thread is a fiber, others wait at the barrier.
extern "C" __global__ void check_with_barrier(const int* values, int* out, int n) {
  __shared__ int s[256];
  const int t = (int)threadIdx.x;
  const int i = (int)(blockIdx.x * blockDim.x) + t;
  s[t] = i < n ? values[i] : 0;
  __syncthreads();
  assert(s[t] < 1000);  // ASSERT_FIBER
  __syncthreads();
  if (i < n) out[i] = s[(t + 1) % (int)blockDim.x];
}

extern "C" __global__ void say_hello(int tag) {
  if (threadIdx.x == 0) printf("hello from block %d tag %d\n", (int)blockIdx.x, tag);
}
