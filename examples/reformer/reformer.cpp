// examples/reformer: a Reformer encoder (Kitaev et al., 2020) in the kiln DSL.
//
// Token embeddings plus sinusoidal positions, duplicated into the two halves of a reversible
// stack: each layer is reversible(F, G) with F = layer norm + LSH self-attention (shared QK,
// several hash rounds) + output projection, and G = layer norm + FFN, which kiln-chunk-ffn
// runs over chunks of rows. The output `hidden` [L, d] is the layer norm of the halves' mean.
//
// Parameter names: tok_embed.weight [vocab, d], layers.{i}.attn.{norm,qk,v,out}.*,
//   layers.{i}.attn.rotations [hashes, d / heads, buckets / 2] (random normal; saved and loaded
//   like any weight), layers.{i}.ffn.{norm,fc1,fc2}.*, norm.*
//
//   build/bin/reformer-compile -o reformer          # 4 layers, d 256, 4 heads, L up to 65536
//   ./reformer --random-weights --input tokens=ids.npy
#include <cmath>

#include "kiln/Driver/Driver.h"
#include "kiln/dsl/Blocks.h"

struct ReformerConfig {
  int64_t layers = 4, d_model = 256, heads = 4, vocab = 256, ctx = 65536, buckets = 64, hashes = 2, chunk = 64;
  bool causal = false;
};

static void build_reformer(kiln::Model &m, const ReformerConfig &c) {
  using namespace kiln;
  const int64_t d = c.d_model, hd = c.heads > 0 ? d / c.heads : 0;
  if (c.layers < 1 || d <= 0 || c.heads <= 0 || d % c.heads)
    throw Error("reformer: --d-model (" + std::to_string(d) + ") must be a positive multiple of --heads (" +
                    std::to_string(c.heads) + ") and --layers at least 1",
                SourceLoc::current());
  Dim L = m.seq("L", c.ctx);
  Tensor tokens = m.tokens("tokens", L, c.vocab);
  Tensor e = add(scale(embedding(m.param("tok_embed.weight", {c.vocab, d}, {.scale = 1.0f / std::sqrt((float)d)}), tokens),
                       std::sqrt((float)d)),
                 sinusoidal_positions(tokens, d));
  Tensor x = concat({e, e}, 1);
  for (int64_t i = 0; i < c.layers; ++i) {
    std::string p = "layers." + std::to_string(i);
    Tensor rot = m.param(p + ".attn.rotations", {c.hashes, hd, c.buckets / 2}, {.scale = 1.0f});
    auto F = [&](Tensor h) {
      Tensor n = norm(m, p + ".attn.norm", h);
      Tensor qk = split_heads(dense(m, p + ".attn.qk", n, d, d), c.heads), v = split_heads(dense(m, p + ".attn.v", n, d, d), c.heads);
      Tensor a = lsh_attention(qk, v, rot, {.buckets = c.buckets, .hashes = c.hashes, .chunk = c.chunk, .causal = c.causal});
      return dense(m, p + ".attn.out", merge_heads(a), d, d);
    };
    auto G = [&](Tensor h) {
      return dense(m, p + ".ffn.fc2", gelu(dense(m, p + ".ffn.fc1", norm(m, p + ".ffn.norm", h), d, 4 * d)), 4 * d, d);
    };
    x = reversible(x, F, G);
  }
  std::vector<Tensor> halves = split(x, 1, {d, d});
  m.output("hidden", norm(m, "norm", scale(add(halves[0], halves[1]), 0.5f)));
}

int main(int argc, char **argv) {
  kiln::Driver driver("reformer", "reformer-compile: compile a Reformer encoder (LSH attention, reversible layers) with kiln");
  ReformerConfig c;
  CLI::App &app = driver.app();
  app.add_option("--layers", c.layers, "reversible layers")->capture_default_str();
  app.add_option("--d-model", c.d_model, "model width")->capture_default_str();
  app.add_option("--heads", c.heads, "attention heads")->capture_default_str();
  app.add_option("--vocab", c.vocab, "vocabulary size")->capture_default_str();
  app.add_option("--ctx", c.ctx, "maximum sequence length (compiled bound)")->capture_default_str();
  app.add_option("--buckets", c.buckets, "LSH buckets per round (even)")->capture_default_str();
  app.add_option("--hashes", c.hashes, "LSH hash rounds")->capture_default_str();
  app.add_option("--chunk", c.chunk, "LSH chunk of sorted positions (each attends to its own and the previous)")
      ->capture_default_str();
  app.add_flag("--causal", c.causal, "causal LSH attention (a decoder)");
  return driver.run(argc, argv, [&](kiln::Model &m) { build_reformer(m, c); });
}
