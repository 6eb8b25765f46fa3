// stacks_test.cpp - transformer stacks written in the DSL (GPT-2-style decoders, post-norm
// encoders) against the plain reference at several lengths, and one at every x86 target.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <set>
#include <sstream>

#include "harness.h"
#include "kiln/dsl/Blocks.h"
#include "kilnrt/api.h"
#include "models.h"

using namespace kiln;
using W = std::map<std::string, ref::T>;

namespace {
// ---------------------------------------------------------------- transformer stacks
struct StackCfg {
  int64_t layers, d, heads, vocab, bound;
  std::vector<int64_t> lengths;
};

std::string stackName(const ::testing::TestParamInfo<StackCfg> &i) {
  return "d" + std::to_string(i.param.d) + "_l" + std::to_string(i.param.layers) + "_v" + std::to_string(i.param.vocab) + "_h" +
         std::to_string(i.param.heads);
}

class Gpt2Decoder : public ::testing::TestWithParam<StackCfg> {};

TEST_P(Gpt2Decoder, MatchesReferenceAtEveryLength) {
  StackCfg c = GetParam();
  std::string dir = kt::workDir("gpt_" + std::to_string(c.d) + "_" + std::to_string(c.layers) + "_" + std::to_string(c.vocab) +
                                "_" + std::to_string(c.heads));
  std::string exe = kt::compile(dir, "gpt", [&](Model &m) {
    Dim L = m.seq("L", c.bound);
    Tensor t = m.tokens("tokens", L, c.vocab);
    Tensor wte = m.param("wte", {c.vocab, c.d}, {.scale = 0.5f});
    Tensor x = add(embedding(wte, t), position_embedding(m.param("wpe", {c.bound, c.d}, {.scale = 0.1f}), t));
    for (int64_t i = 0; i < c.layers; ++i)
      x = transformer_block(m, "h." + std::to_string(i), x,
                            {.d_model = c.d, .heads = c.heads, .d_ff = 4 * c.d, .mask = Mask::causal(),
                             .norm = NormPlacement::Pre, .act = Activation::GeluTanh, .layout = WeightLayout::InOut});
    x = layer_norm(x, m.param("ln_f.weight", {c.d}, {.init = Init::Ones}), m.param("ln_f.bias", {c.d}, {.init = Init::Zeros}));
    m.output("logits", linear(x, wte));
  });
  ASSERT_FALSE(exe.empty());
  for (int64_t len : c.lengths) {
    SCOPED_TRACE("L = " + std::to_string(len));
    auto ids = kt::randomIds((int)len, (int)c.vocab, (unsigned)len);
    W w;
    ref::T got = kt::runModel(dir, exe, "--tokens " + kt::idList(ids), "logits", w);
    EXPECT_TRUE(kt::allClose(ref::gpt2(w, ids, c.layers, c.heads), got));
  }
}
INSTANTIATE_TEST_SUITE_P(Shapes, Gpt2Decoder,
                         ::testing::Values(StackCfg{.layers = 2, .d = 64, .heads = 4, .vocab = 96, .bound = 64, .lengths = {1, 13, 64}},
                                           StackCfg{.layers = 2, .d = 128, .heads = 8, .vocab = 256, .bound = 128, .lengths = {5, 100}},
                                           StackCfg{.layers = 1, .d = 128, .heads = 8, .vocab = 256, .bound = 128, .lengths = {5}},
                                           StackCfg{.layers = 2, .d = 128, .heads = 8, .vocab = 96, .bound = 64, .lengths = {5}},
                                           StackCfg{.layers = 2, .d = 128, .heads = 4, .vocab = 256, .bound = 128, .lengths = {5}},
                                           StackCfg{.layers = 0, .d = 128, .heads = 4, .vocab = 256, .bound = 128, .lengths = {5}},
                                           StackCfg{.layers = 0, .d = 64, .heads = 4, .vocab = 256, .bound = 64, .lengths = {5}},
                                           StackCfg{.layers = 0, .d = 64, .heads = 4, .vocab = 200, .bound = 64, .lengths = {5}},
                                           StackCfg{.layers = 0, .d = 64, .heads = 4, .vocab = 96, .bound = 64, .lengths = {5}}),
                         stackName);

class PostNormEncoder : public ::testing::TestWithParam<StackCfg> {};

TEST_P(PostNormEncoder, MatchesReferenceAtEveryLength) {
  StackCfg c = GetParam();
  std::string dir = kt::workDir("enc_" + std::to_string(c.d) + "_" + std::to_string(c.layers));
  std::string exe = kt::compile(dir, "enc", [&](Model &m) {
    Dim L = m.seq("L", c.bound);
    Tensor t = m.tokens("tokens", L, c.vocab);
    Tensor x = add(embedding(m.param("emb", {c.vocab, c.d}, {.scale = 0.5f}), t),
                   position_embedding(m.param("pos", {c.bound, c.d}, {.scale = 0.1f}), t));
    for (int64_t i = 0; i < c.layers; ++i)
      x = transformer_block(m, "layer." + std::to_string(i), x,
                            {.d_model = c.d, .heads = c.heads, .d_ff = 2 * c.d, .norm = NormPlacement::Post,
                             .act = Activation::GeluErf, .eps = 1e-12f});
    m.output("hidden", x);
  });
  ASSERT_FALSE(exe.empty());
  for (int64_t len : c.lengths) {
    SCOPED_TRACE("L = " + std::to_string(len));
    auto ids = kt::randomIds((int)len, (int)c.vocab, (unsigned)(len + 1));
    W w;
    ref::T got = kt::runModel(dir, exe, "--tokens " + kt::idList(ids), "hidden", w);
    ref::T x = ref::add(ref::embedding(w["emb"], ids), ref::rows(w["pos"], len));
    for (int64_t i = 0; i < c.layers; ++i)
      x = ref::block(w, "layer." + std::to_string(i), x, {c.heads, false, false, true, false, 1e-12f});
    EXPECT_TRUE(kt::allClose(x, got));
  }
}
INSTANTIATE_TEST_SUITE_P(Shapes, PostNormEncoder,
                         ::testing::Values(StackCfg{.layers = 2, .d = 64, .heads = 2, .vocab = 80, .bound = 48, .lengths = {3, 48}},
                                           StackCfg{.layers = 2, .d = 96, .heads = 6, .vocab = 120, .bound = 96, .lengths = {17, 90}}),
                         stackName);
}  // namespace

namespace {
class Targets : public ::testing::TestWithParam<std::string> {};
TEST_P(Targets, Gpt2MatchesReference) {
  std::string target = GetParam();
  std::string dir = kt::workDir("target_" + target);
  std::string exe = kt::compile(dir, "gpt", [&](Model &m) {
    Dim L = m.seq("L", 40);
    Tensor t = m.tokens("tokens", L, 50);
    Tensor wte = m.param("wte", {50, 48}, {.scale = 0.5f});
    Tensor x = add(embedding(wte, t), position_embedding(m.param("wpe", {40, 48}, {.scale = 0.1f}), t));
    x = transformer_block(m, "h.0", x,
                          {.d_model = 48, .heads = 3, .d_ff = 96, .mask = Mask::causal(), .act = Activation::GeluTanh,
                           .layout = WeightLayout::InOut});
    x = layer_norm(x, m.param("ln_f.weight", {48}, {.init = Init::Ones}), m.param("ln_f.bias", {48}, {.init = Init::Zeros}));
    m.output("logits", linear(x, wte));
  }, {"--target", target});
  ASSERT_FALSE(exe.empty());
  auto v = kt::run(exe + " --version");
  EXPECT_NE(v.output.find("target " + target), std::string::npos) << v.output;
  auto ids = kt::randomIds(23, 50, 2);
  W w;
  ref::T got = kt::runModel(dir, exe, "--tokens " + kt::idList(ids), "logits", w);
  EXPECT_TRUE(kt::allClose(ref::gpt2(w, ids, 1, 3), got));
}
INSTANTIATE_TEST_SUITE_P(X86, Targets, ::testing::Values("x86-64-avx512", "x86-64-avx2", "x86-64-sse41"),
                         [](const auto &i) {
                           std::string s = i.param;
                           for (char &c : s)
                             if (c == '-') c = '_';
                           return s;
                         });
}  // namespace
