// Kernel parameters of each kind the argument checks handle; the kernel echoes
// its scalars so a test can see what arrived.

extern "C" __global__ void echo_args(int* ints, float* floats, long long* wides, int count, float scale,
                                     bool flag, unsigned long long big, double precise) {
  if (threadIdx.x != 0 || blockIdx.x != 0) return;
  ints[0] = count;
  ints[1] = flag ? 1 : 0;
  floats[0] = scale;
  floats[1] = (float)(precise * 2.0);
  wides[0] = (long long)big;
  wides[1] = (long long)(precise * 1e9);
}

// A step counter bound once and changed with set_scalar.
extern "C" __global__ void add_step(int* out, int step) {
  const int i = (int)(blockIdx.x * blockDim.x + threadIdx.x);
  out[i] += step;
}
