// __constant__ symbols set from the host (module.set_constant /
// FunctionManager.initialize_shared_constants).

__constant__ float poly_coeffs[4];
__constant__ int int_offset;

// out[i] = c0 + c1 x + c2 x^2 + c3 x^3 + int_offset  (Horner, exact for small ints)
extern "C" __global__ void eval_poly(const float* x, float* out, int n) {
  const int i = (int)(blockIdx.x * blockDim.x + threadIdx.x);
  if (i >= n) return;
  const float v = x[i];
  float acc = poly_coeffs[3];
  acc = acc * v + poly_coeffs[2];
  acc = acc * v + poly_coeffs[1];
  acc = acc * v + poly_coeffs[0];
  out[i] = acc + (float)int_offset;
}
