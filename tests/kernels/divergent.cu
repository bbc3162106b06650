// Kernels whose barriers diverge: undefined behaviour on a GPU (a hang or
// garbage), an error naming the kernel and the barrier sites on the cpu
// executor. Tests find the lines by the BARRIER_* markers.

// (a) thread 0 returns before the barrier that all others reach.
extern "C" __global__ void early_exit(int* out) {
  if (threadIdx.x == 0) return;
  __syncthreads();  // BARRIER_EARLY
  out[threadIdx.x] = 1;
}

// (b) even and odd threads wait at two different barriers.
extern "C" __global__ void even_odd(int* out) {
  if (threadIdx.x % 2 == 0) {
    __syncthreads();  // BARRIER_EVEN
  } else {
    __syncthreads();  // BARRIER_ODD
  }
  out[threadIdx.x] = 1;
}

// (c) thread 0 waits at a barrier that some other threads never reach.
extern "C" __global__ void late_exit(int* out) {
  if (threadIdx.x % 3 == 1) return;
  __syncthreads();  // BARRIER_LATE
  out[threadIdx.x] = 1;
}

// (c') all threads pass a first barrier, then thread 5 leaves while the
// others, thread 0 included, wait at a second one.
extern "C" __global__ void exit_after_first_barrier(int* out) {
  __syncthreads();
  if (threadIdx.x == 5) return;
  __syncthreads();  // BARRIER_SECOND
  out[threadIdx.x] = 1;
}
