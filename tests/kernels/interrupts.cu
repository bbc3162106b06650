// Kernels for tests/runtime/test_cpu_interrupts.py: launches that never end, blocks too
// large for fibers, and threads whose locals overflow a small fiber stack.

// Never returns, and reaches no barrier: only abandoning the block stops it.
extern "C" __global__ void spin_forever(const int* stop, int* progress) {
  const volatile int* flag = stop;
  unsigned int i = 0;
  while (*flag == 0) {
    if (threadIdx.x == 0 && (++i & 0xfffff) == 0) atomicAdd(progress, 1);
  }
}

// Never returns, but every round passes a barrier: cancelled cooperatively.
extern "C" __global__ void spin_with_barrier(const int* stop, int* progress) {
  const volatile int* flag = stop;
  while (*flag == 0) {
    __syncthreads();
    if (threadIdx.x == 0) atomicAdd(progress, 1);
  }
}

// Never returns, no barrier, and spends its time inside printf (in the C
// library, where an interrupt does not abandon it): stopped as printf returns.
extern "C" __global__ void spin_printing(const int* stop, int* progress) {
  const volatile int* flag = stop;
  unsigned int i = 0;
  while (*flag == 0) {
    printf("%.0s", "x");  // prints nothing
    if (threadIdx.x == 0 && (++i & 0xffff) == 0) atomicAdd(progress, 1);
  }
}

// Each thread writes its index, then reads its neighbour's after a barrier.
extern "C" __global__ void neighbour_after_barrier(int* out, int n) {
  extern __shared__ int scratch[];
  const int t = (int)threadIdx.x;
  if (t < 1024) scratch[t] = t;
  __syncthreads();
  const int m = blockDim.x < 1024 ? (int)blockDim.x : 1024;
  if (t < n) out[t] = t < 1024 ? scratch[(t + 1) % m] : t;
}

// A large local array per thread: 256 KiB of stack, touched from the top down.
extern "C" __global__ void deep_locals(float* out, int n) {
  volatile float local[65536];
  for (int i = 65535; i >= 0; --i) local[i] = (float)(i + (int)threadIdx.x);
  float sum = 0.0f;
  for (int i = 0; i < 65536; i += 4096) sum += local[i];
  __syncthreads();
  if ((int)threadIdx.x < n) out[threadIdx.x] = sum;
}
