// layers_test.cpp - single layers and ops, written in the DSL, compiled to standalone
// executables, run with random weights (saved with --save-weights) and compared output by output
// with the plain-loop reference in tests/reference: MLPs, linears at every tiling case,
// embeddings and norms, positions, attention (fused, written as separate ops, edge cases), the
// chunked FFN, SiLU and numeric edge cases.
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
  ref::T got = kt::runModel(dir, exe, "--input x=" + dir + "/x.npy", "y", w);
  ref::T h = ref::relu(ref::linear(x, w["fc1.w"], w["fc1.b"], false));
  ref::T y = ref::add(ref::gelu_erf(ref::linear(h, w["fc2.w"], w["fc2.b"], true)), x);
  EXPECT_TRUE(kt::allClose(y, got));
}
INSTANTIATE_TEST_SUITE_P(Shapes, Mlp, ::testing::Values(MlpCfg{.d = 32, .h = 64, .bound = 16, .L = 5},
                                                           MlpCfg{.d = 48, .h = 80, .bound = 64, .L = 37}),
                         [](const auto &i) { return "d" + std::to_string(i.param.d) + "_L" + std::to_string(i.param.L); });
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
  ref::T got = kt::runModel(dir, exe, "--input x=" + dir + "/x.npy", "y", w);
  EXPECT_TRUE(kt::allClose(ref::linear(x, w["w"], c.bias ? w["b"] : ref::T(), c.out_in), got));
}
INSTANTIATE_TEST_SUITE_P(Tiles, Linear,
                         ::testing::Values(LinCfg{.k = 128, .n = 256, .L = 5, .out_in = true, .bias = false},
                                           LinCfg{.k = 128, .n = 256, .L = 5, .out_in = false, .bias = true},
                                           LinCfg{.k = 128, .n = 64, .L = 5, .out_in = true, .bias = false},
                                           LinCfg{.k = 128, .n = 128, .L = 5, .out_in = true, .bias = false},
                                           LinCfg{.k = 32, .n = 10, .L = 7, .out_in = false, .bias = true},
                                           LinCfg{.k = 17, .n = 100, .L = 64, .out_in = true, .bias = true},
                                           LinCfg{.k = 64, .n = 64, .L = 1, .out_in = false, .bias = false},
                                           // a long reduction (the weight panel is packed)
                                           LinCfg{.k = 2048, .n = 512, .L = 37, .out_in = true, .bias = true},
                                           LinCfg{.k = 2048, .n = 512, .L = 1, .out_in = false, .bias = false}),
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
  std::string dir =
      kt::workDir("embnorm_" + std::to_string(c.vocab) + "_" + std::to_string(c.d) + "_" + std::to_string(c.bound));
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
  ref::T e = kt::runModel(dir, exe, "--tokens " + kt::idList(ids), "e", w);
  EXPECT_TRUE(kt::allClose(ref::embedding(w["wte"], ids), e));
  EXPECT_TRUE(kt::allClose(ref::rows(w["wpe"], c.L), kt::loadNpy(dir + "/out/p.npy")));
  ref::T x = ref::add(ref::embedding(w["wte"], ids), ref::rows(w["wpe"], c.L));
  EXPECT_TRUE(kt::allClose(ref::layer_norm(x, w["g"], w["b"], 1e-5f), kt::loadNpy(dir + "/out/n.npy")));
}
INSTANTIATE_TEST_SUITE_P(Shapes, EmbeddingNorm,
                         ::testing::Values(EmbCfg{.vocab = 256, .d = 128, .bound = 128, .L = 5},
                                           EmbCfg{.vocab = 256, .d = 64, .bound = 64, .L = 5},
                                           EmbCfg{.vocab = 96, .d = 128, .bound = 128, .L = 5},
                                           EmbCfg{.vocab = 256, .d = 128, .bound = 64, .L = 5}),
                         [](const auto &i) {
                           return "v" + std::to_string(i.param.vocab) + "_d" + std::to_string(i.param.d) + "_b" +
                                  std::to_string(i.param.bound);
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
    ref::T pe = kt::runModel(dir, exe, "--tokens " + kt::idList(ids), "pe", w);
    EXPECT_TRUE(kt::allClose(ref::sinusoid(L, 30), pe));
    EXPECT_TRUE(
        kt::allClose(ref::add(ref::embedding(w["emb"], ids), ref::sinusoid(L, 64)), kt::loadNpy(dir + "/out/x.npy")));
  }
}
}  // namespace

namespace {
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
  ref::T got = kt::runModel(dir, exe, "--tokens " + kt::idList(ids), "y", w, 5);
  ref::T x = ref::add(ref::embedding(w["emb"], ids), ref::rows(w["pos"], c.L));
  auto lin = [&](const ref::T &in, const std::string &p) { return ref::linear(in, w[p + ".weight"], w[p + ".bias"], true); };
  ref::T a = ref::mha_core(lin(x, "attn.q"), lin(x, "attn.k"), lin(x, "attn.v"), c.heads, c.causal);
  EXPECT_TRUE(kt::allClose(lin(a, "attn.out"), got));
}
INSTANTIATE_TEST_SUITE_P(Shapes, AttentionLayer,
                         ::testing::Values(AttnCfg{.d = 64, .heads = 4, .vocab = 50, .bound = 32, .L = 7, .causal = false},
                                           AttnCfg{.d = 64, .heads = 4, .vocab = 50, .bound = 64, .L = 33, .causal = true},
                                           AttnCfg{.d = 96, .heads = 3, .vocab = 40, .bound = 48, .L = 48, .causal = true}),
                         [](const auto &i) {
                           return "d" + std::to_string(i.param.d) + "_L" + std::to_string(i.param.L) +
                                  (i.param.causal ? "_causal" : "");
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
  });
  ASSERT_FALSE(exe.empty());  // the chain fuses into one kiln.attention: tests/ir/phases.mlir
  ref::T x = kt::randomT({c.L, c.d}, 8);
  kt::saveNpy(dir + "/x.npy", x);
  W w;
  ref::T got = kt::runModel(dir, exe, "--input x=" + dir + "/x.npy", "y", w);
  auto lin = [&](const char *n) { return ref::linear(x, w[n], {}, true); };
  EXPECT_TRUE(kt::allClose(ref::mha_core(lin("wq"), lin("wk"), lin("wv"), c.heads, c.causal), got));
}
INSTANTIATE_TEST_SUITE_P(Shapes, AttentionFromOps,
                         ::testing::Values(OpsAttnCfg{.d = 32, .heads = 2, .L = 1}, OpsAttnCfg{.d = 64, .heads = 4, .L = 37},
                                           OpsAttnCfg{.d = 48, .heads = 3, .L = 64},
                                           OpsAttnCfg{.d = 64, .heads = 4, .L = 37, .causal = true},
                                           OpsAttnCfg{.d = 32, .heads = 1, .L = 1, .causal = true}),
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
  }, {"--ffn-chunk", c.chunk});
  ASSERT_FALSE(exe.empty());  // one kiln.ffn unless --ffn-chunk off: tests/ir/phases.mlir
  ref::T x = kt::randomT({c.L, c.d}, 12);
  kt::saveNpy(dir + "/x.npy", x);
  W w;
  ref::T got = kt::runModel(dir, exe, "--input x=" + dir + "/x.npy", "y", w);
  ref::T h = ref::gelu_tanh(ref::linear(x, w["w1"], w["b1"], c.out_in));
  EXPECT_TRUE(kt::allClose(ref::add(x, ref::linear(h, w["w2"], w["b2"], c.out_in)), got));
}
INSTANTIATE_TEST_SUITE_P(Chunks, ChunkedFfn,
                         ::testing::Values(FfnCfg{.chunk = "off", .d = 48, .dff = 200, .L = 37, .out_in = false},
                                           FfnCfg{.chunk = "auto", .d = 48, .dff = 200, .L = 37, .out_in = false},
                                           FfnCfg{.chunk = "4", .d = 48, .dff = 200, .L = 37, .out_in = false},
                                           FfnCfg{.chunk = "50", .d = 48, .dff = 200, .L = 37, .out_in = true},
                                           FfnCfg{.chunk = "16", .d = 64, .dff = 256, .L = 100, .out_in = true},
                                           FfnCfg{.chunk = "auto", .d = 64, .dff = 256, .L = 1, .out_in = false},
                                           FfnCfg{.chunk = "8", .d = 20, .dff = 36, .L = 9, .out_in = false}),
                         [](const auto &i) {
                           auto &c = i.param;
                           return c.chunk + "_" + std::to_string(c.d) + "x" + std::to_string(c.dff) + "_L" +
                                  std::to_string(c.L) + (c.out_in ? "_oi" : "_io");
                         });
}  // namespace

namespace {
// ---------------------------------------------------------------- SiLU
// x·sigmoid(x) standalone, folded into a linear's epilogue, and inside a chunked FFN (linear,
// SiLU, linear, residual add: one kiln.ffn), against the plain reference at two lengths.
TEST(Silu, StandaloneInALinearAndInAChunkedFfn) {
  std::string dir = kt::workDir("silu");
  std::string exe = kt::compile(dir, "silu", [&](Model &m) {
    Dim L = m.seq("L", 64);
    Tensor x = m.input("x", {L, 40});
    m.output("act", silu(x));
    m.output("lin", silu(linear(x, m.param("w", {24, 40}), m.param("b", {24}))));
    Tensor h = silu(linear(x, m.param("w1", {40, 96}), m.param("b1", {96}), {.layout = WeightLayout::InOut}));
    m.output("ffn", add(x, linear(h, m.param("w2", {96, 40}), m.param("b2", {40}), {.layout = WeightLayout::InOut})));
  });
  ASSERT_FALSE(exe.empty());
  for (int64_t L : {1, 37}) {
    SCOPED_TRACE("L = " + std::to_string(L));
    ref::T x = kt::randomT({L, 40}, 21, 4.0f);  // inputs to +-4 and beyond in the linears: both tails of the sigmoid
    kt::saveNpy(dir + "/x.npy", x);
    W w;
    ref::T act = kt::runModel(dir, exe, "--input x=" + dir + "/x.npy", "act", w);
    EXPECT_TRUE(kt::allClose(ref::silu(x), act));
    EXPECT_TRUE(kt::allClose(ref::silu(ref::linear(x, w["w"], w["b"], true)), kt::loadNpy(dir + "/out/lin.npy")));
    ref::T h = ref::silu(ref::linear(x, w["w1"], w["b1"], false));
    EXPECT_TRUE(kt::allClose(ref::add(x, ref::linear(h, w["w2"], w["b2"], false)), kt::loadNpy(dir + "/out/ffn.npy")));
  }
}
}  // namespace

namespace {
// ---------------------------------------------------------------- RMSNorm
// x / sqrt(mean(x²) + eps) · w over rows of 40 and of 64 (whole vectors, and a tail), at two
// lengths, against the plain reference; the gain perturbed around 1 so a dropped one shows.
TEST(RmsNorm, MatchesReference) {
  std::string dir = kt::workDir("rms_norm");
  std::string exe = kt::compile(dir, "rms_norm", [&](Model &m) {
    Dim L = m.seq("L", 64);
    Tensor x = m.input("x", {L, 40});
    m.output("a", rms_norm(x, m.param("w", {40}, {.scale = 0.5f}), {.eps = 1e-5f}));
    Tensor y = m.input("y", {L, 64});
    m.output("b", rms_norm(y, m.param("w2", {64}, {.scale = 0.5f})));
  });
  ASSERT_FALSE(exe.empty());
  for (int64_t L : {1, 37}) {
    SCOPED_TRACE("L = " + std::to_string(L));
    ref::T x = kt::randomT({L, 40}, 31, 2.0f), y = kt::randomT({L, 64}, 32, 0.01f);  // and rows of small values: eps matters
    kt::saveNpy(dir + "/x.npy", x);
    kt::saveNpy(dir + "/y.npy", y);
    W w;
    ref::T a = kt::runModel(dir, exe, "--input x=" + dir + "/x.npy --input y=" + dir + "/y.npy", "a", w);
    EXPECT_TRUE(kt::allClose(ref::rms_norm(x, w["w"], 1e-5f), a));
    EXPECT_TRUE(kt::allClose(ref::rms_norm(y, w["w2"], 1e-6f), kt::loadNpy(dir + "/out/b.npy")));
  }
}
}  // namespace

namespace {
// ---------------------------------------------------------------- rotary positions, grouped-query attention
// kiln.rope on 4 heads of 16 (both pairings; a base of 500, and 1e4 with a linear scaling of 4
// from a position `past`) and grouped-query attention (4 query heads over 2 key and value heads)
// by each engine: the whole-sequence block engine (causal, after rope), the row-strip engine
// over a cache (the first past + L keys valid, causal from past) and for one static query row
// (all keys); against the plain reference.
TEST(RopeAndGqa, MatchesReference) {
  const int64_t d = 48, H = 4, Hkv = 2, hd = 16, L = 13, K = 37, past = 20;
  std::string dir = kt::workDir("rope_gqa");
  std::string exe = kt::compile(dir, "rope_gqa", [&](Model &m) {
    Dim Ls = m.seq("L", 64), Ks = m.seq("K", 80);
    Tensor x = m.input("x", {Ls, d}), y = m.input("y", {Ks, d}), x1 = m.input("x1", {1, d});
    Tensor p = m.input("past", {1}, {.dtype = DType::I32, .vocab = 64});
    Tensor wq = m.param("wq", {H * hd, d}), wk = m.param("wk", {Hkv * hd, d}), wv = m.param("wv", {Hkv * hd, d});
    auto proj = [&](Tensor in, Tensor w, int64_t heads) { return split_heads(linear(in, w), heads); };
    m.output("half", merge_heads(rope(proj(x, wq, H), {.theta = 500.0f})));
    m.output("inter",
             merge_heads(rope(proj(x, wq, H), {.theta = 10000.0f, .style = RopeStyle::Interleaved, .scaling = 4.0f, .past = p})));
    Tensor q = rope(proj(x, wq, H), {.theta = 500.0f}), k = rope(proj(x, wk, Hkv), {.theta = 500.0f});
    m.output("causal", merge_heads(attention(q, k, proj(x, wv, Hkv), {.mask = Mask::causal()})));
    m.output("cached", merge_heads(attention(proj(x, wq, H), proj(y, wk, Hkv), proj(y, wv, Hkv), {.mask = Mask::causal(), .past = p})));
    m.output("one", merge_heads(attention(proj(x1, wq, H), proj(y, wk, Hkv), proj(y, wv, Hkv))));
  });
  ASSERT_FALSE(exe.empty());
  ref::T x = kt::randomT({L, d}, 21), y = kt::randomT({K, d}, 22), x1 = kt::randomT({1, d}, 23);
  kt::saveNpy(dir + "/x.npy", x);
  kt::saveNpy(dir + "/y.npy", y);
  kt::saveNpy(dir + "/x1.npy", x1);
  kt::saveIds(dir + "/past.npy", {(int32_t)past});
  W w;
  std::string in = "--input x=" + dir + "/x.npy --input y=" + dir + "/y.npy --input x1=" + dir + "/x1.npy --input past=" + dir + "/past.npy";
  ref::T half = kt::runModel(dir, exe, in, "half", w);
  auto lin = [&](const ref::T &a, const char *n) { return ref::linear(a, w[n], {}, true); };
  auto out = [&](const char *n) { return kt::loadNpy(dir + "/out/" + n + ".npy"); };
  EXPECT_TRUE(kt::allClose(ref::rope(lin(x, "wq"), H, 0, 500.0, false), half));
  EXPECT_TRUE(kt::allClose(ref::rope(lin(x, "wq"), H, past, 10000.0, true, 4.0), out("inter")));
  ref::T q = ref::rope(lin(x, "wq"), H, 0, 500.0, false), k = ref::rope(lin(x, "wk"), Hkv, 0, 500.0, false);
  EXPECT_TRUE(kt::allClose(ref::mha_core(q, k, lin(x, "wv"), H, true, Hkv), out("causal")));
  ref::T ky = lin(y, "wk"), vy = lin(y, "wv");
  ref::T kv({past + L, Hkv * hd}), vv({past + L, Hkv * hd});  // the valid keys
  std::copy(ky.v.begin(), ky.v.begin() + kv.numel(), kv.v.begin());
  std::copy(vy.v.begin(), vy.v.begin() + vv.numel(), vv.v.begin());
  EXPECT_TRUE(kt::allClose(ref::mha_core(lin(x, "wq"), kv, vv, H, true, Hkv), out("cached")));
  EXPECT_TRUE(kt::allClose(ref::mha_core(lin(x1, "wq"), ky, vy, H, false, Hkv), out("one")));
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
  ref::T sm = kt::runModel(dir, exe, "--input x=" + dir + "/x.npy", "softmax", w);
  ref::T norm = kt::loadNpy(dir + "/out/norm.npy"), mlp = kt::loadNpy(dir + "/out/mlp.npy");
  EXPECT_TRUE(kt::allClose(ref::softmax_rows(x), sm));
  EXPECT_TRUE(kt::allClose(ref::layer_norm(x, w["g"], w["b"], 1e-5f), norm));
  for (int c = 0; c < 20; ++c) EXPECT_EQ(norm.at(1, c), w["b"].v[c]) << "constant row, column " << c;
  EXPECT_TRUE(kt::allClose(ref::linear(ref::relu(ref::linear(x, w["w1"], {}, true)), w["w2"], {}, true), mlp));
  for (float f : sm.v) EXPECT_TRUE(std::isfinite(f));
}
}  // namespace
