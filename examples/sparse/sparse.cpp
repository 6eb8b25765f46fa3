// examples/sparse: a Sparse Transformer decoder (Child et al., 2019) in the kiln DSL.
//
// Pre-norm blocks with factorized causal attention, GELU FFN, learned positions and an output
// head. The two factorized patterns are the paper's:
//   strided (--stride s): local, the previous s positions; global, every s-th position before;
//   fixed (--stride c --summary t): local, the query's own block of c; global, the last t
//   positions of every block.
// --pattern window (the last --stride positions) and --pattern layout (--layout's block rows)
// are single patterns; --pattern causal is dense causal attention, the same decoder to compare
// with. For the factorized two, --combine picks one of the paper's three ways
// to use the two halves:
//   alternate  layer i attends with the local half when i is even, the global half when odd;
//   merged     every head attends to the union (one merged head; kiln merges the two block
//              schedules by log-sum-exp inside one kernel);
//   heads      half of the heads attend with each half.
// kiln-tile-sparse-pattern turns each into block schedules whose work follows the allowed
// entries (the schedule files draw the block matrices).
//
// Parameter names: tok_embed.weight [vocab, d], pos_embed.weight [ctx, d],
//   layers.{i}.ln1.*, layers.{i}.attn.qkv.{weight [3d, d], bias}, layers.{i}.attn.proj.*,
//   layers.{i}.ln2.*, layers.{i}.mlp.fc1.*, layers.{i}.mlp.fc2.*, ln_f.*, head.weight [vocab, d]
//
//   build/bin/sparse-compile --combine merged -o sparse     # 4 layers, d 256, 8 heads, ctx 8192
//   ./sparse --random-weights --tokens 1,2,3
#include "kiln/Driver/Driver.h"
#include "kiln/dsl/Blocks.h"

struct SparseConfig {
  int64_t layers = 4, d_model = 256, heads = 8, vocab = 256, ctx = 8192, stride = 128, summary = 8, batch = 1;
  std::string pattern = "strided", combine = "merged", layout;
  bool train = false, noncausal = false;
  float lr = 1e-3f;
  int64_t warmup = 0;
};

static void build_sparse(kiln::Model &m, const SparseConfig &c) {
  using namespace kiln;
  const int64_t d = c.d_model;
  if (c.layers < 1 || d <= 0 || c.heads <= 0 || d % c.heads)
    throw Error("sparse: --d-model (" + std::to_string(d) + ") must be a positive multiple of --heads (" +
                    std::to_string(c.heads) + ") and --layers at least 1",
                SourceLoc::current());
  if (c.combine == "heads" && c.heads % 2)
    throw Error("sparse: --combine heads splits the heads in two halves; --heads " + std::to_string(c.heads) + " is odd",
                SourceLoc::current());
  const bool factorized = c.pattern == "strided" || c.pattern == "fixed";
  if (!factorized && c.combine != "merged")
    throw Error("sparse: --combine " + c.combine + " combines the halves of a factorized pattern (strided, fixed); --pattern " +
                    c.pattern + " has one",
                SourceLoc::current());
  if ((c.pattern == "layout") != !c.layout.empty() || (c.noncausal && c.pattern != "layout"))
    throw Error("sparse: --layout (and --noncausal) go with --pattern layout, which needs them", SourceLoc::current());
  std::vector<std::string> rows;
  for (size_t a = 0; a <= c.layout.size() && !c.layout.empty();) {
    size_t b = c.layout.find(',', a);
    if (b == std::string::npos) b = c.layout.size();
    rows.push_back(c.layout.substr(a, b - a));
    a = b + 1;
  }
  auto half = [&](Part part) {
    if (c.pattern == "causal") return Mask::causal();
    if (c.pattern == "window") return Mask::window(c.stride);
    if (c.pattern == "layout") return Mask::block_layout({.block = c.stride, .rows = rows, .causal = !c.noncausal});
    return c.pattern == "strided" ? Mask::strided({.stride = c.stride, .part = part})
                                  : Mask::fixed({.block = c.stride, .summary = c.summary, .part = part});
  };
  // --batch: up to B sequences per run, their rows one after another (each attends within itself).
  Dim L = m.seq("L", c.ctx), B = m.batch("B", c.batch), N = m.rows(B, L);
  // The decoder: tokens [n] -> logits [n, vocab].
  auto decoder = [&](Tensor tokens) {
    Tensor x = add(embedding(m.param("tok_embed.weight", {c.vocab, d}), tokens),
                   position_embedding(m.param("pos_embed.weight", {c.ctx, d}, {.scale = 0.01f}), tokens));
    for (int64_t i = 0; i < c.layers; ++i) {
      std::string p = "layers." + std::to_string(i);
      std::vector<Tensor> qkv = split(dense(m, p + ".attn.qkv", norm(m, p + ".ln1", x), d, 3 * d), 1, {d, d, d});
      AttentionOptions ao;
      if (c.combine == "alternate") ao.mask = half(i % 2 == 0 ? Part::Local : Part::Global);
      else if (c.combine == "merged") ao.mask = half(Part::Union);
      else ao.head_masks = {half(Part::Local), half(Part::Global)};
      Tensor a = attention(split_heads(qkv[0], c.heads), split_heads(qkv[1], c.heads), split_heads(qkv[2], c.heads), ao);
      x = add(x, dense(m, p + ".attn.proj", merge_heads(a), d, d));
      Tensor h = gelu(dense(m, p + ".mlp.fc1", norm(m, p + ".ln2", x), d, 4 * d), {.approx = GeluApprox::Tanh});
      x = add(x, dense(m, p + ".mlp.fc2", h, 4 * d, d));
    }
    return linear(norm(m, "ln_f", x), m.param("head.weight", {c.vocab, d}));
  };
  m.output("logits", decoder(m.tokens("tokens", N, c.vocab)));
  // --train: `gradients`, the mean cross-entropy of the next tokens (`targets`, -1 where a
  // position has none) and every parameter's gradient, through the sparse attention's backward
  // over the same block schedules; `eval`, the loss alone; `train_step`, AdamW (--train-lr,
  // --train-warmup).
  if (!c.train) return;
  auto nextTokenLoss = [&](EntryRole) {
    Tensor t = m.tokens("tokens", N, c.vocab);
    m.loss(cross_entropy(decoder(t), m.targets("targets", N, c.vocab)));
  };
  training_entries(m, nextTokenLoss,
                   {.optimizer = AdamW{.lr = c.lr, .beta1 = 0.9f, .beta2 = 0.98f, .eps = 1e-9f, .weight_decay = 0.0f},
                    .clip_norm = 1.0f,
                    .warmup_steps = c.warmup});
}

int main(int argc, char **argv) {
  kiln::Driver driver("sparse", "sparse-compile: compile a Sparse Transformer decoder with kiln");
  SparseConfig c;
  CLI::App &app = driver.app();
  app.add_option("--layers", c.layers, "decoder layers")->capture_default_str();
  app.add_option("--d-model", c.d_model, "model width")->capture_default_str();
  app.add_option("--heads", c.heads, "attention heads")->capture_default_str();
  app.add_option("--vocab", c.vocab, "vocabulary size")->capture_default_str();
  app.add_option("--ctx", c.ctx, "maximum sequence length (compiled bound)")->capture_default_str();
  app.add_option("--batch", c.batch, "maximum sequences per run (compiled bound; ./model --train --batch)")->capture_default_str();
  app.add_option("--pattern", c.pattern,
                 "the pattern: factorized (strided, fixed), a window, a block layout, or causal (dense, for comparison)")
      ->check(CLI::IsMember({"strided", "fixed", "window", "layout", "causal"}))
      ->capture_default_str();
  app.add_option("--layout", c.layout, "--pattern layout: one row per query block, '#' a visited key block (\"#..,##.,.##\")");
  app.add_flag("--noncausal", c.noncausal, "--pattern layout: keys after the query too");
  app.add_option("--combine", c.combine, "how the two halves combine")
      ->check(CLI::IsMember({"alternate", "merged", "heads"}))
      ->capture_default_str();
  app.add_option("--stride", c.stride, "strided: the stride; fixed and layout: the block; window: its width")->capture_default_str();
  app.add_option("--summary", c.summary, "fixed: summary positions per block")->capture_default_str();
  app.add_flag("--train", c.train, "add the training entries: `gradients`, `eval` and `train_step` (AdamW; ./model --train)");
  app.add_option("--train-lr", c.lr, "--train: the peak learning rate")->capture_default_str();
  app.add_option("--train-warmup", c.warmup, "--train: linear warmup steps")->capture_default_str();
  return driver.run(argc, argv, [&](kiln::Model &m) { build_sparse(m, c); });
}
