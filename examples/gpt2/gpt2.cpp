// examples/gpt2: GPT-2 in the kiln DSL, with Hugging Face's parameter names and layouts.
//
// Learned positions, pre-norm blocks, causal attention with the packed c_attn projection
// ([d, 3d], applied as x·W like the Conv1D layers), tanh-GELU, LayerNorm eps 1e-5, and the
// output head tied to the token embedding. Files may name parameters with or without the
// "transformer." prefix; the attention mask buffers GPT-2 checkpoints carry
// (h.{i}.attn.bias, h.{i}.attn.masked_bias) are ignored and reported.
//
// The entry points share the weights and a KV cache (one key and one value state per layer):
// `forward` runs the prompt, fills the cache and gives every row's logits; `prefill` does the
// same but computes the head on the last row only (`last_logits` [1, vocab]: what generation
// needs, as transformers' logits_to_keep = 1), saving the 50257-wide head on every other row;
// `decode` runs one token at position `past` and attends to the cache, so
// `./gpt2 --tokens ... --generate N` (prefill, then decode steps) costs O(L) per new token;
// `extend` appends a chunk at `past` (a chat's next turn, a served prompt in pieces).
//
//   build/bin/gpt2-compile --layers 2 --d-model 128 --heads 4 --vocab 256 --ctx 128 -o gpt2
//   ./gpt2 --weights model.safetensors --tokens 464,3290,318
//
// --train adds `gradients` (tokens, targets -> loss and grad.<param>), `eval` (the loss) and
// `train_step` (AdamW in place), which `./gpt2 --train --data bytes.npy ...` runs;
// --train-aux-layers and --train-ahead K add Al-Rfou et al.'s auxiliary losses to `gradients`
// and `train_step` (intermediate blocks through the shared head, dropped on a schedule; heads
// for the tokens 2 .. K ahead).
#include "kiln/Driver/Driver.h"
#include "kiln/dsl/Ops.h"

struct Gpt2Config {
  int64_t layers = 12, d_model = 768, heads = 12, vocab = 50257, ctx = 1024, batch = 1;
  bool train = false, checkpoint = false, aux_layers = false;
  float lr = 1e-3f, ahead_weight = 0.5f;
  int64_t warmup = 0, decay_steps = 0, ahead = 1;
};

static void build_gpt2(kiln::Model &m, const Gpt2Config &c) {
  using namespace kiln;
  const int64_t d = c.d_model;
  if (c.layers < 0 || d <= 0 || c.heads <= 0 || d % c.heads)
    throw Error("gpt2: --d-model (" + std::to_string(d) + ") must be a positive multiple of --heads (" +
                    std::to_string(c.heads) + ") and --layers non-negative",
                SourceLoc::current());
  m.weights_prefix("transformer.");
  m.ignore_weights({"transformer.h.*.attn.bias", "transformer.h.*.attn.masked_bias", "lm_head.weight"});
  // Hugging Face's GPT2Config: the sizes, and what changes the numbers (absent: its defaults).
  auto n = [](int64_t v) { return std::to_string(v); };
  m.checkpoint_config({{"n_layer", n(c.layers), "layers"},
                       {"n_embd", n(d), "as its width"},
                       {"n_head", n(c.heads), "heads"},
                       {"vocab_size", n(c.vocab), "tokens"},
                       {"n_positions", n(c.ctx), "positions"},
                       {"n_inner", n(4 * d), "as its FFN width", n(4 * d)},
                       {"layer_norm_epsilon", "1e-05", "as its layer norm epsilon", "1e-05"},
                       {"activation_function", "\"gelu_new\"", "as its activation (tanh GELU)", "\"gelu_new\""},
                       {"tie_word_embeddings", "true", "for a head tied to the token embedding", "true"},
                       {"scale_attn_weights", "true", "for attention scaled by 1/sqrt(head size)", "true"},
                       {"scale_attn_by_inverse_layer_idx", "false", "for that scale divided by the layer", "false"}});
  auto norm = [&](const std::string &p, Tensor x) {
    return layer_norm(x, m.param(p + ".weight", {d}, {.init = Init::Ones}), m.param(p + ".bias", {d}, {.init = Init::Zeros}),
                      {.eps = 1e-5f});
  };
  auto conv1d = [&](const std::string &p, Tensor x, int64_t in, int64_t out) {  // x·W + b, W [in, out]
    return linear(x, m.param(p + ".weight", {in, out}), m.param(p + ".bias", {out}, {.init = Init::Zeros}),
                  {.layout = WeightLayout::InOut});
  };
  const int64_t hd = d / c.heads;
  // forward (the prefill): the prompt, which also fills the caches. --batch: B sequences at once
  // ([B, L] inputs, B·L rows) in the entries without a cache (the training entries) and in
  // forward, which then fills one cache per sequence; decode_batch steps each at its own past.
  // prefill and decode take one sequence (B = 1; with --batch, sequence 0's cache).
  Dim L = m.seq("L", c.ctx), B = m.batch("B", c.batch), N = m.rows(B, L);
  auto cacheState = [&](const std::string &name) {
    return c.batch > 1 ? m.state(name, {c.heads, c.ctx, hd}, B) : m.state(name, {c.heads, c.ctx, hd});
  };
  // One block: x [n, d] -> [n, d]. It writes its keys and values into the KV cache at `past`
  // (none: row 0; cache false: no cache, as the training entries) and, when decoding, attends
  // to the cache; the prompt attends to its own keys and values.
  auto block = [&](int64_t i, Tensor x, Tensor past, bool cache) {
    std::string p = "transformer.h." + std::to_string(i);
    std::vector<Tensor> qkv = split(conv1d(p + ".attn.c_attn", norm(p + ".ln_1", x), d, 3 * d), 1, {d, d, d});
    Tensor q = split_heads(qkv[0], c.heads), k = split_heads(qkv[1], c.heads), v = split_heads(qkv[2], c.heads);
    Tensor a;
    if (!cache) {
      a = attention(q, k, v, {.mask = Mask::causal()});
    } else if (Tensor kc = cache_write(cacheState("cache.k." + std::to_string(i)), k, past),
               vc = cache_write(cacheState("cache.v." + std::to_string(i)), v, past);
               past) {
      a = attention(q, kc, vc, {.mask = Mask::causal(), .past = past});
    } else {
      m.keep(kc);
      m.keep(vc);
      a = attention(q, k, v, {.mask = Mask::causal()});
    }
    x = add(x, conv1d(p + ".attn.c_proj", merge_heads(a), d, d));
    Tensor h = gelu(conv1d(p + ".mlp.c_fc", norm(p + ".ln_2", x), d, 4 * d), {.approx = GeluApprox::Tanh});
    return add(x, conv1d(p + ".mlp.c_proj", h, 4 * d, d));
  };
  // The decoder, shared by the entries: x [n, d] -> logits [n, vocab]. The training entries
  // (no cache) with --train-checkpoint checkpoint every block: its backward recomputes it.
  auto decoder = [&](Tensor x, Tensor past, Tensor wte, bool lastRow = false, bool cache = true) {
    for (int64_t i = 0; i < c.layers; ++i)
      x = !cache && c.checkpoint ? m.checkpoint([&] { return block(i, x, past, cache); }) : block(i, x, past, cache);
    if (lastRow) x = last(x, 0);
    return linear(norm("transformer.ln_f", x), wte);  // tied head: x · wteᵀ
  };
  Tensor tokens = m.tokens("tokens", N, c.vocab);
  Tensor wte = m.param("transformer.wte.weight", {c.vocab, d});
  Tensor wpe = m.param("transformer.wpe.weight", {c.ctx, d}, {.scale = 0.01f});
  m.output("logits", decoder(add(embedding(wte, tokens), position_embedding(wpe, tokens)), Tensor(), wte));
  // prefill: the same prompt and caches, the head on the last row only.
  m.entry("prefill", EntryRole::Prefill);
  Tensor ptokens = m.tokens("tokens", N, c.vocab);
  Tensor wteP = m.param("transformer.wte.weight", {c.vocab, d});
  Tensor wpeP = m.param("transformer.wpe.weight", {c.ctx, d}, {.scale = 0.01f});
  m.output("last_logits", decoder(add(embedding(wteP, ptokens), position_embedding(wpeP, ptokens)), Tensor(), wteP, true));
  // decode: one token at position `past`, attending to the cached positions.
  m.entry("decode", EntryRole::Decode);
  Tensor token = m.tokens("token", 1, c.vocab);
  Tensor past = m.input("past", {1}, {.dtype = DType::I32, .vocab = c.ctx});
  Tensor wte1 = m.param("transformer.wte.weight", {c.vocab, d});
  Tensor x1 = add(embedding(wte1, token), embedding(m.param("transformer.wpe.weight", {c.ctx, d}, {.scale = 0.01f}), past));
  m.output("next_logits", decoder(x1, past, wte1));
  // extend: a chunk of tokens appended at `past` of the cache (positions past, past + 1, ...;
  // the cache already holds the first `past`): the chunk's last row's logits. A conversation's
  // next turn, or a prompt in pieces; with --batch > 1 into the cache of slot `slot` (what
  // ./gpt2 --serve prefills a request's prompt with).
  m.entry("extend", EntryRole::Extend);
  Tensor chunk = m.tokens("chunk", m.seq("C", c.ctx), c.vocab);
  if (c.batch > 1) m.cache_slots("slot", 1, B);
  Tensor pastC = m.input("past", {1}, {.dtype = DType::I32, .vocab = c.ctx});
  Tensor wteC = m.param("transformer.wte.weight", {c.vocab, d});
  Tensor wpeC = m.param("transformer.wpe.weight", {c.ctx, d}, {.scale = 0.01f});
  m.output("chunk_logits", decoder(add(embedding(wteC, chunk), position_embedding(wpeC, chunk, {.start = pastC})), pastC, wteC, true));
  // decode_batch (--batch > 1): one token per sequence ([B]), sequence r at its own position
  // past_batch[r], attending to the cache of slot slots[r] (filled by forward over [B, L]
  // prompts, slot b for sequence b; slots left out: 0, 1, 2, ...).
  if (c.batch > 1) {
    m.entry("decode_batch", EntryRole::DecodeBatch);
    Tensor tokenB = m.tokens("token_batch", B, c.vocab);
    Tensor pastB = m.input("past_batch", {B}, {.dtype = DType::I32, .vocab = c.ctx});
    m.cache_slots("slots", B, B);
    Tensor wteB = m.param("transformer.wte.weight", {c.vocab, d});
    Tensor pos = embedding(m.param("transformer.wpe.weight", {c.ctx, d}, {.scale = 0.01f}), pastB);
    m.output("next_logits_batch", decoder(add(embedding(wteB, tokenB), pos), pastB, wteB));
  }
  // --train: `gradients`, the mean cross-entropy of the next tokens (`targets`, -1 where a
  // position has none) and its gradient with respect to every parameter (grad.<name>). Its
  // weights are then read as stored (the backward reads them in both orientations), not in the
  // inference entries' panels.
  // `eval`, the same loss alone; `train_step`, the loss, its backward and AdamW (--train-lr,
  // --train-warmup, --train-decay-steps; weight decay 0.1 on matrices, as GPT-2's training did).
  if (!c.train) return;
  // Auxiliary losses (Al-Rfou et al. 2018) in `gradients` and `train_step`, not in `eval`:
  // --train-aux-layers: the output of every block l < n but the last (l = 1 .. n-1) predicts the
  // next tokens through the shared head (ln_f, then the tied embedding), weight 1, at the
  // training steps t <= l/(2n) · T only (T = --steps); --train-ahead K: heads aux.ahead.k
  // ([vocab, d], on ln_f's output) predict the tokens k = 2 .. K ahead (inputs "targets.k"),
  // weight --train-ahead-weight each.
  auto nextTokenLoss = [&](EntryRole role) {
    const bool aux = role != EntryRole::Eval;
    Tensor t = m.tokens("tokens", N, c.vocab);
    Tensor targets = m.targets("targets", N, c.vocab);
    Tensor w = m.param("transformer.wte.weight", {c.vocab, d});
    Tensor p = m.param("transformer.wpe.weight", {c.ctx, d}, {.scale = 0.01f});
    if (!aux || (!c.aux_layers && c.ahead < 2)) {
      m.loss(cross_entropy(decoder(add(embedding(w, t), position_embedding(p, t)), Tensor(), w, false, false), targets));
      return;
    }
    Tensor x = add(embedding(w, t), position_embedding(p, t));
    Tensor g = m.param("transformer.ln_f.weight", {d}, {.init = Init::Ones}),
           beta = m.param("transformer.ln_f.bias", {d}, {.init = Init::Zeros});
    auto head = [&](Tensor y) { return linear(layer_norm(y, g, beta, {.eps = 1e-5f}), w); };  // the shared head
    for (int64_t i = 0; i < c.layers; ++i) {
      x = c.checkpoint ? m.checkpoint([&] { return block(i, x, Tensor(), false); }) : block(i, x, Tensor(), false);
      if (c.aux_layers && i + 1 < c.layers)
        m.loss(cross_entropy(head(x), targets),
               {.until = (float)(i + 1) / (float)(2 * c.layers)});
    }
    Tensor h = layer_norm(x, g, beta, {.eps = 1e-5f});
    m.loss(cross_entropy(linear(h, w), targets), {.name = "next"});  // --train logs it as loss.next
    for (int64_t k = 2; k <= c.ahead; ++k) {
      std::string name = "aux.ahead." + std::to_string(k) + ".weight";
      Tensor tk = m.targets("targets." + std::to_string(k), N, c.vocab, Ahead{.k = k});
      m.loss(cross_entropy(linear(h, m.param(name, {c.vocab, d})), tk), {.weight = c.ahead_weight});
    }
  };
  TrainOptions opt{.optimizer = AdamW{.lr = c.lr, .beta1 = 0.9f, .beta2 = 0.95f, .eps = 1e-8f, .weight_decay = 0.1f},
                   .clip_norm = 1.0f,
                   .warmup_steps = c.warmup};
  if (c.decay_steps > 0) opt.decay = Cosine{.steps = c.decay_steps, .min_ratio = 0.1f};
  training_entries(m, nextTokenLoss, opt);
}

int main(int argc, char **argv) {
  kiln::Driver driver("gpt2", "gpt2-compile: compile GPT-2 (Hugging Face names and layouts) with kiln");
  Gpt2Config c;
  driver.app().add_option("--layers", c.layers, "transformer blocks")->capture_default_str();
  driver.config_option("n_layer", "--layers", c.layers);
  driver.config_option("n_embd", "--d-model", c.d_model);
  driver.config_option("n_head", "--heads", c.heads);
  driver.config_option("vocab_size", "--vocab", c.vocab);
  driver.config_option("n_positions|n_ctx", "--ctx", c.ctx);
  driver.app().add_option("--d-model", c.d_model, "model width")->capture_default_str();
  driver.app().add_option("--heads", c.heads, "attention heads")->capture_default_str();
  driver.app().add_option("--vocab", c.vocab, "vocabulary size")->capture_default_str();
  driver.app().add_option("--ctx", c.ctx, "maximum sequence length (compiled bound)")->capture_default_str();
  driver.app()
      .add_option("--batch", c.batch, "maximum sequences per run (compiled bound) of forward, decode_batch (added when > 1; one KV cache per sequence) and the training entries")
      ->check(CLI::Range(int64_t(1), int64_t(1) << 12))
      ->capture_default_str();
  driver.app().add_flag("--train", c.train,
                        "add the training entries: `gradients` (the next-token loss and every parameter's gradient), "
                        "`eval` (the loss) and `train_step` (AdamW; ./model --train)");
  driver.app().add_flag("--train-checkpoint", c.checkpoint,
                        "--train: checkpoint every block (its backward recomputes its forward instead of keeping its "
                        "activations)");
  driver.app().add_option("--train-lr", c.lr, "--train: the peak learning rate")->capture_default_str();
  driver.app().add_option("--train-warmup", c.warmup, "--train: linear warmup steps")->capture_default_str();
  driver.app().add_option("--train-decay-steps", c.decay_steps,
                          "--train: cosine decay to 0.1 x lr at this step (0: constant)")->capture_default_str();
  driver.app().add_flag("--train-aux-layers", c.aux_layers,
                        "--train: every block's output but the last also predicts the next tokens through the shared "
                        "head, block l of n until step l/(2n) of --steps (gradients, train_step)");
  driver.app()
      .add_option("--train-ahead", c.ahead,
                  "--train: extra heads predict the tokens 2 .. K ahead (inputs targets.2 .. targets.K; 1: none)")
      ->check(CLI::Range(int64_t(1), int64_t(16)))
      ->capture_default_str();
  driver.app().add_option("--train-ahead-weight", c.ahead_weight, "--train: each extra head's weight in the loss")->capture_default_str();
  return driver.run(argc, argv, [&](kiln::Model &m) { build_gpt2(m, c); });
}
