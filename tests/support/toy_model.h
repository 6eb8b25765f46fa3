// toy_model.h - a hand-written model table for runtime tests and the command-line fuzzer: one
// token input of length L <= 8 (vocab 10), one parameter "w" [4] (init ones) and an output
// [L] = ids + w[0], computed by a plain C entry. No compiler involved.
#pragma once
#include "kilnrt/api.h"

namespace toy {
inline int32_t entry(void **bufs, const int64_t *syms, int32_t *) {
  const float *w = (const float *)bufs[0];
  const int32_t *ids = (const int32_t *)bufs[1];
  float *out = (float *)bufs[2];
  for (int64_t i = 0; i < syms[0]; ++i) out[i] = ids[i] + w[0];
  return 0;
}
inline const char *const kSyms[] = {"L"};
inline const int64_t kMax[] = {8};
inline const kiln_tensor_info kParams[] = {{"w", KILN_F32, 1, {{4, -1}}, 0, KILN_INIT_ONES, 0}};
inline const kiln_tensor_info kIo[] = {{"tokens", KILN_I32, 1, {{8, 0}}, 10, 0, 0},
                                       {"out", KILN_F32, 1, {{8, 0}}, 0, 0, 0}};
inline const int32_t kIn[] = {0}, kOut[] = {1};
inline const kiln_buffer_info kBufs[] = {{4, {1, 0, 0, 0}, 0, 0}};
inline const char *const kKernels[] = {"copy"};
inline const kiln_entry_info kEntries[] = {{"forward", entry, 1, 1, kIn, kOut, 1, kBufs, 1, kKernels}};
inline const kiln_model_info kModel = {KILN_ABI_VERSION, "toy", "0", "h", "t", "", 1, kSyms, kMax, 1, kParams,
                                       2, kIo, 1, kEntries, "", 0, nullptr};
}  // namespace toy
