// examples/bert: the BERT encoder in the kiln DSL, with Hugging Face's parameter names.
//
// Word, learned position and token-type embeddings summed and normalized, then post-norm
// blocks: self-attention (query/key/value/output.dense, nn.Linear layout [out, in]), residual,
// LayerNorm; erf-GELU FFN (intermediate.dense, output.dense), residual, LayerNorm; eps 1e-12.
// Input `tokens`, optional `token_type_ids` (all 0 when left out); output `hidden` [L, d].
// Sentence embeddings (sentence-transformers, all-MiniLM-L6-v2): `--pool mean` adds the output
// `embedding` [B, d], the mean of each sequence's hidden rows, and `--normalize` divides it by
// its L2 norm; both take the optional input `attention_mask` [B, L] (1: a token, 0: padding; all
// 1 when left out), which hides the padding from attention and from the mean (a padded batch
// of sentences of different lengths in one run). `--attention-mask` adds it without pooling.
// Files may omit the "bert." prefix; `embeddings.position_ids`, `pooler.*` and `cls.*` are
// ignored and reported (with --train the masked-LM head's cls.predictions.* are parameters).
//
//   build/bin/bert-compile --layers 2 --d-model 64 --heads 4 --vocab 512 --ctx 128 -o bert
//   ./bert --weights model.safetensors --tokens 101,7592,102
#include "kiln/Driver/Driver.h"
#include "kiln/dsl/Ops.h"

struct BertConfig {
  int64_t layers = 12, d_model = 768, heads = 12, vocab = 30522, ctx = 512, type_vocab = 2, batch = 1;
  bool train = false, normalize = false, attention_mask = false;
  std::string pool = "none";
  int64_t mask_token = 103;  // [MASK] in bert-base-uncased's vocabulary
  float lr = 1e-4f;
  int64_t warmup = 0;
};

static void build_bert(kiln::Model &m, const BertConfig &c) {
  using namespace kiln;
  const int64_t d = c.d_model;
  if (c.layers < 0 || d <= 0 || c.heads <= 0 || d % c.heads)
    throw Error("bert: --d-model (" + std::to_string(d) + ") must be a positive multiple of --heads (" +
                    std::to_string(c.heads) + ") and --layers non-negative",
                SourceLoc::current());
  if (c.normalize && c.pool == "none") throw Error("bert: --normalize applies to --pool mean", SourceLoc::current());
  if (c.train && (c.pool != "none" || c.attention_mask))
    throw Error("bert: --train does not combine with --pool or --attention-mask (the padding mask has no gradient yet)",
                SourceLoc::current());
  m.weights_prefix("bert.");
  m.ignore_weights({"bert.embeddings.position_ids", "bert.pooler.*", "cls.*"});
  // Hugging Face's BertConfig: the sizes, and what changes the numbers (absent: its defaults).
  auto n = [](int64_t v) { return std::to_string(v); };
  m.checkpoint_config({{"num_hidden_layers", n(c.layers), "layers"},
                       {"hidden_size", n(d), "as its width"},
                       {"num_attention_heads", n(c.heads), "heads"},
                       {"vocab_size", n(c.vocab), "tokens"},
                       {"max_position_embeddings", n(c.ctx), "positions"},
                       {"type_vocab_size", n(c.type_vocab), "token types", "2"},
                       {"intermediate_size", n(4 * d), "as its FFN width", "3072"},
                       {"layer_norm_eps", "1e-12", "as its layer norm epsilon", "1e-12"},
                       {"hidden_act", "\"gelu\"", "as its activation (erf GELU)", "\"gelu\""},
                       {"position_embedding_type", "\"absolute\"", "positions", "\"absolute\""}});
  auto norm = [&](const std::string &p, Tensor x) {
    return layer_norm(x, m.param(p + ".weight", {d}, {.init = Init::Ones}), m.param(p + ".bias", {d}, {.init = Init::Zeros}),
                      {.eps = 1e-12f});
  };
  auto dense = [&](const std::string &p, Tensor x, int64_t in, int64_t out) {  // x·Wᵀ + b, W [out, in]
    return linear(x, m.param(p + ".weight", {out, in}), m.param(p + ".bias", {out}, {.init = Init::Zeros}));
  };
  const std::string e = "bert.embeddings.";
  // The encoder of the current entry: tokens (and token types, all 0 when left out) -> [L, d];
  // `words` is the word embedding table (the masked-LM head's decoder too).
  // --batch: every entry runs B sequences of one length L at once ([B, L] inputs, B·L rows).
  Dim L = m.seq("L", c.ctx), B = m.batch("B", c.batch), N = m.rows(B, L);
  const bool masked = c.attention_mask || c.pool != "none";
  Tensor padding;  // attention_mask, when the model takes one
  auto encoder = [&](Tensor tokens, Tensor words) {
    Tensor types = m.optional_tokens("token_type_ids", N, c.type_vocab);
    if (masked) padding = m.input("attention_mask", {N}, {.dtype = DType::I32, .vocab = 2, .optional = true, .fill = 1});
    Tensor x = add(add(embedding(words, tokens),
                       position_embedding(m.param(e + "position_embeddings.weight", {c.ctx, d}), tokens)),
                   embedding(m.param(e + "token_type_embeddings.weight", {c.type_vocab, d}), types));
    x = norm(e + "LayerNorm", x);
    for (int64_t i = 0; i < c.layers; ++i) {
      std::string p = "bert.encoder.layer." + std::to_string(i);
      auto heads = [&](const char *n) { return split_heads(dense(p + ".attention.self." + n, x, d, d), c.heads); };
      Tensor a = merge_heads(attention(heads("query"), heads("key"), heads("value"), {.key_mask = padding}));
      x = norm(p + ".attention.output.LayerNorm", add(x, dense(p + ".attention.output.dense", a, d, d)));
      Tensor h = gelu(dense(p + ".intermediate.dense", x, d, 4 * d), {.approx = GeluApprox::Erf});
      x = norm(p + ".output.LayerNorm", add(x, dense(p + ".output.dense", h, 4 * d, d)));
    }
    return x;
  };
  auto wordTable = [&]() { return m.param(e + "word_embeddings.weight", {c.vocab, d}); };
  Tensor hidden = encoder(m.tokens("tokens", N, c.vocab), wordTable());
  m.output("hidden", hidden);
  if (c.pool == "mean") {
    Tensor e = mean_pool(hidden, {.mask = padding});
    m.output("embedding", c.normalize ? l2_normalize(e) : e);
  }
  // --train: the masked-LM objective of BertForMaskedLM: the head (cls.predictions: dense, erf
  // GELU, LayerNorm, the word embeddings tied as the decoder, a bias) and the cross-entropy at
  // the masked positions (`targets`, -1 elsewhere; ./bert --train masks 15% of each window:
  // 80% [MASK], 10% a random id, 10% kept). Entries `gradients`, `eval`, `train_step` (AdamW).
  if (!c.train) return;
  auto maskedLmLoss = [&](EntryRole) {
    Tensor tokens = m.tokens("tokens", N, c.vocab);
    Tensor targets = m.targets("targets", N, c.vocab, MaskedLM{.mask_token = c.mask_token});
    const std::string h = "cls.predictions.";
    Tensor words = wordTable();
    Tensor t = norm(h + "transform.LayerNorm",
                    gelu(dense(h + "transform.dense", encoder(tokens, words), d, d), {.approx = GeluApprox::Erf}));
    Tensor logits = linear(t, words, m.param(h + "bias", {c.vocab}, {.init = Init::Zeros}));
    m.loss(cross_entropy(logits, targets));
  };
  training_entries(m, maskedLmLoss,
                   {.optimizer = AdamW{.lr = c.lr, .beta1 = 0.9f, .beta2 = 0.999f, .eps = 1e-6f, .weight_decay = 0.01f},
                    .clip_norm = 1.0f,
                    .warmup_steps = c.warmup});
}

int main(int argc, char **argv) {
  kiln::Driver driver("bert", "bert-compile: compile a BERT encoder (Hugging Face names) with kiln");
  BertConfig c;
  driver.app().add_option("--layers", c.layers, "encoder layers")->capture_default_str();
  driver.app().add_option("--d-model", c.d_model, "model width")->capture_default_str();
  driver.app().add_option("--heads", c.heads, "attention heads")->capture_default_str();
  driver.app().add_option("--vocab", c.vocab, "vocabulary size")->capture_default_str();
  driver.app().add_option("--ctx", c.ctx, "maximum sequence length (compiled bound)")->capture_default_str();
  driver.app().add_option("--type-vocab", c.type_vocab, "token types (segments)")->capture_default_str();
  driver.app()
      .add_option("--batch", c.batch, "maximum sequences per run (compiled bound; a run's inputs are [B, L])")
      ->check(CLI::Range(int64_t(1), int64_t(1) << 12))
      ->capture_default_str();
  driver.app()
      .add_option("--pool", c.pool, "sentence embeddings: `mean` adds the output `embedding`, the mean of each sequence's hidden rows")
      ->check(CLI::IsMember({"none", "mean"}))
      ->capture_default_str();
  driver.app().add_flag("--normalize", c.normalize, "--pool: divide each embedding by its L2 norm");
  driver.app().add_flag("--attention-mask", c.attention_mask,
                        "take the input attention_mask [B, L] (0: padding; implied by --pool)");
  driver.app().add_flag("--train", c.train,
                        "add the masked-LM training entries: `gradients` (the loss and every parameter's gradient), "
                        "`eval` (the loss) and `train_step` (AdamW; ./model --train masks the data)");
  driver.app().add_option("--train-mask-token", c.mask_token, "--train: the [MASK] id")->capture_default_str();
  driver.app().add_option("--train-lr", c.lr, "--train: the peak learning rate")->capture_default_str();
  driver.app().add_option("--train-warmup", c.warmup, "--train: linear warmup steps")->capture_default_str();
  driver.config_option("num_hidden_layers", "--layers", c.layers);
  driver.config_option("hidden_size", "--d-model", c.d_model);
  driver.config_option("num_attention_heads", "--heads", c.heads);
  driver.config_option("vocab_size", "--vocab", c.vocab);
  driver.config_option("max_position_embeddings", "--ctx", c.ctx);
  driver.config_option("type_vocab_size", "--type-vocab", c.type_vocab);
  return driver.run(argc, argv, [&](kiln::Model &m) { build_bert(m, c); });
}
