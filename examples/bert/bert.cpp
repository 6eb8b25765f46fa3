// examples/bert: the BERT encoder in the kiln DSL, with Hugging Face's parameter names.
//
// Word, learned position and token-type embeddings summed and normalized, then post-norm
// blocks: self-attention (query/key/value/output.dense, nn.Linear layout [out, in]), residual,
// LayerNorm; erf-GELU FFN (intermediate.dense, output.dense), residual, LayerNorm; eps 1e-12.
// Input `tokens`, optional `token_type_ids` (all 0 when left out); output `hidden` [L, d].
// Files may omit the "bert." prefix; `embeddings.position_ids`, `pooler.*` and `cls.*` are
// ignored and reported.
//
//   build/bin/bert-compile --layers 2 --d-model 64 --heads 4 --vocab 512 --ctx 128 -o bert
//   ./bert --weights model.safetensors --tokens 101,7592,102
#include "kiln/Driver/Driver.h"
#include "kiln/dsl/Ops.h"

struct BertConfig {
  int64_t layers = 12, d_model = 768, heads = 12, vocab = 30522, ctx = 512, type_vocab = 2;
};

static void build_bert(kiln::Model &m, const BertConfig &c) {
  using namespace kiln;
  const int64_t d = c.d_model;
  if (c.layers < 0 || d <= 0 || c.heads <= 0 || d % c.heads)
    throw Error("bert: --d-model (" + std::to_string(d) + ") must be a positive multiple of --heads (" +
                    std::to_string(c.heads) + ") and --layers non-negative",
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
  Dim L = m.seq("L", c.ctx);
  Tensor tokens = m.tokens("tokens", L, c.vocab);
  Tensor types = m.optional_tokens("token_type_ids", L, c.type_vocab);
  const std::string e = "bert.embeddings.";
  Tensor x = add(add(embedding(m.param(e + "word_embeddings.weight", {c.vocab, d}), tokens),
                     position_embedding(m.param(e + "position_embeddings.weight", {c.ctx, d}), tokens)),
                 embedding(m.param(e + "token_type_embeddings.weight", {c.type_vocab, d}), types));
  x = norm(e + "LayerNorm", x);
  for (int64_t i = 0; i < c.layers; ++i) {
    std::string p = "bert.encoder.layer." + std::to_string(i);
    auto heads = [&](const char *n) { return split_heads(dense(p + ".attention.self." + n, x, d, d), c.heads); };
    Tensor a = merge_heads(attention(heads("query"), heads("key"), heads("value")));
    x = norm(p + ".attention.output.LayerNorm", add(x, dense(p + ".attention.output.dense", a, d, d)));
    Tensor h = gelu(dense(p + ".intermediate.dense", x, d, 4 * d), {.approx = GeluApprox::Erf});
    x = norm(p + ".output.LayerNorm", add(x, dense(p + ".output.dense", h, 4 * d, d)));
  }
  m.output("hidden", x);
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
  driver.config_option("num_hidden_layers", "--layers", c.layers);
  driver.config_option("hidden_size", "--d-model", c.d_model);
  driver.config_option("num_attention_heads", "--heads", c.heads);
  driver.config_option("vocab_size", "--vocab", c.vocab);
  driver.config_option("max_position_embeddings", "--ctx", c.ctx);
  driver.config_option("type_vocab_size", "--type-vocab", c.type_vocab);
  return driver.run(argc, argv, [&](kiln::Model &m) { build_bert(m, c); });
}
