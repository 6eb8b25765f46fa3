// precision_test.cpp - mixed precision (kiln-assign-precision): with bf16, a linear's and the
// FFN's GEMMs round both operands to bfloat16 (to nearest, ties to even) and sum in f32. Checked
// against the plain reference run on operands rounded the same way, and against the f32
// reference, from which the bf16 result must differ (else the option did nothing).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "harness.h"
#include "kiln/dsl/Blocks.h"
#include "models.h"

using namespace kiln;
using W = std::map<std::string, ref::T>;

namespace {
using kt::roundBf16;
ref::T rounded(const ref::T &t) { return kt::roundedBf16(t); }
double maxDiff(const ref::T &a, const ref::T &b) {
  double m = 0;
  for (size_t i = 0; i < a.v.size(); ++i) m = std::max(m, (double)std::abs(a.v[i] - b.v[i]));
  return m;
}

TEST(Precision, RoundingIsToNearestTiesToEven) {
  EXPECT_EQ(roundBf16(1.0f), 1.0f);
  EXPECT_EQ(roundBf16(1.0f + 0x1p-8f), 1.0f);               // a tie: to the even neighbour (1.0)
  EXPECT_EQ(roundBf16(1.0f + 0x1p-7f + 0x1p-8f), 1.0f + 0x1p-6f);  // a tie: to the even neighbour above
  EXPECT_EQ(roundBf16(1.0f + 0x1p-8f + 0x1p-20f), 1.0f + 0x1p-7f);  // above the tie: up
}

// A linear, then an FFN (linear, ReLU, linear: kiln.ffn after kiln-chunk-ffn), at bf16 set by
// the DSL (Model::set_precision); the same model compiled with --precision f32 gives the f32
// reference's numbers.
TEST(Precision, Bf16GemmsMatchTheRoundedReference) {
  const int64_t d = 64, dff = 160, L = 37;
  std::string dir = kt::workDir("precision_bf16");
  auto build = [&](Model &m) {
    m.set_precision(Precision::BF16);
    Dim Ls = m.seq("L", 64);
    Tensor x = m.input("x", {Ls, d});
    Tensor y = linear(x, m.param("lin.w", {d, d}, {.scale = 0.5f}), m.param("lin.b", {d}, {.scale = 0.5f}));
    m.output("y", y);
    m.output("z", ffn(m, "ffn", y, {.d_model = d, .d_ff = dff, .act = Activation::Relu}));
  };
  // On a CPU with AVX-512 BF16 the host target uses its dot products (bf16_dot); the plain
  // AVX-512 target then checks the rounding in f32 FMAs (bf16).
  __builtin_cpu_init();
  std::vector<std::string> extra = {};
  if (__builtin_cpu_supports("avx512bf16")) extra = {"--target", "x86-64-avx512"};
  std::string exe = kt::compile(dir, "bf16", build, extra), exe32 = kt::compile(dir + "/f32", "f32", build, {"--precision", "f32"});
  ASSERT_FALSE(exe.empty());
  ASSERT_FALSE(exe32.empty());
  ref::T x = kt::randomT({L, d}, 5);
  kt::saveNpy(dir + "/x.npy", x);
  W w;
  ref::T y = kt::runModel(dir, exe, "--input x=" + dir + "/x.npy", "y", w);
  ref::T z = kt::loadNpy(dir + "/out/z.npy");
  if (!extra.empty()) {
    auto dis = kt::run("objdump -d --no-show-raw-insn " + exe + " | grep -c vdpbf16ps");
    EXPECT_EQ(std::atoi(dis.output.c_str()), 0) << "the x86-64-avx512 target has no AVX-512 BF16";
  }
  // The rounded reference: every GEMM's operands rounded, the sums and the rest in f32.
  ref::T wantY = ref::linear(rounded(x), rounded(w["lin.w"]), w["lin.b"], true);
  ref::T h = ref::relu(ref::linear(rounded(y), rounded(w["ffn.fc1.weight"]), w["ffn.fc1.bias"], true));
  ref::T wantZ = ref::linear(rounded(h), rounded(w["ffn.fc2.weight"]), w["ffn.fc2.bias"], true);
  EXPECT_TRUE(kt::allClose(wantY, y));
  EXPECT_TRUE(kt::allClose(wantZ, z));
  // The f32 reference differs by bfloat16's rounding (2^-9 relative per operand).
  ref::T f32Y = ref::linear(x, w["lin.w"], w["lin.b"], true);
  double scale = 0;
  for (float v : f32Y.v) scale = std::max(scale, (double)std::abs(v));
  EXPECT_GT(maxDiff(f32Y, y), 1e-4 * scale) << "the bf16 result equals the f32 one: nothing was rounded";
  EXPECT_LT(maxDiff(f32Y, y), 2e-2 * scale);
  // --precision f32 overrides the model's setting: the f32 reference's numbers.
  auto r = kt::run(exe32 + " --weights " + dir + "/weights.safetensors --input x=" + dir + "/x.npy --output-dir " + dir + "/out32");
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_TRUE(kt::allClose(f32Y, kt::loadNpy(dir + "/out32/y.npy")));
}

// On a CPU with AVX-512 BF16 (the host target), the register-block GEMMs use its dot products
// (kiln-assign-precision's bf16_dot): the executable holds vdpbf16ps, and the results of two
// linears and an FFN match the rounded reference, with an odd K (a zero pair element) and
// column tails.
TEST(Precision, Bf16DotProductsMatchTheRoundedReference) {
  __builtin_cpu_init();
  if (!__builtin_cpu_supports("avx512bf16")) GTEST_SKIP() << "this CPU has no AVX-512 BF16: kiln rounds and uses f32 FMAs";
  const int64_t k = 35, d = 64, n = 160, dff = 96, L = 37;
  std::string dir = kt::workDir("precision_bf16_dot");
  auto build = [&](Model &m) {
    Dim Ls = m.seq("L", 64);
    Tensor x = m.input("x", {Ls, k});
    Tensor y = linear(x, m.param("a.w", {d, k}, {.scale = 0.5f}), m.param("a.b", {d}, {.scale = 0.5f}));
    m.output("y", y);
    Tensor z = linear(y, m.param("b.w", {n, d}, {.scale = 0.5f}), m.param("b.b", {n}, {.scale = 0.5f}));
    m.output("z", z);
    m.output("f", ffn(m, "ffn", z, {.d_model = n, .d_ff = dff, .act = Activation::Relu}));
  };
  // The host target, named: a CPU test, so the GPU runs of this suite (ptxas, OpenCL, the GPU
  // bundle) leave it alone instead of compiling it again for a GPU over the same dump.
  std::string exe = kt::compile(dir, "dot", build, {"--target", "host", "--precision", "bf16", "--dump-dir", dir + "/dump"});
  ASSERT_FALSE(exe.empty());
  auto dis = kt::run("objdump -d --no-show-raw-insn " + exe + " | grep -c vdpbf16ps");
  EXPECT_GT(std::atoi(dis.output.c_str()), 0) << "no vdpbf16ps in the executable: " << dis.output;
  ref::T x = kt::randomT({L, k}, 7);
  kt::saveNpy(dir + "/x.npy", x);
  W w;
  ref::T y = kt::runModel(dir, exe, "--input x=" + dir + "/x.npy", "y", w);
  ref::T z = kt::loadNpy(dir + "/out/z.npy");
  EXPECT_TRUE(kt::allClose(ref::linear(rounded(x), rounded(w["a.w"]), w["a.b"], true), y));
  EXPECT_TRUE(kt::allClose(ref::linear(rounded(y), rounded(w["b.w"]), w["b.b"], true), z));
  ref::T h = ref::relu(ref::linear(rounded(z), rounded(w["ffn.fc1.weight"]), w["ffn.fc1.bias"], true));
  EXPECT_TRUE(kt::allClose(ref::linear(rounded(h), rounded(w["ffn.fc2.weight"]), w["ffn.fc2.bias"], true),
                           kt::loadNpy(dir + "/out/f.npy")));
  // Every GEMM kernel (the two linears and the FFN) says bf16_dot in its schedule.
  auto dots = kt::run("grep -l 'precision=bf16_dot' " + dir + "/dump/*.schedule.txt | wc -l");
  EXPECT_EQ(std::atoi(dots.output.c_str()), 3) << dots.output;
  ref::T f32Y = ref::linear(x, w["a.w"], w["a.b"], true);
  EXPECT_GT(maxDiff(f32Y, y), 0.0) << "the bf16 result equals the f32 one: nothing was rounded";
}
}  // namespace

namespace {
// In a model without a training step, --precision bf16 rounds attention's q, k and v to
// bfloat16 too (scores, softmax and the weighted sum in f32): the projections' GEMMs round their
// operands, the attention kernel its three inputs; checked against the plain reference on
// values rounded the same way, causal and not.
TEST(Precision, Bf16AttentionRoundsQueriesKeysAndValues) {
  const int64_t d = 64, heads = 4, L = 37;
  for (bool causal : {false, true}) {
    std::string dir = kt::workDir(std::string("precision_attention") + (causal ? "_causal" : ""));
    auto build = [&](Model &m) {
      Dim Ls = m.seq("L", 64);
      Tensor x = m.input("x", {Ls, d});
      auto proj = [&](const char *n) { return split_heads(linear(x, m.param(n, {d, d}, {.scale = 0.5f})), heads); };
      Tensor q = proj("wq"), k = proj("wk"), v = proj("wv");
      Tensor s = scale(batch_matmul(q, k, {.transpose_b = true}), 1.0f / std::sqrt((float)(d / heads)));
      if (causal) s = add(s, mask_for(s, Mask::causal()));
      m.output("y", merge_heads(batch_matmul(softmax(s), v)));
    };
    std::string exe = kt::compile(dir, "attn", build, {"--target", "host", "--precision", "bf16", "--dump-dir", dir + "/dump"});
    ASSERT_FALSE(exe.empty());
    auto att = kt::run("grep -l 'precision=bf16' " + dir + "/dump/*attention*.schedule.txt | wc -l");
    EXPECT_EQ(std::atoi(att.output.c_str()), 1) << att.output;
    ref::T x = kt::randomT({L, d}, 11);
    kt::saveNpy(dir + "/x.npy", x);
    W w;
    ref::T got = kt::runModel(dir, exe, "--input x=" + dir + "/x.npy", "y", w);
    auto lin = [&](const char *n, bool round) {
      ref::T p = ref::linear(rounded(x), rounded(w[n]), {}, true);
      return round ? rounded(p) : p;
    };
    EXPECT_TRUE(kt::allClose(ref::mha_core(lin("wq", true), lin("wk", true), lin("wv", true), heads, causal), got)) << causal;
    ref::T unrounded = ref::mha_core(lin("wq", false), lin("wk", false), lin("wv", false), heads, causal);
    double top = 0;
    for (float f : unrounded.v) top = std::max(top, (double)std::abs(f));
    EXPECT_GT(maxDiff(unrounded, got), 1e-4 * top) << "attention's operands were not rounded";
  }
}
}  // namespace
