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

T gpt2_hf(Weights &w, const std::vector<int32_t> &ids, int64_t layers, int64_t heads, const std::string &pre) {
  auto ln = [&](const T &x, const std::string &n) { return layer_norm(x, w[n + ".weight"], w[n + ".bias"], 1e-5f); };
  auto conv = [&](const T &x, const std::string &n) { return linear(x, w[n + ".weight"], w[n + ".bias"], false); };
  int64_t L = (int64_t)ids.size();
  T x = add(embedding(w[pre + "wte.weight"], ids), rows(w[pre + "wpe.weight"], L));
  int64_t d = x.shape[1];
  for (int64_t i = 0; i < layers; ++i) {
    std::string p = pre + "h." + std::to_string(i);
    T qkv = conv(ln(x, p + ".ln_1"), p + ".attn.c_attn");
    T q({L, d}), k({L, d}), v({L, d});
    for (int64_t r = 0; r < L; ++r)
      for (int64_t c = 0; c < d; ++c) {
        q.at(r, c) = qkv.at(r, c);
        k.at(r, c) = qkv.at(r, d + c);
        v.at(r, c) = qkv.at(r, 2 * d + c);
      }
    x = add(x, conv(mha_core(q, k, v, heads, true), p + ".attn.c_proj"));
    x = add(x, conv(gelu_tanh(conv(ln(x, p + ".ln_2"), p + ".mlp.c_fc")), p + ".mlp.c_proj"));
  }
  return linear(ln(x, pre + "ln_f"), w[pre + "wte.weight"], {}, true);
}

T bert_hf(Weights &w, const std::vector<int32_t> &ids, const std::vector<int32_t> &types, int64_t layers, int64_t heads,
          const std::string &pre) {
  auto ln = [&](const T &x, const std::string &n) { return layer_norm(x, w[n + ".weight"], w[n + ".bias"], 1e-12f); };
  auto dense = [&](const T &x, const std::string &n) { return linear(x, w[n + ".weight"], w[n + ".bias"], true); };
  std::string e = pre + "embeddings.";
  T x = add(add(embedding(w[e + "word_embeddings.weight"], ids), rows(w[e + "position_embeddings.weight"], (int64_t)ids.size())),
            embedding(w[e + "token_type_embeddings.weight"], types));
  x = ln(x, e + "LayerNorm");
  for (int64_t i = 0; i < layers; ++i) {
    std::string p = pre + "encoder.layer." + std::to_string(i);
    std::string s = p + ".attention.self.";
    T a = mha_core(dense(x, s + "query"), dense(x, s + "key"), dense(x, s + "value"), heads, false);
    x = ln(add(x, dense(a, p + ".attention.output.dense")), p + ".attention.output.LayerNorm");
    x = ln(add(x, dense(gelu_erf(dense(x, p + ".intermediate.dense")), p + ".output.dense")), p + ".output.LayerNorm");
  }
  return x;
}

}  // namespace ref
