// The Universal Transformer: kiln.recurrent with ACT (kiln-lower-act, the host loop of
// kiln-lower-to-llvm, the ACT kernels) against a plain reference of the same recurrence, with
// positions halting at different steps, with none halting before max_steps, with both
// transitions (FFN and depthwise-separable convolution); the loop's buffers across steps.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <set>

#include "harness.h"
#include "kiln/dsl/Blocks.h"

using namespace kiln;

namespace {

using W = std::map<std::string, ref::T>;

ref::T dense(const W &w, const ref::T &x, const std::string &n) { return ref::linear(x, w.at(n + ".weight"), w.at(n + ".bias"), true); }
ref::T ln(const W &w, const ref::T &x, const std::string &n) {
  return ref::layer_norm(x, w.at(n + ".weight"), w.at(n + ".bias"), 1e-5f);
}

// result[i, c] = b[c] + sum_t w[t, c] x[i + t - (k - 1) / 2, c], zero outside the sequence.
ref::T depthwise(const ref::T &x, const ref::T &wt, const ref::T &b) {
  int64_t L = x.shape[0], d = x.shape[1], k = wt.shape[0];
  ref::T out({L, d});
  for (int64_t i = 0; i < L; ++i)
    for (int64_t c = 0; c < d; ++c) {
      double s = b.v[c];
      for (int64_t t = 0; t < k; ++t) {
        int64_t j = i + t - (k - 1) / 2;
        if (j >= 0 && j < L) s += (double)wt.v[t * d + c] * x.at(j, c);
      }
      out.at(i, c) = (float)s;
    }
  return out;
}

// The shared block, post-norm: h = ln(x + attention(x)); ln(h + transition(h)).
ref::T block(const W &w, const ref::T &x, int64_t heads, bool sepconv) {
  const std::string p = "ut.block";
  ref::T a = dense(w, ref::mha_core(dense(w, x, p + ".attn.q"), dense(w, x, p + ".attn.k"), dense(w, x, p + ".attn.v"), heads, false),
                   p + ".attn.out");
  ref::T h = ln(w, ref::add(x, a), p + ".ln_1");
  ref::T t = sepconv ? dense(w, ref::relu(dense(w, depthwise(h, w.at(p + ".conv.depthwise.weight"), w.at(p + ".conv.depthwise.bias")),
                                                p + ".conv.pointwise1")),
                             p + ".conv.pointwise2")
                     : dense(w, ref::relu(dense(w, h, p + ".ffn.fc1")), p + ".ffn.fc2");
  return ln(w, ref::add(h, t), p + ".ln_2");
}

struct Ut {
  ref::T hidden, ponder, steps;
  double margin = INFINITY;  // smallest |h + p - threshold| of a decision that was not forced
  int ran = 0;               // steps the loop ran
};

// ACT as kiln.recurrent states it, written out plainly.
Ut reference(const W &w, const std::vector<int32_t> &ids, int64_t d, int64_t heads, int T, float eps, bool sepconv) {
  int64_t L = (int64_t)ids.size();
  ref::T s = ref::embedding(w.at("tok_embed.weight"), ids);
  for (float &f : s.v) f *= std::sqrt((float)d);
  ref::T pos = ref::sinusoid(L, d), time = ref::sinusoid(T, d);
  const ref::T &hw = w.at("ut.halt.weight"), &hb = w.at("ut.halt.bias");
  const float thr = 1.0f - eps;
  Ut u;
  u.hidden = ref::T({L, d});
  u.ponder = ref::T({L});
  u.steps = ref::T({L});
  std::vector<float> h(L, 0.0f), r(L, 0.0f), n(L, 0.0f);
  for (int t = 0; t < T; ++t) {
    if (std::none_of(h.begin(), h.end(), [](float v) { return v < 1.0f; })) break;
    ++u.ran;
    ref::T x = s;
    for (int64_t i = 0; i < L; ++i)
      for (int64_t c = 0; c < d; ++c) x.at(i, c) += pos.at(i, c) + time.at(t, c);
    ref::T y = block(w, x, heads, sepconv);
    for (int64_t i = 0; i < L; ++i) {
      if (!(h[i] < 1.0f)) continue;  // halted: nothing changes
      double dot = hb.v[0];
      for (int64_t c = 0; c < d; ++c) dot += (double)x.at(i, c) * hw.v[c];
      float p = (float)(1.0 / (1.0 + std::exp(-dot)));
      if (t < T - 1) u.margin = std::min(u.margin, std::fabs((double)h[i] + p - thr));
      bool halt = h[i] + p > thr || t == T - 1;
      float wgt = halt ? 1.0f - h[i] : p;
      for (int64_t c = 0; c < d; ++c) {
        u.hidden.at(i, c) += wgt * y.at(i, c);
        s.at(i, c) = halt ? u.hidden.at(i, c) : y.at(i, c);  // a halted position's state is its output
      }
      n[i] += 1;
      if (halt) r[i] = 1.0f - h[i], h[i] = 1.0f;
      else h[i] += p;
    }
  }
  for (int64_t i = 0; i < L; ++i) u.ponder.v[i] = n[i] + r[i], u.steps.v[i] = n[i];
  return u;
}

struct Case {
  const char *exe;
  bool sepconv;
  float halt_scale, halt_bias;  // the halting unit's weights, set so the case is what it claims
};

// Runs the example with its random weights but the halting unit replaced, against the reference.
Ut runCase(const Case &c, int L, const std::string &tag) {
  const int64_t d = 64, heads = 4;
  const int T = 6;
  std::string dir = kt::workDir("universal_" + tag);
  auto r = kt::run(kt::example(c.exe) + " --random-weights --seed 5 --save-weights " + dir + "/w.safetensors --tokens 1");
  EXPECT_EQ(r.code, 0) << r.output;
  W w = kt::loadWeights(dir + "/w.safetensors");
  w["ut.halt.weight"] = kt::randomT({d}, 77, c.halt_scale);
  w["ut.halt.bias"] = ref::T({1});
  w["ut.halt.bias"].v[0] = c.halt_bias;
  kt::saveWeights(dir + "/halt.safetensors", w);
  std::vector<int32_t> ids = kt::randomIds(L, 256, 10 + L);
  kt::saveIds(dir + "/ids.npy", ids);
  r = kt::run(kt::example(c.exe) + " --weights " + dir + "/halt.safetensors --input tokens=" + dir +
              "/ids.npy --output-dir " + dir + "/out");
  EXPECT_EQ(r.code, 0) << r.output;
  Ut want = reference(w, ids, d, heads, T, 0.01f, c.sepconv);
  EXPECT_GT(want.margin, 1e-4) << "a halting sum lies within rounding of the threshold; choose other weights";
  EXPECT_TRUE(kt::allClose(want.hidden, kt::loadNpy(dir + "/out/hidden.npy")));
  EXPECT_TRUE(kt::allClose(want.ponder, kt::loadNpy(dir + "/out/ponder.npy")));
  ref::T steps = kt::loadNpy(dir + "/out/steps.npy");
  EXPECT_EQ(want.steps.v, steps.v);
  kt::noteReference(steps, want.steps);  // the GPU bundle's reference
  // The loop's own count (each step writes it): a loop that ran every step would still give the
  // same states, since halted positions do not change, but not this.
  ref::T ran = kt::loadNpy(dir + "/out/iterations.npy");
  ref::T wantRan({1});
  wantRan.v[0] = (float)want.ran;
  EXPECT_EQ(ran.v, wantRan.v);
  kt::noteReference(ran, wantRan);
  return want;
}

TEST(UniversalExample, PositionsHaltAtDifferentSteps) {
  for (int L : {1, 37, 128}) {
    SCOPED_TRACE("L = " + std::to_string(L));
    Ut u = runCase({"universal", false, 0.12f, -1.2f}, L, "ffn_" + std::to_string(L));
    std::set<float> distinct(u.steps.v.begin(), u.steps.v.end());
    if (L > 1) {
      EXPECT_GE(distinct.size(), 2u) << "every position halted at the same step: the case tests nothing";
    }
    EXPECT_LT(u.ran, 6) << "no position needed every step, so the loop must stop early";
  }
}

TEST(UniversalExample, NoneHaltBeforeMaxSteps) {
  Ut u = runCase({"universal", false, 0.01f, -8.0f}, 50, "forced");
  EXPECT_EQ(u.ran, 6);
  for (float s : u.steps.v) EXPECT_EQ(s, 6.0f);
  for (float p : u.ponder.v) EXPECT_GT(p, 6.9f);  // 6 steps and a remainder of almost 1
}

TEST(UniversalExample, SeparableConvolutionTransition) {
  Ut u = runCase({"universal_sepconv", true, 0.12f, -1.2f}, 70, "sepconv");
  std::set<float> distinct(u.steps.v.begin(), u.steps.v.end());
  EXPECT_GE(distinct.size(), 2u);
}

// One copy of the block in the IR, in a loop: the dump after kiln-lower-act has one kiln.loop
// and one attention, and the cost report counts the body per step.
TEST(UniversalExample, LowersToALoopNotAnUnrolledCopy) {
  std::string dir = kt::workDir("universal_ir");
  auto r = kt::run(std::string(KILN_BIN) + "/universal-compile --d-model 32 --heads 2 --ctx 16 --max-steps 5 --quiet "
                   "--emit=cost --cache-dir " KILN_TEST_CACHE " --dump-dir " + dir + "/dump -o " + dir + "/cost.txt");
  ASSERT_EQ(r.code, 0) << r.output;
  std::ifstream cf(dir + "/cost.txt");
  std::string cost((std::istreambuf_iterator<char>(cf)), {});
  auto count = [](const std::string &s, const std::string &what) {
    size_t n = 0;
    for (size_t at = s.find(what); at != std::string::npos; at = s.find(what, at + 1)) ++n;
    return n;
  };
  std::ifstream f(dir + "/dump/08-kiln-lower-act.mlir");
  std::string ir((std::istreambuf_iterator<char>(f)), {});
  EXPECT_EQ(count(ir, "kiln.loop "), 1u);
  EXPECT_EQ(count(ir, "kiln.attention "), 1u);
  EXPECT_EQ(count(ir, "kiln.recurrent "), 0u);
  EXPECT_NE(cost.find("(x5 steps)"), std::string::npos) << cost;
}

}  // namespace
