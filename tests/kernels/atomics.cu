// Cross-block atomics under contention (every thread of every block hits the
// same few words). Plain CUDA C: nvcc builds the same file.

extern "C" __global__ void atomic_add_int(int* counter, unsigned long long* wide) {
  atomicAdd(counter, 1);
  atomicAdd(wide, 3ull);
}

extern "C" __global__ void atomic_add_float(float* sum) {
  atomicAdd(sum, 0.5f);  // every partial sum is exact in float
}

extern "C" __global__ void atomic_min_max(const int* values, int n, int* lowest, int* highest,
                                          unsigned int* ulowest, unsigned int* uhighest) {
  const int i = (int)(blockIdx.x * blockDim.x + threadIdx.x);
  if (i >= n) return;
  atomicMin(lowest, values[i]);
  atomicMax(highest, values[i]);
  atomicMin(ulowest, (unsigned int)values[i]);
  atomicMax(uhighest, (unsigned int)values[i]);
}

// A counter incremented with a compare-and-swap retry loop (lock-free: a failed
// CAS means another thread made progress).
extern "C" __global__ void atomic_cas_counter(int* counter, int* tickets) {
  const int i = (int)(blockIdx.x * blockDim.x + threadIdx.x);
  int old = atomicAdd(counter, 0);
  int assumed;
  do {
    assumed = old;
    old = atomicCAS(counter, assumed, assumed + 1);
  } while (old != assumed);
  tickets[i] = assumed;  // every ticket 0 .. n-1 exactly once
}

// Every thread swaps its own id + 1 into one slot and keeps what it saw: the
// values seen plus the final slot are 0 .. n, each exactly once.
extern "C" __global__ void atomic_exchange(int* slot, int* seen) {
  const int i = (int)(blockIdx.x * blockDim.x + threadIdx.x);
  seen[i] = atomicExch(slot, i + 1);
}
