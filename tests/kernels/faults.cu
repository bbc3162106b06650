// Kernels that fault on the host (tests/runtime/test_kernel_faults.py): plain
// CUDA C, which on a GPU gives an undefined value or an illegal-address error.
extern "C" __global__ void divide(const int* a, const int* b, int* out) {
  const int i = (int)threadIdx.x;
  out[i] = a[i] / b[i];  // DIVIDE
}

extern "C" __global__ void wild_read(const int* a, int* out, long long offset) {
  if (threadIdx.x == 0) out[0] = a[offset];  // WILD READ
}
