// models.h - whole-model references built from the plain-loop ops, with parameters by name
// exactly as kiln's DSL blocks name them.
#pragma once
#include <map>

#include "reference.h"

namespace ref {
using Weights = std::map<std::string, T>;

struct BlockCfg {
  int64_t heads;
  bool pre_norm, causal, out_in, tanh_gelu;
  float eps;
};
// kiln::transformer_block with prefix `p`.
T block(Weights &w, const std::string &p, T x, const BlockCfg &c);
// The GPT-2-style decoder of examples/gpt2: learned positions, pre-norm blocks "h.<i>",
// final norm "ln_f", output head tied to "wte".
T gpt2(Weights &w, const std::vector<int32_t> &ids, int64_t layers, int64_t heads);
// examples/gpt2 with Hugging Face names: "<prefix>wte.weight", "<prefix>h.<i>.attn.c_attn.*"
// (packed q, k, v; [d, 3d] applied as x·W), ..., "<prefix>ln_f.*"; head tied to wte.
T gpt2_hf(Weights &w, const std::vector<int32_t> &ids, int64_t layers, int64_t heads, const std::string &prefix);
// Keys and values per layer, [positions, d] (heads side by side, as mha_core reads them).
struct KvCache {
  std::vector<T> k, v;
};
// gpt2_hf over `ids` at positions [past, past + n), past = the rows already in `cache` (empty:
// 0), attending to the cached rows too; appends the new keys and values to `cache`.
T gpt2_hf_cached(Weights &w, const std::vector<int32_t> &ids, KvCache &cache, int64_t layers, int64_t heads,
                 const std::string &prefix);
// examples/bert with Hugging Face names under `prefix` ("bert." or "").
T bert_hf(Weights &w, const std::vector<int32_t> &ids, const std::vector<int32_t> &types, int64_t layers, int64_t heads,
          const std::string &prefix);
// examples/transformer (torch.nn.Transformer layout, post-norm, ReLU, sinusoidal positions).
T transformer(Weights &w, const std::vector<int32_t> &src, const std::vector<int32_t> &tgt, int64_t layers, int64_t heads);
}  // namespace ref
