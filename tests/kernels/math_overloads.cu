// Single-precision math: the C functions and CUDA's float overloads of the
// generic names (which must not silently go through int or double).

#define N_OPS 14

extern "C" __global__ void math_ops(const float* a, const float* b, float* out, int n) {
  const int i = (int)(blockIdx.x * blockDim.x + threadIdx.x);
  if (i >= n) return;
  const float x = a[i], y = b[i];
  float* o = out + N_OPS * i;
  o[0] = sqrtf(fabsf(x));
  o[1] = sinf(x);
  o[2] = cosf(x);
  o[3] = expf(x);
  o[4] = logf(fabsf(x) + 0.5f);
  o[5] = powf(fabsf(x) + 0.5f, y);
  o[6] = fminf(x, y);
  o[7] = fmaxf(x, y);
  o[8] = fabsf(x);
  o[9] = sqrt(fabsf(x));
  o[10] = pow(fabsf(x) + 0.5f, y);
  o[11] = min(x, y);
  o[12] = max(x, y);
  o[13] = abs(x);
}

// Sizes of the generic overloads' results (4: float, 8: double).
extern "C" __global__ void overload_sizes(int* sizes, float* values) {
  const float half = 0.5f, one_and_half = 1.5f, minus = -1.25f;
  sizes[0] = (int)sizeof(sqrt(half));
  sizes[1] = (int)sizeof(pow(half, one_and_half));
  sizes[2] = (int)sizeof(min(half, one_and_half));
  sizes[3] = (int)sizeof(max(half, one_and_half));
  sizes[4] = (int)sizeof(abs(minus));
  values[0] = min(half, one_and_half);
  values[1] = max(half, one_and_half);
  values[2] = abs(minus);
  values[3] = pow(one_and_half, 2.0f);
  values[4] = sqrt(2.25f);
}
