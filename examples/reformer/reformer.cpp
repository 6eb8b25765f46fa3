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
  bool causal = false, train = false;
  std::string attention = "lsh";
  float lr = 1e-3f;
  int64_t warmup = 0;
};

static void build_reformer(kiln::Model &m, const ReformerConfig &c) {
  using namespace kiln;
  const int64_t d = c.d_model, hd = c.heads > 0 ? d / c.heads : 0;
  if (c.layers < 1 || d <= 0 || c.heads <= 0 || d % c.heads)
    throw Error("reformer: --d-model (" + std::to_string(d) + ") must be a positive multiple of --heads (" +
                    std::to_string(c.heads) + ") and --layers at least 1",
                SourceLoc::current());
  if (c.train && !c.causal)
    throw Error("reformer: --train trains a language model (each position predicts the next token): add --causal",
                SourceLoc::current());
  const bool lsh = c.attention == "lsh";
  Dim L = m.seq("L", c.ctx);
  // The stack: tokens [n] -> hidden [n, d].
  auto table = [&] { return m.param("tok_embed.weight", {c.vocab, d}, {.scale = 1.0f / std::sqrt((float)d)}); };
  auto encoder = [&](Tensor table, Tensor tokens) {
    Tensor e = add(scale(embedding(table, tokens), std::sqrt((float)d)),
                   sinusoidal_positions(tokens, d));
    Tensor x = concat({e, e}, 1);
    for (int64_t i = 0; i < c.layers; ++i) {
      std::string p = "layers." + std::to_string(i);
      Tensor rot = lsh ? m.param(p + ".attn.rotations", {c.hashes, hd, c.buckets / 2}, {.scale = 1.0f}) : Tensor();
      auto F = [&](Tensor h) {
        Tensor n = norm(m, p + ".attn.norm", h);
        if (!lsh)
          return multi_head_attention(m, p + ".attn", n, n,
                                      {.d_model = d, .heads = c.heads, .mask = c.causal ? Mask::causal() : Mask()});
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
    return norm(m, "norm", scale(add(halves[0], halves[1]), 0.5f));
  };
  m.output("hidden", encoder(table(), m.tokens("tokens", L, c.vocab)));
  // --train: a language model over the stack, its head tied to the token embedding.
  // `gradients`: the mean cross-entropy of the next tokens (`targets`, -1 where a position has
  // none) and every parameter's gradient; `eval`, the loss alone; `train_step`, AdamW (--train-lr,
  // --train-warmup). Their backward reconstructs each reversible layer's input from its output
  // (kiln-reverse-layers; --reversible-backward store keeps the activations instead).
  if (!c.train) return;
  auto nextTokenLoss = [&](EntryRole) {
    Tensor t = m.tokens("tokens", L, c.vocab);
    Tensor targets = m.targets("targets", L, c.vocab);
    Tensor w = table();
    m.loss(cross_entropy(linear(encoder(w, t), w), targets));
  };
  training_entries(m, nextTokenLoss,
                   {.optimizer = AdamW{.lr = c.lr, .beta1 = 0.9f, .beta2 = 0.98f, .eps = 1e-9f, .weight_decay = 0.0f},
                    .clip_norm = 1.0f,
                    .warmup_steps = c.warmup});
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
  app.add_flag("--causal", c.causal, "causal attention (a decoder)");
  app.add_option("--attention", c.attention, "F's attention: lsh (shared QK, hashed buckets) or full (dense, separate Q, K, V)")
      ->check(CLI::IsMember({"lsh", "full"}))
      ->capture_default_str();
  app.add_flag("--train", c.train,
               "add the training entries (with --causal): `gradients`, `eval` and `train_step` (AdamW; ./model --train)");
  app.add_option("--train-lr", c.lr, "--train: the peak learning rate")->capture_default_str();
  app.add_option("--train-warmup", c.warmup, "--train: linear warmup steps")->capture_default_str();
  return driver.run(argc, argv, [&](kiln::Model &m) { build_reformer(m, c); });
}
