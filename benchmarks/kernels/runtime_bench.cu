// Kernels for benchmarks/runtime.py: launch overhead, the cpu executor's fast
// path and fiber barriers.
extern "C" __global__ void bench_noop(int* x) {}

extern "C" __global__ void bench_touch(int* x) { x[blockIdx.x * blockDim.x + threadIdx.x] += 1; }

extern "C" __global__ void bench_barriers(int* x, int rounds) {
  for (int i = 0; i < rounds; ++i) __syncthreads();
}

extern "C" __global__ void bench_30_args(
    float* a0, float* a1, float* a2, float* a3, float* a4, float* a5, float* a6, float* a7, float* a8, float* a9,
    int i0, int i1, int i2, int i3, int i4, int i5, int i6, int i7, int i8, int i9,
    float f0, float f1, float f2, float f3, float f4, float f5, float f6, float f7, float f8, float f9) {}
