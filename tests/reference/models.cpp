// models.cpp - whole-model references (see models.h).
#include "models.h"

#include <cmath>

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
  KvCache none;
  return gpt2_hf_cached(w, ids, none, layers, heads, pre);
}

T gpt2_hf_cached(Weights &w, const std::vector<int32_t> &ids, KvCache &cache, int64_t layers, int64_t heads,
                 const std::string &pre) {
  auto ln = [&](const T &x, const std::string &n) { return layer_norm(x, w[n + ".weight"], w[n + ".bias"], 1e-5f); };
  auto conv = [&](const T &x, const std::string &n) { return linear(x, w[n + ".weight"], w[n + ".bias"], false); };
  int64_t L = (int64_t)ids.size(), past = cache.k.empty() ? 0 : cache.k[0].shape[0];
  const T &wpe = w[pre + "wpe.weight"];
  T pos({L, wpe.shape[1]});
  for (int64_t r = 0; r < L; ++r)
    for (int64_t c = 0; c < wpe.shape[1]; ++c) pos.at(r, c) = wpe.at(past + r, c);
  T x = add(embedding(w[pre + "wte.weight"], ids), pos);
  int64_t d = x.shape[1];
  cache.k.resize(layers, T({0, d}));
  cache.v.resize(layers, T({0, d}));
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
    T &ck = cache.k[i], &cv = cache.v[i];  // the new rows follow the cached ones
    ck.v.insert(ck.v.end(), k.v.begin(), k.v.end());
    cv.v.insert(cv.v.end(), v.v.begin(), v.v.end());
    ck.shape[0] = cv.shape[0] = past + L;
    x = add(x, conv(mha_core(q, ck, cv, heads, true), p + ".attn.c_proj"));
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

T transformer(Weights &w, const std::vector<int32_t> &src, const std::vector<int32_t> &tgt, int64_t layers, int64_t heads) {
  auto ln = [&](const T &x, const std::string &n) { return layer_norm(x, w[n + ".weight"], w[n + ".bias"], 1e-5f); };
  auto dense = [&](const T &x, const std::string &n) { return linear(x, w[n + ".weight"], w[n + ".bias"], true); };
  // Rows [r0, r0 + n) of a [3d, d] in_proj weight (or of its [3d] bias) as a weight of their own.
  auto part = [&](const std::string &n, int64_t r0, int64_t rows) {
    const T &full = w[n];
    int64_t cols = full.shape.size() == 2 ? full.shape[1] : 1;
    T p(full.shape.size() == 2 ? std::vector<int64_t>{rows, cols} : std::vector<int64_t>{rows});
    for (int64_t i = 0; i < rows * cols; ++i) p.v[i] = full.v[r0 * cols + i];
    return p;
  };
  auto mha = [&](const std::string &p, const T &x, const T &mem, bool causal) {
    int64_t d = x.shape[1];
    auto proj = [&](const T &in, int64_t k) {
      return linear(in, part(p + ".in_proj_weight", k * d, d), part(p + ".in_proj_bias", k * d, d), true);
    };
    return dense(mha_core(proj(x, 0), proj(mem, 1), proj(mem, 2), heads, causal), p + ".out_proj");
  };
  auto ffn = [&](const T &x, const std::string &p) { return dense(relu(dense(x, p + ".linear1")), p + ".linear2"); };
  auto embed = [&](const char *table, const std::vector<int32_t> &ids) {
    T e = embedding(w[table], ids);
    float s = std::sqrt((float)e.shape[1]);
    for (float &f : e.v) f *= s;
    return add(e, sinusoid((int64_t)ids.size(), e.shape[1]));
  };
  T x = embed("src_embed.weight", src);
  for (int64_t i = 0; i < layers; ++i) {
    std::string p = "encoder.layers." + std::to_string(i);
    x = ln(add(x, mha(p + ".self_attn", x, x, false)), p + ".norm1");
    x = ln(add(x, ffn(x, p)), p + ".norm2");
  }
  T memory = ln(x, "encoder.norm");
  T y = embed("tgt_embed.weight", tgt);
  for (int64_t i = 0; i < layers; ++i) {
    std::string p = "decoder.layers." + std::to_string(i);
    y = ln(add(y, mha(p + ".self_attn", y, y, true)), p + ".norm1");
    y = ln(add(y, mha(p + ".multihead_attn", y, memory, false)), p + ".norm2");
    y = ln(add(y, ffn(y, p)), p + ".norm3");
  }
  return dense(ln(y, "decoder.norm"), "generator");
}

}  // namespace ref
