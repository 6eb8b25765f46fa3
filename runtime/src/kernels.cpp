// kernels.cpp - kernels the runtime serves itself, for work Halide cannot express: they take
// halide_buffer_t views like the generated kernels and return 0 or a nonzero error code.
#include <HalideRuntime.h>

#include <algorithm>
#include <cstdint>
#include <vector>

// The stable counting sort of LSH attention. buckets (i, r, h): the bucket of position i in
// hash round r of head h; out (p, k, r, h): k = 0, the position at sorted slot p (by bucket,
// then position); k = 1, the slot of position p. Linear in L per round.
extern "C" int32_t kilnrt_kernel_lsh_sort(halide_buffer_t *buckets, halide_buffer_t *out) {
  const int L = buckets->dim[0].extent, R = buckets->dim[1].extent, H = buckets->dim[2].extent;
  std::vector<int32_t> start;
  for (int h = 0; h < H; ++h)
    for (int r = 0; r < R; ++r) {
      const int32_t *b = (const int32_t *)buckets->host + (int64_t)r * buckets->dim[1].stride + (int64_t)h * buckets->dim[2].stride;
      int32_t *order = (int32_t *)out->host + (int64_t)r * out->dim[2].stride + (int64_t)h * out->dim[3].stride;
      int32_t *slot = order + out->dim[1].stride;
      int32_t nb = 0;
      for (int i = 0; i < L; ++i) {
        if (b[i] < 0) return 1;  // buckets come from an argmax: never negative
        nb = std::max(nb, b[i] + 1);
      }
      start.assign(nb + 1, 0);
      for (int i = 0; i < L; ++i) ++start[b[i] + 1];
      for (int k = 0; k < nb; ++k) start[k + 1] += start[k];
      for (int i = 0; i < L; ++i) {
        int32_t p = start[b[i]]++;
        order[p] = i;
        slot[i] = p;
      }
    }
  return 0;
}
