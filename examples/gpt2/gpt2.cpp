// examples/gpt2: a GPT-2-style decoder (learned positions, pre-norm, tanh-GELU, causal
// attention, output head tied to the token embedding) written in the kiln DSL.
//
//   build/bin/gpt2-compile --layers 2 --d-model 128 --heads 4 --vocab 256 --ctx 128 -o gpt2
//   ./gpt2 --random-weights --tokens 1,2,3
#include "kiln/Pipelines/Driver.h"
#include "kiln/dsl/Blocks.h"

struct Gpt2Config {
  int64_t layers = 12, d_model = 768, heads = 12, vocab = 50257, ctx = 1024;
};

static void build_gpt2(kiln::Model &m, const Gpt2Config &c) {
  using namespace kiln;
  Dim L = m.seq("L", c.ctx);
  Tensor tokens = m.tokens("tokens", L, c.vocab);
  Tensor wte = m.param("wte", {c.vocab, c.d_model});
  Tensor wpe = m.param("wpe", {c.ctx, c.d_model}, {.scale = 0.01f});
  Tensor x = add(embedding(wte, tokens), position_embedding(wpe, tokens));
  for (int64_t i = 0; i < c.layers; ++i)
    x = transformer_block(m, "h." + std::to_string(i), x,
                          {.d_model = c.d_model, .heads = c.heads, .d_ff = 4 * c.d_model, .mask = Mask::causal(),
                           .norm = NormPlacement::Pre, .act = Activation::GeluTanh, .eps = 1e-5f,
                           .layout = WeightLayout::InOut});
  Tensor lnf = layer_norm(x, m.param("ln_f.weight", {c.d_model}, {.init = Init::Ones}),
                          m.param("ln_f.bias", {c.d_model}, {.init = Init::Zeros}), {.eps = 1e-5f});
  m.output("logits", linear(lnf, wte));  // tied head: logits = x · wteᵀ
}

int main(int argc, char **argv) {
  kiln::Driver driver("gpt2", "gpt2-compile: compile a GPT-2-style decoder with kiln");
  Gpt2Config c;
  driver.app().add_option("--layers", c.layers, "transformer blocks")->capture_default_str();
  driver.app().add_option("--d-model", c.d_model, "model width")->capture_default_str();
  driver.app().add_option("--heads", c.heads, "attention heads")->capture_default_str();
  driver.app().add_option("--vocab", c.vocab, "vocabulary size")->capture_default_str();
  driver.app().add_option("--ctx", c.ctx, "maximum sequence length (compiled bound)")->capture_default_str();
  return driver.run(argc, argv, [&](kiln::Model &m) { build_gpt2(m, c); });
}
