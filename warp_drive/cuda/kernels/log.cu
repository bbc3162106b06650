// Episode logging: record one env's slice of several arrays at one step.
//
// One launch covers every logged array (the original launched per array and
// bounded the copy by a compiled-in agent count). Arrays hold 4-byte words
// (float32 / int32), copied bit for bit.
#include <warp_drive/core.h>

// table: n_arrays rows of {log address, src address, words_per_env}; a log is
// (steps, words_per_env) words and its src is (n_envs, words_per_env):
//   log[step*w + i] = src[env_id*w + i].
// Any grid and block: a grid-stride loop covers the words of each array.
extern "C" __global__ void wd_log_step(const unsigned long long* __restrict__ table, int n_arrays, int env_id,
                                       int step) {
  unsigned long long first = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;
  unsigned long long stride = (unsigned long long)gridDim.x * blockDim.x;
  for (int a = 0; a < n_arrays; ++a) {
    unsigned int* log_base = reinterpret_cast<unsigned int*>(table[3 * a + 0]);
    const unsigned int* src = reinterpret_cast<const unsigned int*>(table[3 * a + 1]);
    unsigned long long words = table[3 * a + 2];
    unsigned int* dst = log_base + (unsigned long long)step * words;
    const unsigned int* from = src + (unsigned long long)env_id * words;
    for (unsigned long long i = first; i < words; i += stride) dst[i] = from[i];
  }
}
