// kilnrt arena planning: place the buffers of one entry point in one allocation.
//
// The compiler records each intermediate buffer's size as a monomial in the sequence lengths and
// the kernels over which it is live; sizes are only known at start-up, so placement happens here:
//   1. size every buffer from the symbol values, rejecting overflow; 128-byte rounded, so every
//      offset suits an OpenCL sub-buffer (devices ask for up to 128-byte aligned origins);
//   2. visit buffers largest first; place each at the lowest offset where it overlaps no
//      already-placed buffer whose live range intersects its own (first fit);
//   3. the arena is the highest end offset.
#include <algorithm>
#include <numeric>
#include <vector>
#include "internal.h"

using namespace kilnrt;

extern "C" kilnrt_status kilnrt_arena_plan(const kiln_buffer_info *buffers, int32_t n, const int64_t *syms,
                                           int64_t *offsets, int64_t *total_bytes) {
  std::vector<int64_t> size(n);
  for (int i = 0; i < n; ++i) {
    __int128 b = buffers[i].static_bytes;
    for (int s = 0; s < KILN_MAX_SYMS; ++s)
      for (int p = 0; p < buffers[i].sym_pow[s]; ++p) b *= syms[s];
    b = (b + 127) / 128 * 128;
    if (b < 0 || b > ((__int128)1 << 46)) return user_error("arena buffer " + std::to_string(i) + " would need " +
                                                            "more than 64 TiB: sequence length too large");
    size[i] = (int64_t)b;
  }
  std::vector<int> order(n);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return size[a] > size[b]; });
  std::vector<int> placed;
  int64_t total = 0;
  for (int i : order) {
    std::vector<std::pair<int64_t, int64_t>> busy;
    for (int j : placed)
      if (buffers[j].first <= buffers[i].last && buffers[i].first <= buffers[j].last)
        busy.push_back({offsets[j], offsets[j] + size[j]});
    std::sort(busy.begin(), busy.end());
    int64_t off = 0;
    for (auto &[b, e] : busy) {
      if (off + size[i] <= b) break;
      off = std::max(off, e);
    }
    offsets[i] = off;
    total = std::max(total, off + size[i]);
    placed.push_back(i);
  }
  *total_bytes = total;
  return KILNRT_OK;
}
