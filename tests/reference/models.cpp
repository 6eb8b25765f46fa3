// models.cpp - whole-model references (see models.h).
#include "models.h"

namespace ref {

T block(Weights &w, const std::string &p, T x, const BlockCfg &c) {
  auto lin = [&](const T &in, const std::string &n) { return linear(in, w[n + ".weight"], w[n + ".bias"], c.out_in); };
  auto ln = [&](const T &in, const std::string &n) { return layer_norm(in, w[n + ".weight"], w[n + ".bias"], c.eps); };
  auto attn = [&](const T &in) {
    return lin(mha_core(lin(in, p + ".attn.q"), lin(in, p + ".attn.k"), lin(in, p + ".attn.v"), c.heads, c.causal),
               p + ".attn.out");
  };
  auto ffn = [&](const T &in) {
    T h = lin(in, p + ".mlp.fc1");
    return lin(c.tanh_gelu ? gelu_tanh(h) : gelu_erf(h), p + ".mlp.fc2");
  };
  if (c.pre_norm) {
    x = add(x, attn(ln(x, p + ".ln_1")));
    return add(x, ffn(ln(x, p + ".ln_2")));
  }
  x = ln(add(x, attn(x)), p + ".ln_1");
  return ln(add(x, ffn(x)), p + ".ln_2");
}

T gpt2(Weights &w, const std::vector<int32_t> &ids, int64_t layers, int64_t heads) {
  T x = add(embedding(w["wte"], ids), rows(w["wpe"], (int64_t)ids.size()));
  for (int64_t i = 0; i < layers; ++i)
    x = block(w, "h." + std::to_string(i), x, {heads, true, true, false, true, 1e-5f});
  x = layer_norm(x, w["ln_f.weight"], w["ln_f.bias"], 1e-5f);
  return linear(x, w["wte"], {}, true);
}

}  // namespace ref
