// examples/transformer: the encoder-decoder Transformer of "Attention Is All You Need" in the
// kiln DSL, reading a torch.nn.Transformer state_dict layout.
//
// Embeddings scaled by sqrt(d) plus sinusoidal positions; post-norm encoder layers
// (self-attention, ReLU FFN) and decoder layers (causal self-attention, cross-attention over the
// encoder output, ReLU FFN); final encoder.norm and decoder.norm; a linear generator.
// Inputs `src_tokens` [S], `tgt_tokens` [T]; output `logits` [T, tgt_vocab].
//
// Parameter names (torch.nn.Transformer's, plus three of kiln's):
//   src_embed.weight [src_vocab, d], tgt_embed.weight [tgt_vocab, d], generator.{weight,bias}
//   encoder.layers.{i}.self_attn.{in_proj_weight [3d, d], in_proj_bias, out_proj.weight, out_proj.bias}
//   encoder.layers.{i}.{linear1,linear2,norm1,norm2}.{weight,bias}, encoder.norm.{weight,bias}
//   decoder.layers.{i}.{self_attn,multihead_attn}.* as above, {linear1,linear2,norm1,norm2,norm3}.*
//   decoder.norm.{weight,bias}
//
//   build/bin/transformer-compile --layers 2 --d-model 64 --heads 4 --d-ff 128 --src-vocab 300 \
//       --tgt-vocab 300 --ctx 64 -o transformer
//   ./transformer --random-weights --tokens src_tokens=5,6,7 --tokens tgt_tokens=1,8
#include <cmath>

#include "kiln/Pipelines/Driver.h"
#include "kiln/dsl/Ops.h"

struct TransformerConfig {
  int64_t layers = 6, d_model = 512, heads = 8, d_ff = 2048, src_vocab = 32000, tgt_vocab = 32000, ctx = 256;
};

static void build_transformer(kiln::Model &m, const TransformerConfig &c) {
  using namespace kiln;
  const int64_t d = c.d_model;
  if (c.layers < 1 || d <= 0 || c.heads <= 0 || d % c.heads || d % 2)
    throw Error("transformer: --d-model (" + std::to_string(d) + ") must be an even positive multiple of --heads (" +
                    std::to_string(c.heads) + ") and --layers at least 1",
                SourceLoc::current());
  auto vec = [&](const std::string &n, int64_t size, Init init) { return m.param(n, {size}, {.init = init}); };
  auto norm = [&](const std::string &p, Tensor x) {
    return layer_norm(x, vec(p + ".weight", d, Init::Ones), vec(p + ".bias", d, Init::Zeros), {.eps = 1e-5f});
  };
  auto dense = [&](const std::string &p, Tensor x, int64_t in, int64_t out) {  // nn.Linear: x·Wᵀ + b
    return linear(x, m.param(p + ".weight", {out, in}), vec(p + ".bias", out, Init::Zeros));
  };
  // nn.MultiheadAttention: in_proj_weight [3d, d] holds W_q, W_k, W_v stacked by rows.
  auto mha = [&](const std::string &p, Tensor x, Tensor mem, bool causal) {
    Tensor w = m.param(p + ".in_proj_weight", {3 * d, d});
    Tensor b = vec(p + ".in_proj_bias", 3 * d, Init::Zeros);
    Tensor q, k, v;
    if (mem.id() == x.id()) {
      std::vector<Tensor> qkv = split(linear(x, w, b), 1, {d, d, d});
      q = qkv[0], k = qkv[1], v = qkv[2];
    } else {
      q = linear(x, slice(w, 0, 0, d), slice(b, 0, 0, d));
      std::vector<Tensor> kv = split(linear(mem, slice(w, 0, d, 2 * d), slice(b, 0, d, 2 * d)), 1, {d, d});
      k = kv[0], v = kv[1];
    }
    Tensor a = attention(split_heads(q, c.heads), split_heads(k, c.heads), split_heads(v, c.heads),
                         {.mask = causal ? Mask::causal() : Mask::none()});
    return dense(p + ".out_proj", merge_heads(a), d, d);
  };
  auto ffn = [&](const std::string &p, Tensor x) {
    return dense(p + ".linear2", relu(dense(p + ".linear1", x, d, c.d_ff)), c.d_ff, d);
  };
  auto embed = [&](const char *table, int64_t vocab, Tensor tokens) {
    Tensor e = scale(embedding(m.param(table, {vocab, d}, {.scale = 1.0f / std::sqrt((float)d)}), tokens),
                     std::sqrt((float)d));
    return add(e, sinusoidal_positions(tokens, d));
  };
  Dim S = m.seq("S", c.ctx), T = m.seq("T", c.ctx);
  Tensor src = m.tokens("src_tokens", S, c.src_vocab), tgt = m.tokens("tgt_tokens", T, c.tgt_vocab);
  Tensor x = embed("src_embed.weight", c.src_vocab, src);
  for (int64_t i = 0; i < c.layers; ++i) {
    std::string p = "encoder.layers." + std::to_string(i);
    x = norm(p + ".norm1", add(x, mha(p + ".self_attn", x, x, false)));
    x = norm(p + ".norm2", add(x, ffn(p, x)));
  }
  Tensor memory = norm("encoder.norm", x);
  Tensor y = embed("tgt_embed.weight", c.tgt_vocab, tgt);
  for (int64_t i = 0; i < c.layers; ++i) {
    std::string p = "decoder.layers." + std::to_string(i);
    y = norm(p + ".norm1", add(y, mha(p + ".self_attn", y, y, true)));
    y = norm(p + ".norm2", add(y, mha(p + ".multihead_attn", y, memory, false)));
    y = norm(p + ".norm3", add(y, ffn(p, y)));
  }
  m.output("logits", dense("generator", norm("decoder.norm", y), d, c.tgt_vocab));
}

int main(int argc, char **argv) {
  kiln::Driver driver("transformer", "transformer-compile: compile an encoder-decoder Transformer with kiln");
  TransformerConfig c;
  CLI::App &app = driver.app();
  app.add_option("--layers", c.layers, "encoder and decoder layers")->capture_default_str();
  app.add_option("--d-model", c.d_model, "model width")->capture_default_str();
  app.add_option("--heads", c.heads, "attention heads")->capture_default_str();
  app.add_option("--d-ff", c.d_ff, "FFN width")->capture_default_str();
  app.add_option("--src-vocab", c.src_vocab, "source vocabulary")->capture_default_str();
  app.add_option("--tgt-vocab", c.tgt_vocab, "target vocabulary")->capture_default_str();
  app.add_option("--ctx", c.ctx, "maximum source and target length (compiled bound)")->capture_default_str();
  return driver.run(argc, argv, [&](kiln::Model &m) { build_transformer(m, c); });
}
