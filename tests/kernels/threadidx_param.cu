// A kernel parameter named threadIdx: the cpu executor's built-in index
// variables are thread-local variables, not macros, so the name is free.
extern "C" __global__ void param_named_threadIdx(int* out, int threadIdx) {
  out[blockIdx.x] = threadIdx + (int)blockIdx.x;
}
