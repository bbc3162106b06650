// Kernels for the executor tests: __syncthreads ordering, __shared__ (static,
// inside a __device__ helper, dynamic), the fast path and 3-D geometry.
// Plain CUDA C: nvcc builds the same file.

#define MAX_BLOCK 1024

// One exact integer sum per block: a shared-memory tree over the next power of
// two >= blockDim.x, skipping partners past the end (any block size works).
extern "C" __global__ void block_sum(const int* in, int* out, int n) {
  __shared__ int partial[MAX_BLOCK];
  const unsigned int t = threadIdx.x;
  const int i = (int)(blockIdx.x * blockDim.x + t);
  partial[t] = i < n ? in[i] : 0;
  __syncthreads();
  unsigned int width = 1;
  while (width < blockDim.x) width <<= 1;
  for (unsigned int s = width / 2; s > 0; s >>= 1) {
    if (t < s && t + s < blockDim.x) partial[t] += partial[t + s];
    __syncthreads();
  }
  if (t == 0) out[blockIdx.x] = partial[0];
}

// A 1-D periodic integer stencil iterated `rounds` times in shared memory: each
// round every thread reads both neighbours, waits, writes its own cell, waits.
// Row b of `in` (blockDim.x values) is handled by block b.
extern "C" __global__ void stencil_rounds(const int* in, int* out, int rounds) {
  __shared__ int cells[MAX_BLOCK];
  const int t = (int)threadIdx.x, n = (int)blockDim.x;
  const int row = (int)blockIdx.x * n;
  cells[t] = in[row + t];
  __syncthreads();
  for (int r = 0; r < rounds; ++r) {
    const int left = cells[(t + n - 1) % n];
    const int right = cells[(t + 1) % n];
    const int self = cells[t];
    __syncthreads();
    cells[t] = (left + 2 * self + 3 * right + r) % 10007;
    __syncthreads();
  }
  out[row + t] = cells[t];
}

// Barriers with a predicate: count / and / or over the block, per block.
extern "C" __global__ void sync_predicates(const int* flags, int* out) {
  const int i = (int)(blockIdx.x * blockDim.x + threadIdx.x);
  const int p = flags[i];
  const int count = __syncthreads_count(p);
  const int all = __syncthreads_and(p);
  const int any = __syncthreads_or(p);
  if (threadIdx.x == 0) {
    out[3 * blockIdx.x + 0] = count;
    out[3 * blockIdx.x + 1] = all;
    out[3 * blockIdx.x + 2] = any;
  }
}

// A __shared__ variable inside a __device__ helper: one instance per block.
// Blocks 2k and 2k+1 meet (a bounded wait on arrived[k]) after both wrote their
// tag and before either reads it back, so two blocks running at the same time
// would see each other's value if the variable were shared between them.
__device__ int block_tag(int value, int* arrived, long long max_polls) {
  __shared__ int tag;
  if (threadIdx.x == 0) {
    tag = value;
    int* pair = arrived + blockIdx.x / 2;
    atomicAdd(pair, 1);
    volatile int* count = pair;
    for (long long polls = 0; *count < 2 && polls < max_polls; ++polls) {
    }
  }
  __syncthreads();
  const int seen = tag;
  __syncthreads();
  return seen;
}

extern "C" __global__ void shared_in_helper(int* out, int* arrived, long long max_polls) {
  const int seen = block_tag((int)blockIdx.x, arrived, max_polls);
  out[blockIdx.x * blockDim.x + threadIdx.x] = seen;
}

// Dynamic shared memory (sized by the launch): reverse each block's row.
extern "C" __global__ void dynamic_reverse(const float* in, float* out) {
  extern __shared__ float dyn[];
  const int t = (int)threadIdx.x, n = (int)blockDim.x;
  const int row = (int)blockIdx.x * n;
  dyn[t] = in[row + t];
  __syncthreads();
  out[row + t] = dyn[n - 1 - t];
}

// No barrier at all: every block runs on the plain fast path.
extern "C" __global__ void scale_plain(const float* in, float* out, float factor, int n) {
  const int i = (int)(blockIdx.x * blockDim.x + threadIdx.x);
  if (i < n) out[i] = in[i] * factor;
}

// Thread 0 reaches a barrier: the block runs with fibers.
extern "C" __global__ void rotate_with_barrier(const float* in, float* out, int n) {
  __shared__ float s[MAX_BLOCK];
  const int t = (int)threadIdx.x;
  const int i = (int)(blockIdx.x * blockDim.x) + t;
  s[t] = i < n ? in[i] : 0.0f;
  __syncthreads();
  const int j = (t + 1) % (int)blockDim.x;
  if (i < n) out[i] = s[j];
}

// Whether a block uses a barrier depends on the block (legal: the condition is
// uniform within each block): odd blocks run with fibers, even ones plainly.
extern "C" __global__ void mixed_paths(int* out) {
  __shared__ int s[MAX_BLOCK];
  const int t = (int)threadIdx.x, n = (int)blockDim.x;
  s[t] = (int)blockIdx.x * 1000 + t;
  int v;
  if (blockIdx.x % 2 == 1) {
    __syncthreads();
    v = s[(t + 1) % n];
  } else {
    v = s[t];
  }
  out[blockIdx.x * blockDim.x + threadIdx.x] = v;
}

// Every thread writes its 12 built-in indices; with `sync` it does so after a
// barrier (so the indices must survive a fiber switch).
extern "C" __global__ void write_indices(int* out, int sync) {
  if (sync) __syncthreads();
  const unsigned int tid = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
  const unsigned int bid = blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);
  const unsigned int nthreads = blockDim.x * blockDim.y * blockDim.z;
  int* o = out + 12 * (bid * nthreads + tid);
  if (sync) __syncthreads();
  o[0] = (int)threadIdx.x;
  o[1] = (int)threadIdx.y;
  o[2] = (int)threadIdx.z;
  o[3] = (int)blockIdx.x;
  o[4] = (int)blockIdx.y;
  o[5] = (int)blockIdx.z;
  o[6] = (int)blockDim.x;
  o[7] = (int)blockDim.y;
  o[8] = (int)blockDim.z;
  o[9] = (int)gridDim.x;
  o[10] = (int)gridDim.y;
  o[11] = (int)gridDim.z;
}

// Atomics and barriers together: a per-block histogram in shared memory,
// merged into the global one; each block also records its maximum value.
extern "C" __global__ void histogram(const int* values, int n, int* bins, int nbins, int* block_max, int* total) {
  __shared__ int local[64];
  __shared__ int local_max;
  for (int b = (int)threadIdx.x; b < nbins; b += (int)blockDim.x) local[b] = 0;
  if (threadIdx.x == 0) local_max = -1;
  __syncthreads();
  const int stride = (int)(gridDim.x * blockDim.x);
  for (int i = (int)(blockIdx.x * blockDim.x + threadIdx.x); i < n; i += stride) {
    atomicAdd(&local[values[i] % nbins], 1);
    atomicMax(&local_max, values[i]);
  }
  __syncthreads();
  for (int b = (int)threadIdx.x; b < nbins; b += (int)blockDim.x) {
    if (local[b] != 0) atomicAdd(&bins[b], local[b]);
  }
  if (threadIdx.x == 0) {
    block_max[blockIdx.x] = local_max;
    atomicAdd(total, 1);
  }
}

// Thread 0 of every block announces itself, then polls (boundedly) until all
// blocks have: saw_all[b] is 1 only when the blocks ran at the same time.
extern "C" __global__ void rendezvous(int* arrived, int* saw_all, long long max_polls) {
  if (threadIdx.x != 0) return;
  atomicAdd(arrived, 1);
  volatile int* count = arrived;
  long long polls = 0;
  while (*count < (int)gridDim.x && polls < max_polls) ++polls;
  saw_all[blockIdx.x] = *count >= (int)gridDim.x ? 1 : 0;
}

// Every thread gets the number of threads in its block from a barrier count.
extern "C" __global__ void count_all(int* out) {
  out[blockIdx.x * blockDim.x + threadIdx.x] = __syncthreads_count(1);
}

// Writes one element past the end of a buffer of n floats (for the sanitizer test).
extern "C" __global__ void write_past_end(float* x, int n) {
  if (threadIdx.x == 0) x[n] = 1.0f;  // OUT OF BOUNDS
}
