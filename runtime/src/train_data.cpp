// train_data.cpp - what --train makes of its data beyond windows: masked-LM masking.
#include "internal.h"

using kilnrt::user_error;

namespace {
uint64_t next(uint64_t &s) {  // splitmix64
  uint64_t x = (s += 0x9e3779b97f4a7c15ULL);
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}
double uniform(uint64_t &s) { return (double)(next(s) >> 11) * 0x1.0p-53; }
}  // namespace

extern "C" kilnrt_status kilnrt_tokens_mask(const int32_t *ids, int64_t n, int64_t vocab, int64_t mask_token, float rate,
                                            uint64_t seed, int32_t *tokens, int32_t *targets) {
  if (!ids || !tokens || !targets || n < 1) return user_error("kilnrt_tokens_mask: no ids to mask");
  if (vocab < 1 || mask_token < 0 || mask_token >= vocab)
    return user_error("kilnrt_tokens_mask: the mask token " + std::to_string(mask_token) + " is outside the vocabulary [0, " +
                      std::to_string(vocab) + ")");
  if (!(rate > 0 && rate <= 1)) return user_error("kilnrt_tokens_mask: the masked fraction must be in (0, 1]");
  uint64_t s = seed;
  int64_t picked = 0;
  auto pick = [&](int64_t i) {
    targets[i] = ids[i];
    double u = uniform(s);
    tokens[i] = u < 0.8 ? (int32_t)mask_token : u < 0.9 ? (int32_t)(next(s) % (uint64_t)vocab) : ids[i];
    ++picked;
  };
  for (int64_t i = 0; i < n; ++i) {
    tokens[i] = ids[i];
    targets[i] = -1;
    if (uniform(s) < rate) pick(i);
  }
  if (!picked) pick((int64_t)(next(s) % (uint64_t)n));  // a window without a target has no loss
  return KILNRT_OK;
}
