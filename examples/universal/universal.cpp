// examples/universal: a Universal Transformer encoder (Dehghani et al., 2019) in the kiln DSL.
//
// Token embeddings (scaled by sqrt(d)) are the first state; one shared block (self-attention,
// then the transition: the FFN or a depthwise-separable convolution, post-norm) is applied
// recurrently, each step's input being the state plus sinusoids of the position and the step.
// Adaptive computation time halts each position on its own (ACT, Graves 2016): the loop runs
// until every position halted or --max-steps steps ran, one copy of the block in a real loop.
//
// Outputs: hidden [L, d] (the halting-weighted states), ponder [L] (steps + remainder),
// steps [L] (int32, steps each position took) and iterations [1] (int32, steps the loop ran).
//
// --train (with --causal) adds a language model over the encoder, its head tied to the token
// embedding: `gradients`, `eval` and `train_step` (AdamW) minimise the next tokens' mean
// cross-entropy plus the ponder cost tau * mean(ponder) (--act-ponder, the term
// loss.ut.ponder). Those entries run all --max-steps steps (kiln-unroll-act) and keep every
// step's activations; the halting decisions are constants of the backward, the halting
// probabilities and remainders are not (Graves 2016).
//
// Parameter names: tok_embed.weight [vocab, d], ut.halt.{weight [d], bias [1]},
//   ut.block.attn.{q,k,v,out}.*, ut.block.ln_{1,2}.*, ut.block.ffn.fc{1,2}.* (or
//   ut.block.conv.{depthwise,pointwise1,pointwise2}.* with --transition sepconv)
//
//   build/bin/universal-compile -o universal        # d 256, 4 heads, L up to 512, 8 steps
//   ./universal --random-weights --tokens 1,2,3
#include <cmath>

#include "kiln/Driver/Driver.h"
#include "kiln/dsl/Blocks.h"

struct UniversalConfig {
  int64_t d_model = 256, heads = 4, d_ff = 0, vocab = 256, ctx = 512, max_steps = 8, kernel = 3;
  std::string transition = "ffn";
  float epsilon = 0.01f, ponder = 0.01f, lr = 1e-3f;
  bool causal = false, train = false;
  int64_t warmup = 0;
};

static void build_universal(kiln::Model &m, const UniversalConfig &c) {
  using namespace kiln;
  const int64_t d = c.d_model;
  if (c.transition != "ffn" && c.transition != "sepconv")
    throw Error("universal: --transition must be ffn or sepconv, got '" + c.transition + "'", SourceLoc::current());
  if (c.train && !c.causal)
    throw Error("universal: --train trains a language model (each position predicts the next token): add --causal",
                SourceLoc::current());
  Dim L = m.seq("L", c.ctx);
  auto table = [&] { return m.param("tok_embed.weight", {c.vocab, d}, {.scale = 1.0f / std::sqrt((float)d)}); };
  UniversalBlockOptions o{.d_model = d, .heads = c.heads, .d_ff = c.d_ff > 0 ? c.d_ff : 4 * d,
                          .transition = c.transition == "ffn" ? Transition::Ffn : Transition::SepConv,
                          .kernel = c.kernel, .mask = c.causal ? Mask::causal() : Mask()};
  auto encoder = [&](Tensor table, Tensor tokens) {
    Tensor x = scale(embedding(table, tokens), std::sqrt((float)d));
    return recurrent(m, "ut", x, [&](Tensor s) { return universal_block(m, "ut.block", s, o); },
                     {.max_steps = c.max_steps, .act = {.epsilon = c.epsilon, .ponder_weight = c.ponder}});
  };
  Recurrent r = encoder(table(), m.tokens("tokens", L, c.vocab));
  m.output("hidden", r.hidden);
  m.output("ponder", r.ponder);
  m.output("steps", r.steps);
  m.output("iterations", r.iterations);
  if (!c.train) return;
  // The next token's cross-entropy (`targets`, -1 where a position has none); recurrent() adds
  // the ponder term to the entry's loss.
  auto nextTokenLoss = [&](EntryRole) {
    Tensor t = m.tokens("tokens", L, c.vocab);
    Tensor targets = m.targets("targets", L, c.vocab);
    Tensor w = table();
    m.loss(cross_entropy(linear(encoder(w, t).hidden, w), targets));
  };
  training_entries(m, nextTokenLoss,
                   {.optimizer = AdamW{.lr = c.lr, .beta1 = 0.9f, .beta2 = 0.98f, .eps = 1e-9f, .weight_decay = 0.0f},
                    .clip_norm = 1.0f,
                    .warmup_steps = c.warmup});
}

int main(int argc, char **argv) {
  kiln::Driver driver("universal", "universal-compile: compile a Universal Transformer encoder (shared recurrent block, ACT) with kiln");
  UniversalConfig c;
  CLI::App &app = driver.app();
  app.add_option("--d-model", c.d_model, "model width")->capture_default_str();
  app.add_option("--heads", c.heads, "attention heads")->capture_default_str();
  app.add_option("--d-ff", c.d_ff, "transition width (0: 4 x d-model)")->capture_default_str();
  app.add_option("--vocab", c.vocab, "vocabulary size")->capture_default_str();
  app.add_option("--ctx", c.ctx, "maximum sequence length (compiled bound)")->capture_default_str();
  app.add_option("--max-steps", c.max_steps, "most recurrent steps (ACT may halt a position earlier)")->capture_default_str();
  app.add_option("--transition", c.transition, "the block's transition: ffn or sepconv (depthwise-separable convolution)")
      ->capture_default_str();
  app.add_option("--kernel", c.kernel, "sepconv: the depthwise kernel size (odd)")->capture_default_str();
  app.add_option("--act-epsilon", c.epsilon, "ACT: a position halts when its halting sum passes 1 - epsilon")
      ->capture_default_str();
  app.add_option("--act-ponder", c.ponder, "ACT: the ponder cost's weight tau in training (loss.ut.ponder; 0: none)")
      ->capture_default_str();
  app.add_flag("--causal", c.causal, "causal attention (each position reads itself and the positions before it)");
  app.add_flag("--train", c.train,
               "add the training entries (with --causal): `gradients`, `eval` and `train_step` (AdamW; ./model --train)");
  app.add_option("--train-lr", c.lr, "--train: the peak learning rate")->capture_default_str();
  app.add_option("--train-warmup", c.warmup, "--train: linear warmup steps")->capture_default_str();
  return driver.run(argc, argv, [&](kiln::Model &m) { build_universal(m, c); });
}
