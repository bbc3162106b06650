// Reads back what <warp_drive/neighbors.h> decides, for tests/env/test_neighbors.py.
#include <warp_drive/neighbors.h>

extern "C" __global__ void NeighborsProbe(const int* num_agents, const int* ks, int* scratch_words, int* sides,
                                          int count) {
  const int i = wd_global_thread_id();
  if (i >= count) return;
  scratch_words[i] = (int)wd_grid_scratch_words(num_agents[i]);
  sides[i] = wd_grid_side(num_agents[i], ks[i]);
}
