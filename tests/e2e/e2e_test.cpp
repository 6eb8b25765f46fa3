// End-to-end tests: small models written in the DSL, compiled to standalone executables, run
// with random weights (saved with --save-weights), and compared output by output with the
// plain-loop reference in tests/reference at two or more shapes and lengths.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <cmath>
#include <filesystem>
#include <functional>
#include <fstream>
#include <sstream>

#include "harness.h"
#include "models.h"
#include "kiln/dsl/Blocks.h"
#include "kilnrt/api.h"

using namespace kiln;
using W = std::map<std::string, ref::T>;

namespace {

// Runs `exe` with random weights and `inputArgs`, returns the weights used and output `name`.
ref::T runModel(const std::string &dir, const std::string &exe, const std::string &inputArgs, const std::string &name,
                W &weights, int seed = 3) {
  std::string wpath = dir + "/weights.safetensors", odir = dir + "/out";
  std::string cmd = exe + " --random-weights --seed " + std::to_string(seed) + " --save-weights " + wpath + " " +
                    inputArgs + " --output-dir " + odir;
  fprintf(stderr, "[ run      ] %s\n", cmd.c_str());
  auto r = kt::run(cmd);
  EXPECT_EQ(r.code, 0) << r.output;
  weights = kt::loadWeights(wpath);
  return kt::loadNpy(odir + "/" + name + ".npy");
}

// ---------------------------------------------------------------- MLP
struct MlpCfg {
  int64_t d, h, bound, L;
};
class Mlp : public ::testing::TestWithParam<MlpCfg> {};

TEST_P(Mlp, MatchesReference) {
  MlpCfg c = GetParam();
  std::string dir = kt::workDir("mlp_" + std::to_string(c.d) + "_" + std::to_string(c.L));
  std::string exe = kt::compile(dir, "mlp", [&](Model &m) {
    Dim L = m.seq("L", c.bound);
    Tensor x = m.input("x", {L, c.d});
    Tensor h = relu(linear(x, m.param("fc1.w", {c.d, c.h}), m.param("fc1.b", {c.h}), {.layout = WeightLayout::InOut}));
    Tensor y = gelu(linear(h, m.param("fc2.w", {c.d, c.h}), m.param("fc2.b", {c.d})));
    m.output("y", add(y, x));
  });
  ASSERT_FALSE(exe.empty());
  ref::T x = kt::randomT({c.L, c.d}, 7);
  kt::saveNpy(dir + "/x.npy", x);
  W w;
  ref::T got = runModel(dir, exe, "--input x=" + dir + "/x.npy", "y", w);
  ref::T h = ref::relu(ref::linear(x, w["fc1.w"], w["fc1.b"], false));
  ref::T y = ref::add(ref::gelu_erf(ref::linear(h, w["fc2.w"], w["fc2.b"], true)), x);
  EXPECT_TRUE(kt::allClose(y, got));
}
INSTANTIATE_TEST_SUITE_P(Shapes, Mlp, ::testing::Values(MlpCfg{32, 64, 16, 5}, MlpCfg{48, 80, 64, 37}),
                         [](const auto &i) { return "d" + std::to_string(i.param.d) + "_L" + std::to_string(i.param.L); });

// ---------------------------------------------------------------- one attention layer
struct AttnCfg {
  int64_t d, heads, vocab, bound, L;
  bool causal;
};
class AttentionLayer : public ::testing::TestWithParam<AttnCfg> {};

TEST_P(AttentionLayer, MatchesReference) {
  AttnCfg c = GetParam();
  std::string dir = kt::workDir("attn_" + std::to_string(c.d) + "_" + std::to_string(c.L) + (c.causal ? "c" : ""));
  std::string exe = kt::compile(dir, "attn", [&](Model &m) {
    Dim L = m.seq("L", c.bound);
    Tensor t = m.tokens("tokens", L, c.vocab);
    Tensor x = add(embedding(m.param("emb", {c.vocab, c.d}, {.scale = 0.5f}), t),
                   position_embedding(m.param("pos", {c.bound, c.d}, {.scale = 0.5f}), t));
    m.output("y", multi_head_attention(m, "attn", x, x,
                                       {.d_model = c.d, .heads = c.heads, .mask = c.causal ? Mask::causal() : Mask::none()}));
  });
  ASSERT_FALSE(exe.empty());
  auto ids = kt::randomIds((int)c.L, (int)c.vocab, 11);
  W w;
  ref::T got = runModel(dir, exe, "--tokens " + kt::idList(ids), "y", w, 5);
  ref::T x = ref::add(ref::embedding(w["emb"], ids), ref::rows(w["pos"], c.L));
  auto lin = [&](const ref::T &in, const std::string &p) { return ref::linear(in, w[p + ".weight"], w[p + ".bias"], true); };
  ref::T a = ref::mha_core(lin(x, "attn.q"), lin(x, "attn.k"), lin(x, "attn.v"), c.heads, c.causal);
  EXPECT_TRUE(kt::allClose(lin(a, "attn.out"), got));
}
INSTANTIATE_TEST_SUITE_P(Shapes, AttentionLayer,
                         ::testing::Values(AttnCfg{64, 4, 50, 32, 7, false}, AttnCfg{64, 4, 50, 64, 33, true},
                                           AttnCfg{96, 3, 40, 48, 48, true}),
                         [](const auto &i) {
                           return "d" + std::to_string(i.param.d) + "_L" + std::to_string(i.param.L) +
                                  (i.param.causal ? "_causal" : "");
                         });

// ---------------------------------------------------------------- transformer stacks
struct StackCfg {
  int64_t layers, d, heads, vocab, bound;
  std::vector<int64_t> lengths;
};

class Gpt2Decoder : public ::testing::TestWithParam<StackCfg> {};

TEST_P(Gpt2Decoder, MatchesReferenceAtEveryLength) {
  StackCfg c = GetParam();
  std::string dir = kt::workDir("gpt_" + std::to_string(c.d) + "_" + std::to_string(c.layers) + "_" + std::to_string(c.vocab) + "_" + std::to_string(c.heads));
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
    ref::T got = runModel(dir, exe, "--tokens " + kt::idList(ids), "logits", w);
    EXPECT_TRUE(kt::allClose(ref::gpt2(w, ids, c.layers, c.heads), got));
  }
}
INSTANTIATE_TEST_SUITE_P(Shapes, Gpt2Decoder,
                         ::testing::Values(StackCfg{2, 64, 4, 96, 64, {1, 13, 64}}, StackCfg{2, 128, 8, 256, 128, {5, 100}}, StackCfg{1, 128, 8, 256, 128, {5}}, StackCfg{2, 128, 8, 96, 64, {5}}, StackCfg{2, 128, 4, 256, 128, {5}}, StackCfg{0, 128, 4, 256, 128, {5}}, StackCfg{0, 64, 4, 256, 64, {5}}, StackCfg{0, 64, 4, 200, 64, {5}}, StackCfg{0, 64, 4, 96, 64, {5}}),
                         [](const auto &i) { return "d" + std::to_string(i.param.d) + "_l" + std::to_string(i.param.layers) + "_v" + std::to_string(i.param.vocab) + "_h" + std::to_string(i.param.heads); });

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
    ref::T got = runModel(dir, exe, "--tokens " + kt::idList(ids), "hidden", w);
    ref::T x = ref::add(ref::embedding(w["emb"], ids), ref::rows(w["pos"], len));
    for (int64_t i = 0; i < c.layers; ++i)
      x = ref::block(w, "layer." + std::to_string(i), x, {c.heads, false, false, true, false, 1e-12f});
    EXPECT_TRUE(kt::allClose(x, got));
  }
}
INSTANTIATE_TEST_SUITE_P(Shapes, PostNormEncoder,
                         ::testing::Values(StackCfg{2, 64, 2, 80, 48, {3, 48}}, StackCfg{2, 96, 6, 120, 96, {17, 90}}),
                         [](const auto &i) { return "d" + std::to_string(i.param.d) + "_l" + std::to_string(i.param.layers) + "_v" + std::to_string(i.param.vocab) + "_h" + std::to_string(i.param.heads); });

}  // namespace

namespace {
// ---------------------------------------------------------------- single linears, every tiling case
struct LinCfg {
  int64_t k, n, L;
  bool out_in, bias;
};
class Linear : public ::testing::TestWithParam<LinCfg> {};

TEST_P(Linear, MatchesReference) {
  LinCfg c = GetParam();
  std::string tag = std::to_string(c.k) + "x" + std::to_string(c.n) + (c.out_in ? "_oi" : "_io") + (c.bias ? "_b" : "") +
                    "_L" + std::to_string(c.L);
  std::string dir = kt::workDir("linear_" + tag);
  std::string exe = kt::compile(dir, "lin", [&](Model &m) {
    Dim L = m.seq("L", 64);
    Tensor x = m.input("x", {L, c.k});
    Tensor w = m.param("w", c.out_in ? Shape{c.n, c.k} : Shape{c.k, c.n}, {.scale = 0.5f});
    LinearOptions o{.layout = c.out_in ? WeightLayout::OutIn : WeightLayout::InOut};
    m.output("y", c.bias ? linear(x, w, m.param("b", {c.n}, {.scale = 0.5f}), o) : linear(x, w, o));
  });
  ASSERT_FALSE(exe.empty());
  ref::T x = kt::randomT({c.L, c.k}, 3);
  kt::saveNpy(dir + "/x.npy", x);
  W w;
  ref::T got = runModel(dir, exe, "--input x=" + dir + "/x.npy", "y", w);
  EXPECT_TRUE(kt::allClose(ref::linear(x, w["w"], c.bias ? w["b"] : ref::T(), c.out_in), got));
}
INSTANTIATE_TEST_SUITE_P(Tiles, Linear,
                         ::testing::Values(LinCfg{128, 256, 5, true, false}, LinCfg{128, 256, 5, false, true},
                                           LinCfg{128, 64, 5, true, false}, LinCfg{128, 128, 5, true, false},
                                           LinCfg{32, 10, 7, false, true}, LinCfg{17, 100, 64, true, true},
                                           LinCfg{64, 64, 1, false, false},
                                           // a long reduction (the weight panel is packed)
                                           LinCfg{2048, 512, 37, true, true}, LinCfg{2048, 512, 1, false, false}),
                         [](const auto &i) {
                           auto &c = i.param;
                           return std::to_string(c.k) + "x" + std::to_string(c.n) + (c.out_in ? "_oi" : "_io") +
                                  (c.bias ? "_b" : "") + "_L" + std::to_string(c.L);
                         });
}  // namespace

namespace {
// ---------------------------------------------------------------- embeddings + layer norm
struct EmbCfg {
  int64_t vocab, d, bound, L;
};
class EmbeddingNorm : public ::testing::TestWithParam<EmbCfg> {};

TEST_P(EmbeddingNorm, MatchesReference) {
  EmbCfg c = GetParam();
  std::string dir = kt::workDir("embnorm_" + std::to_string(c.vocab) + "_" + std::to_string(c.d) + "_" + std::to_string(c.bound));
  std::string exe = kt::compile(dir, "embnorm", [&](Model &m) {
    Dim L = m.seq("L", c.bound);
    Tensor t = m.tokens("tokens", L, c.vocab);
    Tensor e = embedding(m.param("wte", {c.vocab, c.d}, {.scale = 0.5f}), t);
    Tensor p = position_embedding(m.param("wpe", {c.bound, c.d}, {.scale = 0.5f}), t);
    m.output("e", e);
    m.output("p", p);
    m.output("n", layer_norm(add(e, p), m.param("g", {c.d}, {.scale = 0.5f}), m.param("b", {c.d}, {.scale = 0.5f})));
  });
  ASSERT_FALSE(exe.empty());
  auto ids = kt::randomIds((int)c.L, (int)c.vocab, 9);
  W w;
  ref::T e = runModel(dir, exe, "--tokens " + kt::idList(ids), "e", w);
  EXPECT_TRUE(kt::allClose(ref::embedding(w["wte"], ids), e));
  EXPECT_TRUE(kt::allClose(ref::rows(w["wpe"], c.L), kt::loadNpy(dir + "/out/p.npy")));
  ref::T x = ref::add(ref::embedding(w["wte"], ids), ref::rows(w["wpe"], c.L));
  EXPECT_TRUE(kt::allClose(ref::layer_norm(x, w["g"], w["b"], 1e-5f), kt::loadNpy(dir + "/out/n.npy")));
}
INSTANTIATE_TEST_SUITE_P(Shapes, EmbeddingNorm,
                         ::testing::Values(EmbCfg{256, 128, 128, 5}, EmbCfg{256, 64, 64, 5}, EmbCfg{96, 128, 128, 5}, EmbCfg{256, 128, 64, 5}),
                         [](const auto &i) {
                           return "v" + std::to_string(i.param.vocab) + "_d" + std::to_string(i.param.d) + "_b" +
                                  std::to_string(i.param.bound);
                         });
}  // namespace

namespace {
// ---------------------------------------------------------------- kilnc and other targets
const std::string kSrc = KILN_SOURCE_DIR;

TEST(Kilnc, CompilesAKilnDialectFileEndToEnd) {
  std::string dir = kt::workDir("kilnc");
  auto r = kt::run(std::string(KILN_BIN) + "/kilnc " + kSrc + "/tests/e2e/mlir/mlp.mlir --quiet --cache-dir " +
                   KILN_TEST_CACHE + " -o " + dir + "/mlp");
  ASSERT_EQ(r.code, 0) << r.output;
  ref::T x = kt::randomT({9, 16}, 4);
  kt::saveNpy(dir + "/x.npy", x);
  W w;
  ref::T got = runModel(dir, dir + "/mlp", "--input x=" + dir + "/x.npy", "y", w);
  ref::T h = ref::relu(ref::linear(x, w["fc1.w"], w["fc1.b"], true));
  EXPECT_TRUE(kt::allClose(ref::linear(h, w["fc2.w"], {}, false), got));
}

TEST(Kilnc, RejectsInputWithoutSequenceBounds) {
  auto r = kt::run(std::string(KILN_BIN) + "/kilnc " + kSrc + "/tests/e2e/mlir/no_bounds.mlir --quiet -o /dev/null");
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.output.find("expected module attributes kiln.seq_names"), std::string::npos) << r.output;
  r = kt::run(std::string(KILN_BIN) + "/kilnc " + kSrc + "/tests/e2e/mlir/absent.mlir --quiet -o /dev/null");
  EXPECT_EQ(r.code, 1);
}

TEST(Kilnc, DslOutputRoundTripsThroughKilnc) {
  // gpt2-compile --emit=mlir, then kilnc on that file: same executable behaviour.
  std::string dir = kt::workDir("roundtrip");
  std::string cfg = " --layers 1 --d-model 64 --heads 4 --vocab 64 --ctx 32 --quiet --cache-dir " + std::string(KILN_TEST_CACHE);
  auto r = kt::run(std::string(KILN_BIN) + "/gpt2-compile" + cfg + " --compile-to=input -o " + dir + "/g.mlir");
  ASSERT_EQ(r.code, 0) << r.output;
  r = kt::run(std::string(KILN_BIN) + "/kilnc " + dir + "/g.mlir --quiet --cache-dir " + KILN_TEST_CACHE + " -o " + dir + "/a");
  ASSERT_EQ(r.code, 0) << r.output;
  r = kt::run(std::string(KILN_BIN) + "/gpt2-compile" + cfg + " -o " + dir + "/b");
  ASSERT_EQ(r.code, 0) << r.output;
  auto a = kt::run(dir + "/a --random-weights --tokens 5,6,7 --output-dir " + dir + "/oa");
  auto b = kt::run(dir + "/b --random-weights --tokens 5,6,7 --output-dir " + dir + "/ob");
  ASSERT_EQ(a.code, 0) << a.output;
  ASSERT_EQ(b.code, 0) << b.output;
  EXPECT_TRUE(kt::allClose(kt::loadNpy(dir + "/ob/logits.npy"), kt::loadNpy(dir + "/oa/logits.npy")));
}

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
  ref::T got = runModel(dir, exe, "--tokens " + kt::idList(ids), "logits", w);
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

namespace {
// ---------------------------------------------------------------- attention written as separate ops
struct OpsAttnCfg {
  int64_t d, heads, L;
  bool causal = false;
};
class AttentionFromOps : public ::testing::TestWithParam<OpsAttnCfg> {};

TEST_P(AttentionFromOps, MatchesReference) {
  OpsAttnCfg c = GetParam();
  std::string dir = kt::workDir("opsattn_" + std::to_string(c.d) + "_" + std::to_string(c.L));
  std::string exe = kt::compile(dir, "opsattn", [&](Model &m) {
    Dim L = m.seq("L", 64);
    Tensor x = m.input("x", {L, c.d});
    auto proj = [&](const char *n) { return split_heads(linear(x, m.param(n, {c.d, c.d})), c.heads); };
    Tensor q = proj("wq"), k = proj("wk"), v = proj("wv");
    Tensor s = scale(batch_matmul(q, k, {.transpose_b = true}), 1.0f / std::sqrt((float)(c.d / c.heads)));
    if (c.causal) s = add(s, mask_for(s, Mask::causal()));
    m.output("y", merge_heads(batch_matmul(softmax(s), v)));
  }, {"--dump-dir", dir + "/dump"});
  ASSERT_FALSE(exe.empty());
  // The chain was fused: the kernels phase has one attention and no softmax.
  std::ifstream f(dir + "/dump/01-kiln-fuse-attention.mlir");
  std::string ir((std::istreambuf_iterator<char>(f)), {});
  EXPECT_NE(ir.find("kiln.attention"), std::string::npos);
  EXPECT_EQ(ir.find("kiln.softmax"), std::string::npos);
  ref::T x = kt::randomT({c.L, c.d}, 8);
  kt::saveNpy(dir + "/x.npy", x);
  W w;
  ref::T got = runModel(dir, exe, "--input x=" + dir + "/x.npy", "y", w);
  auto lin = [&](const char *n) { return ref::linear(x, w[n], {}, true); };
  EXPECT_TRUE(kt::allClose(ref::mha_core(lin("wq"), lin("wk"), lin("wv"), c.heads, c.causal), got));
}
INSTANTIATE_TEST_SUITE_P(Shapes, AttentionFromOps,
                         ::testing::Values(OpsAttnCfg{32, 2, 1}, OpsAttnCfg{64, 4, 37}, OpsAttnCfg{48, 3, 64},
                                           OpsAttnCfg{64, 4, 37, true}, OpsAttnCfg{32, 1, 1, true}),
                         [](const auto &i) {
                           return "d" + std::to_string(i.param.d) + "_L" + std::to_string(i.param.L) +
                                  (i.param.causal ? "_causal" : "");
                         });


// Causal attention with more queries than keys: the first Lq - Lk query rows see no key at all.
// Fused (kiln.attention) and unfused (the scores are an output too, so nothing fuses) both give
// zeros there, never NaN or the mean of v. Scores of about ±1e4 stay finite and exact.
TEST(AttentionEdges, FullyMaskedRowsAndHugeLogits) {
  std::string dir = kt::workDir("attn_edges");
  std::string exe = kt::compile(dir, "edges", [&](Model &m) {
    Dim Lq = m.seq("Lq", 16), Lk = m.seq("Lk", 16);
    Tensor q = m.input("q", {2, Lq, 8}), k = m.input("k", {2, Lk, 8}), v = m.input("v", {2, Lk, 8});
    m.output("fused", attention(q, k, v, {.mask = Mask::causal()}));
    Tensor s = scale(batch_matmul(q, k, {.transpose_b = true}), 1.0f / std::sqrt(8.0f));
    s = add(s, mask_for(s, Mask::causal()));
    m.output("scores", s);
    m.output("unfused", batch_matmul(softmax(s), v));
  });
  ASSERT_FALSE(exe.empty());
  for (float mag : {1.0f, 300.0f}) {
    SCOPED_TRACE("magnitude " + std::to_string(mag));
    ref::T q = kt::randomT({2, 10, 8}, 1, mag), k = kt::randomT({2, 4, 8}, 2, mag), v = kt::randomT({2, 4, 8}, 3);
    for (auto [n, t] : {std::pair<const char *, ref::T *>{"q", &q}, {"k", &k}, {"v", &v}}) kt::saveNpy(dir + "/" + n + ".npy", *t);
    auto r = kt::run(exe + " --input q=" + dir + "/q.npy --input k=" + dir + "/k.npy --input v=" + dir +
                     "/v.npy --output-dir " + dir + "/out");
    ASSERT_EQ(r.code, 0) << r.output;
    ref::T want = ref::mha_core(ref::from_heads(q), ref::from_heads(k), ref::from_heads(v), 2, true);
    for (const char *out : {"fused", "unfused"}) {
      ref::T got = ref::from_heads(kt::loadNpy(dir + "/out/" + std::string(out) + ".npy"));
      EXPECT_TRUE(kt::allClose(want, got)) << out;
      for (int64_t i = 0; i < 6; ++i)
        for (int64_t c = 0; c < 16; ++c) EXPECT_EQ(got.at(i, c), 0.0f) << out << " row " << i;
    }
  }
}
}  // namespace

namespace {
// ---------------------------------------------------------------- chunked FFN at every chunk size
struct FfnCfg {
  std::string chunk;
  int64_t d, dff, L;
  bool out_in;
};
class ChunkedFfn : public ::testing::TestWithParam<FfnCfg> {};

TEST_P(ChunkedFfn, MatchesReference) {
  FfnCfg c = GetParam();
  std::string tag = c.chunk + "_" + std::to_string(c.d) + "x" + std::to_string(c.dff) + "_L" + std::to_string(c.L) +
                    (c.out_in ? "_oi" : "_io");
  std::string dir = kt::workDir("ffn_" + tag);
  std::string exe = kt::compile(dir, "ffn", [&](Model &m) {
    Dim L = m.seq("L", 128);
    Tensor x = m.input("x", {L, c.d});
    WeightLayout lay = c.out_in ? WeightLayout::OutIn : WeightLayout::InOut;
    Shape s1 = c.out_in ? Shape{c.dff, c.d} : Shape{c.d, c.dff}, s2 = c.out_in ? Shape{c.d, c.dff} : Shape{c.dff, c.d};
    Tensor h = gelu(linear(x, m.param("w1", s1), m.param("b1", {c.dff}), {.layout = lay}), {.approx = GeluApprox::Tanh});
    m.output("y", add(x, linear(h, m.param("w2", s2), m.param("b2", {c.d}), {.layout = lay})));
  }, {"--ffn-chunk", c.chunk, "--dump-dir", dir + "/dump"});
  ASSERT_FALSE(exe.empty());
  std::string ir;
  for (auto &e : std::filesystem::directory_iterator(dir + "/dump"))
    if (e.path().string().ends_with("-kiln-plan-buffers.mlir")) {
      std::ifstream f(e.path());
      ir.assign(std::istreambuf_iterator<char>(f), {});
    }
  ASSERT_FALSE(ir.empty());
  EXPECT_EQ(ir.find("kiln.ffn") != std::string::npos, c.chunk != "off");
  ref::T x = kt::randomT({c.L, c.d}, 12);
  kt::saveNpy(dir + "/x.npy", x);
  W w;
  ref::T got = runModel(dir, exe, "--input x=" + dir + "/x.npy", "y", w);
  ref::T h = ref::gelu_tanh(ref::linear(x, w["w1"], w["b1"], c.out_in));
  EXPECT_TRUE(kt::allClose(ref::add(x, ref::linear(h, w["w2"], w["b2"], c.out_in)), got));
}
INSTANTIATE_TEST_SUITE_P(Chunks, ChunkedFfn,
                         ::testing::Values(FfnCfg{"off", 48, 200, 37, false}, FfnCfg{"auto", 48, 200, 37, false},
                                           FfnCfg{"4", 48, 200, 37, false}, FfnCfg{"50", 48, 200, 37, true},
                                           FfnCfg{"16", 64, 256, 100, true}, FfnCfg{"auto", 64, 256, 1, false},
                                           FfnCfg{"8", 20, 36, 9, false}),
                         [](const auto &i) {
                           auto &c = i.param;
                           return c.chunk + "_" + std::to_string(c.d) + "x" + std::to_string(c.dff) + "_L" +
                                  std::to_string(c.L) + (c.out_in ? "_oi" : "_io");
                         });
}  // namespace

namespace {
// ---------------------------------------------------------------- sinusoidal positions
TEST(SinusoidalPositions, MatchReferenceAtSeveralLengths) {
  std::string dir = kt::workDir("sinusoid");
  std::string exe = kt::compile(dir, "pe", [&](Model &m) {
    Dim L = m.seq("L", 256);
    Tensor t = m.tokens("tokens", L, 20);
    m.output("pe", sinusoidal_positions(t, 30));
    m.output("x", add(embedding(m.param("emb", {20, 64}), t), sinusoidal_positions(t, 64)));
  });
  ASSERT_FALSE(exe.empty());
  for (int L : {1, 37, 256}) {
    SCOPED_TRACE("L = " + std::to_string(L));
    auto ids = kt::randomIds(L, 20, (unsigned)L);
    W w;
    ref::T pe = runModel(dir, exe, "--tokens " + kt::idList(ids), "pe", w);
    EXPECT_TRUE(kt::allClose(ref::sinusoid(L, 30), pe));
    EXPECT_TRUE(kt::allClose(ref::add(ref::embedding(w["emb"], ids), ref::sinusoid(L, 64)), kt::loadNpy(dir + "/out/x.npy")));
  }
}
}  // namespace

namespace {
// ---------------------------------------------------------------- examples/gpt2 with a Hugging Face file
// The example reads GPT-2's names and layouts: here without the "transformer." prefix and with
// the attention mask buffers real checkpoints carry, which are ignored and reported.
TEST(Gpt2Example, LoadsHuggingFaceNamesWithoutPrefixAndIgnoresMaskBuffers) {
  std::string dir = kt::workDir("gpt2_hf");
  std::string exe = std::string(KILN_BIN) + "/gpt2";  // 2 layers, d 128, 4 heads, vocab 256, ctx 128
  auto r = kt::run(exe + " --random-weights --seed 7 --save-weights " + dir + "/full.safetensors --tokens 1");
  ASSERT_EQ(r.code, 0) << r.output;
  W full = kt::loadWeights(dir + "/full.safetensors");
  W stripped;
  for (auto &[name, t] : full) {
    ASSERT_EQ(name.rfind("transformer.", 0), 0u) << name;
    stripped[name.substr(12)] = t;
  }
  ref::T mask({1, 1, 4, 4}), masked_bias({1});
  stripped["h.0.attn.bias"] = mask;
  stripped["h.1.attn.masked_bias"] = masked_bias;
  kt::saveWeights(dir + "/hf.safetensors", stripped);
  auto ids = kt::randomIds(19, 256, 3);
  r = kt::run(exe + " --weights " + dir + "/hf.safetensors --tokens " + kt::idList(ids) + " --output-dir " + dir + "/out");
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("ignored 2 tensors"), std::string::npos) << r.output;
  EXPECT_TRUE(kt::allClose(ref::gpt2_hf(stripped, ids, 2, 4, ""), kt::loadNpy(dir + "/out/logits.npy")));
}
}  // namespace

namespace {
// ---------------------------------------------------------------- numeric edge cases
// Softmax of logits of +-1e4 is finite and exact; LayerNorm of a constant row is beta (no NaN
// from a zero variance); a NaN or infinity in an input is rejected before any work (it would
// not propagate reliably: ReLU and softmax's row max can drop it).
TEST(NumericEdges, HugeLogitsConstantRowsAndNaN) {
  std::string dir = kt::workDir("numeric_edges");
  std::string exe = kt::compile(dir, "edges", [&](Model &m) {
    Dim L = m.seq("L", 16);
    Tensor x = m.input("x", {L, 20});
    m.output("softmax", softmax(x));
    m.output("norm", layer_norm(x, m.param("g", {20}), m.param("b", {20})));
    m.output("mlp", linear(relu(linear(x, m.param("w1", {32, 20}))), m.param("w2", {20, 32})));
  });
  ASSERT_FALSE(exe.empty());
  ref::T x = kt::randomT({4, 20}, 5, 1e4f);  // row 0: +-1e4 logits
  for (int c = 0; c < 20; ++c) x.at(1, c) = 3.5f;  // row 1: constant
  for (float bad : {NAN, INFINITY}) {
    ref::T y = x;
    y.at(3, 7) = bad;
    kt::saveNpy(dir + "/bad.npy", y);
    auto r = kt::run(exe + " --random-weights --input x=" + dir + "/bad.npy");
    EXPECT_EQ(r.code, 1) << r.output;
    EXPECT_NE(r.output.find("input 'x' holds a non-finite value"), std::string::npos) << r.output;
    EXPECT_NE(r.output.find("at flat index 67"), std::string::npos) << r.output;
  }
  kt::saveNpy(dir + "/x.npy", x);
  W w;
  ref::T sm = runModel(dir, exe, "--input x=" + dir + "/x.npy", "softmax", w);
  ref::T norm = kt::loadNpy(dir + "/out/norm.npy"), mlp = kt::loadNpy(dir + "/out/mlp.npy");
  EXPECT_TRUE(kt::allClose(ref::softmax_rows(x), sm));
  EXPECT_TRUE(kt::allClose(ref::layer_norm(x, w["g"], w["b"], 1e-5f), norm));
  for (int c = 0; c < 20; ++c) EXPECT_EQ(norm.at(1, c), w["b"].v[c]) << "constant row, column " << c;
  EXPECT_TRUE(kt::allClose(ref::linear(ref::relu(ref::linear(x, w["w1"], {}, true)), w["w2"], {}, true), mlp));
  for (float f : sm.v) EXPECT_TRUE(std::isfinite(f));
}
}  // namespace

namespace {
// ---------------------------------------------------------------- examples/bert with a Hugging Face file
// Names with the "bert." prefix plus the tensors BERT checkpoints carry that are not encoder
// weights (position_ids, pooler, cls head); token_type_ids given, and left out (zeros).
TEST(BertExample, LoadsHuggingFaceNamesAndDefaultsTokenTypes) {
  std::string dir = kt::workDir("bert_hf");
  std::string exe = std::string(KILN_BIN) + "/bert";  // 2 layers, d 64, 4 heads, vocab 512, ctx 128
  auto r = kt::run(exe + " --random-weights --seed 4 --save-weights " + dir + "/full.safetensors --tokens 1");
  ASSERT_EQ(r.code, 0) << r.output;
  W w = kt::loadWeights(dir + "/full.safetensors");
  W extra = w;
  extra["bert.pooler.dense.weight"] = kt::randomT({64, 64}, 1);
  extra["cls.predictions.bias"] = kt::randomT({512}, 2);
  extra["bert.embeddings.position_ids"] = ref::T({1, 128});
  kt::saveWeights(dir + "/hf.safetensors", extra);
  auto ids = kt::randomIds(23, 512, 9);
  std::vector<int32_t> types(23, 0);
  for (int i = 12; i < 23; ++i) types[i] = 1;
  r = kt::run(exe + " --weights " + dir + "/hf.safetensors --tokens tokens=" + kt::idList(ids) + " --tokens token_type_ids=" +
              kt::idList(types) + " --output-dir " + dir + "/out");
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("ignored 3 tensors"), std::string::npos) << r.output;
  EXPECT_TRUE(kt::allClose(ref::bert_hf(w, ids, types, 2, 4, "bert."), kt::loadNpy(dir + "/out/hidden.npy")));
  r = kt::run(exe + " --weights " + dir + "/hf.safetensors --tokens " + kt::idList(ids) + " --output-dir " + dir + "/out0");
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_TRUE(kt::allClose(ref::bert_hf(w, ids, std::vector<int32_t>(23, 0), 2, 4, "bert."), kt::loadNpy(dir + "/out0/hidden.npy")));
  r = kt::run(exe + " --weights " + dir + "/hf.safetensors --tokens " + kt::idList(ids) + " --tokens token_type_ids=0,2");
  EXPECT_EQ(r.code, 1);
}
}  // namespace

namespace {
// ---------------------------------------------------------------- examples/transformer
// Source and target lengths are separate sequence lengths: several pairs, including a target
// longer than the source and length 1, against the plain reference of the same layout.
TEST(TransformerExample, MatchesReferenceAtSeveralLengthPairs) {
  std::string dir = kt::workDir("transformer");
  std::string exe = std::string(KILN_BIN) + "/transformer";  // 2+2 layers, d 64, 4 heads, d_ff 128, vocab 300/310
  for (auto [S, T] : {std::pair<int, int>{7, 5}, {1, 1}, {3, 20}, {64, 64}}) {
    SCOPED_TRACE("S = " + std::to_string(S) + ", T = " + std::to_string(T));
    auto src = kt::randomIds(S, 300, (unsigned)S), tgt = kt::randomIds(T, 310, (unsigned)(T + 100));
    W w;
    ref::T got = runModel(dir, exe, "--tokens src_tokens=" + kt::idList(src) + " --tokens tgt_tokens=" + kt::idList(tgt),
                          "logits", w, 6);
    EXPECT_TRUE(kt::allClose(ref::transformer(w, src, tgt, 2, 4), got));
  }
}
}  // namespace

namespace {
// ---------------------------------------------------------------- PyTorch fixtures
// tests/reference/make_fixtures.py wrote these with PyTorch (GPT-2 and BERT written out in
// plain torch with Hugging Face names, the Transformer through torch.nn.Transformer), including
// the non-weight tensors real checkpoints carry. Each example, compiled at the fixture's size,
// must reproduce PyTorch's output from the same file.
struct Fixture {
  std::string model, flags, inputs, output;
};
class PyTorchFixtures : public ::testing::TestWithParam<Fixture> {};

TEST_P(PyTorchFixtures, ExampleMatchesPyTorch) {
  const Fixture &f = GetParam();
  std::string dir = kt::workDir("fixture_" + f.model), fx = kSrc + "/tests/fixtures/" + f.model;
  auto r = kt::run(std::string(KILN_BIN) + "/" + f.model + "-compile " + f.flags + " --quiet --cache-dir " + KILN_TEST_CACHE +
                   " -o " + dir + "/" + f.model);
  ASSERT_EQ(r.code, 0) << r.output;
  std::string inputs;
  std::stringstream ss(f.inputs);
  for (std::string in; ss >> in;) inputs += " --input " + in + "=" + fx + "/" + in + ".npy";
  r = kt::run(dir + "/" + f.model + " --weights " + fx + "/weights.safetensors" + inputs + " --output-dir " + dir + "/out");
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_TRUE(kt::allClose(kt::loadNpy(fx + "/" + f.output + ".npy"), kt::loadNpy(dir + "/out/" + f.output + ".npy")));
}
INSTANTIATE_TEST_SUITE_P(
    Models, PyTorchFixtures,
    ::testing::Values(Fixture{"gpt2", "--layers 2 --d-model 64 --heads 4 --vocab 256 --ctx 64", "tokens", "logits"},
                      Fixture{"bert", "--layers 2 --d-model 64 --heads 4 --vocab 256 --ctx 64", "tokens token_type_ids", "hidden"},
                      Fixture{"transformer",
                              "--layers 2 --d-model 64 --heads 4 --d-ff 128 --src-vocab 200 --tgt-vocab 210 --ctx 64",
                              "src_tokens tgt_tokens", "logits"}),
    [](const auto &i) { return i.param.model; });
}  // namespace

namespace {
// ---------------------------------------------------------------- KV-cache generation
std::vector<int32_t> readIds(const std::string &path) {
  kilnrt_tensor g;
  EXPECT_EQ(kilnrt_npy_read(path.c_str(), &g), KILNRT_OK) << path;
  if (!g.data) return {};
  std::vector<int32_t> ids((int32_t *)g.data, (int32_t *)g.data + kilnrt_tensor_numel(&g));
  kilnrt_tensor_free(&g);
  return ids;
}

// Greedy decoding with a plain reference that reruns the whole sequence each step:
// `logits(seq)` gives [len, vocab]; `seq` starts as the prompt and grows by n tokens.
std::vector<int32_t> greedyReference(std::vector<int32_t> seq, int n,
                                     const std::function<ref::T(const std::vector<int32_t> &)> &logits) {
  std::vector<int32_t> want;
  for (int k = 0; k < n; ++k) {
    ref::T l = logits(seq);
    int64_t V = l.shape[1];
    const float *last = &l.v[(l.shape[0] - 1) * V];
    want.push_back((int32_t)(std::max_element(last, last + V) - last));
    seq.push_back(want.back());
  }
  return want;
}

// Runs `exe ... --generate n`, checks the printed line and generated.npy against `want` and
// PyTorch's tokens (the fixture's generated.npy; make_fixtures.py checked their margins).
void expectGenerated(const std::string &dir, const std::string &cmd, int n, const std::vector<int32_t> &want,
                     const std::string &fixture) {
  auto r = kt::run(cmd + " --generate " + std::to_string(n) + " --output-dir " + dir + "/out");
  ASSERT_EQ(r.code, 0) << r.output;
  std::string printed;
  for (size_t i = 0; i < want.size(); ++i) printed += (i ? " " : "") + std::to_string(want[i]);
  EXPECT_NE(r.output.find(printed), std::string::npos) << "kiln printed: " << r.output << "reference: " << printed;
  std::vector<int32_t> got = readIds(dir + "/out/generated.npy");
  EXPECT_EQ(got, want);
  EXPECT_EQ(got, readIds(fixture + "/generated.npy"));
  std::set<int32_t> distinct(got.begin(), got.end());
  EXPECT_GT(distinct.size(), 2u) << "a sequence of one repeated token would not test the cache";
}

// examples/gpt2 --generate: the prompt runs once (filling the caches), then one decode step per
// token attends to the cache. The tokens must equal greedy decoding with the plain reference
// rerunning the whole prefix each step (PyTorch fixture weights: clear top-1 margins).
TEST(Gpt2Generate, KvCacheDecodingMatchesGreedyReference) {
  std::string dir = kt::workDir("gpt2_generate"), fx = kSrc + "/tests/fixtures/gpt2";
  auto r = kt::run(std::string(KILN_BIN) + "/gpt2-compile --layers 2 --d-model 64 --heads 4 --vocab 256 --ctx 64 --quiet "
                   "--cache-dir " + std::string(KILN_TEST_CACHE) + " -o " + dir + "/gpt2");
  ASSERT_EQ(r.code, 0) << r.output;
  W w = kt::loadWeights(fx + "/weights.safetensors");
  std::vector<int32_t> prompt{17, 4, 99, 3, 250};
  const int n = 12;
  std::string cmd = dir + "/gpt2 --weights " + fx + "/weights.safetensors --tokens " + kt::idList(prompt);
  expectGenerated(dir, cmd, n,
                  greedyReference(prompt, n, [&](const std::vector<int32_t> &seq) { return ref::gpt2_hf(w, seq, 2, 4, ""); }),
                  fx);
  // Past the compiled bound: rejected with a message (after the prompt ran).
  r = kt::run(cmd + " --generate 60");
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.output.find("exceeds the compiled bound 64"), std::string::npos) << r.output;
}

// examples/transformer --generate: the encoder runs once (its `encode` entry fills every decoder
// layer's cross-attention keys and values), then each decode step runs one target token through
// the decoder with its own self-attention cache. Must equal greedy decoding with the reference
// rerunning the whole encoder-decoder on the growing target, and PyTorch's tokens.
TEST(TransformerGenerate, EncodeOnceThenCachedDecodingMatchesGreedyReference) {
  std::string dir = kt::workDir("transformer_generate"), fx = kSrc + "/tests/fixtures/transformer";
  auto r = kt::run(std::string(KILN_BIN) + "/transformer-compile --layers 2 --d-model 64 --heads 4 --d-ff 128 --src-vocab 200 "
                   "--tgt-vocab 210 --ctx 64 --quiet --cache-dir " + std::string(KILN_TEST_CACHE) + " -o " + dir + "/transformer");
  ASSERT_EQ(r.code, 0) << r.output;
  W w = kt::loadWeights(fx + "/weights.safetensors");
  std::vector<int32_t> src = readIds(fx + "/src_tokens.npy");
  ASSERT_EQ(src.size(), 17u);
  const int n = 12;
  std::string cmd = dir + "/transformer --weights " + fx + "/weights.safetensors --tokens " + kt::idList(src);
  expectGenerated(dir, cmd + " --start-token 0", n,
                  greedyReference({0}, n, [&](const std::vector<int32_t> &seq) { return ref::transformer(w, src, seq, 2, 4); }),
                  fx);
  r = kt::run(cmd + " --generate 65");
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.output.find("--generate 65 exceeds the compiled bound 64"), std::string::npos) << r.output;
  r = kt::run(cmd + " --generate 3 --start-token 210");  // the target vocabulary is 210
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.output.find("token"), std::string::npos) << r.output;
  r = kt::run(cmd + " --start-token 3");
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.output.find("--start-token applies to --generate"), std::string::npos) << r.output;
}
}  // namespace
