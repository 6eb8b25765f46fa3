// The Reformer's mechanisms: LSH attention (kiln-lower-lsh-attention, the hashing and chunked
// attention kernels, the runtime's counting sort) against a plain reference of the same
// algorithm with the same rotations and against full attention; reversible layers and their
// inverse.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <numeric>

#include "harness.h"
#include "kiln/dsl/Blocks.h"

using namespace kiln;

namespace {

struct LshCfg {
  int64_t buckets, hashes, chunk;
  bool causal;
};

// The algorithm written out plainly. qk, v: [H, L, d]; rot: [R, d, buckets / 2]. Returns the
// output and, through `minMargin`, the smallest gap between the best and second-best hash
// projection (a gap within float rounding would make kiln's bucket legitimately differ).
ref::T lshReference(const ref::T &qk, const ref::T &v, const ref::T &rot, const LshCfg &c, double *minMargin) {
  int64_t H = qk.shape[0], L = qk.shape[1], D = qk.shape[2], E = v.shape[2], R = c.hashes, half = c.buckets / 2;
  double scale = 1.0 / std::sqrt((double)D);
  auto q = [&](int64_t h, int64_t i, int64_t d) { return (double)qk.v[(h * L + i) * D + d]; };
  ref::T out({H, L, E});
  *minMargin = INFINITY;
  for (int64_t h = 0; h < H; ++h) {
    std::vector<double> norm(L);
    for (int64_t i = 0; i < L; ++i) {
      double n = 0;
      for (int64_t d = 0; d < D; ++d) n += q(h, i, d) * q(h, i, d);
      norm[i] = n > 0 ? 1.0 / std::sqrt(n) : 0.0;
    }
    std::vector<std::vector<double>> o(R, std::vector<double>(L * E)), lse(R, std::vector<double>(L));
    for (int64_t r = 0; r < R; ++r) {
      std::vector<int32_t> bucket(L);
      for (int64_t i = 0; i < L; ++i) {
        std::vector<double> proj(2 * half);
        for (int64_t b = 0; b < half; ++b) {
          double s = 0;
          for (int64_t d = 0; d < D; ++d) s += q(h, i, d) * rot.v[(r * D + d) * half + b];
          proj[b] = s;
          proj[half + b] = -s;
        }
        int64_t best = std::max_element(proj.begin(), proj.end()) - proj.begin();
        bucket[i] = (int32_t)best;
        std::vector<double> sorted = proj;
        std::sort(sorted.rbegin(), sorted.rend());
        *minMargin = std::min(*minMargin, sorted[0] - sorted[1]);
      }
      std::vector<int64_t> order(L);
      std::iota(order.begin(), order.end(), 0);
      std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return bucket[a] < bucket[b]; });
      for (int64_t p = 0; p < L; ++p) {
        int64_t i = order[p], chunk = p / c.chunk;
        std::vector<std::pair<int64_t, double>> keys;  // (position, logit)
        for (int64_t s = std::max<int64_t>(0, chunk - 1) * c.chunk; s < std::min(L, (chunk + 1) * c.chunk); ++s) {
          int64_t j = order[s];
          if (bucket[j] != bucket[i] || (c.causal && j > i)) continue;
          double dot = 0;
          for (int64_t d = 0; d < D; ++d) dot += q(h, i, d) * q(h, j, d) * norm[j];
          keys.push_back({j, dot * scale + (j == i ? -1e9 : 0.0)});  // itself only when alone
        }
        double mx = -INFINITY, sum = 0;
        for (auto &kv : keys) mx = std::max(mx, kv.second);
        for (auto &kv : keys) sum += std::exp(kv.second - mx);
        for (auto &kv : keys)
          for (int64_t e = 0; e < E; ++e) o[r][i * E + e] += std::exp(kv.second - mx) / sum * v.v[(h * L + kv.first) * E + e];
        lse[r][i] = mx + std::log(sum);
      }
    }
    for (int64_t i = 0; i < L; ++i) {
      double mx = -INFINITY, den = 0;
      for (int64_t r = 0; r < R; ++r) mx = std::max(mx, lse[r][i]);
      for (int64_t r = 0; r < R; ++r) den += std::exp(lse[r][i] - mx);
      for (int64_t e = 0; e < E; ++e) {
        double num = 0;
        for (int64_t r = 0; r < R; ++r) num += std::exp(lse[r][i] - mx) * o[r][i * E + e];
        out.v[(h * L + i) * E + e] = (float)(num / den);
      }
    }
  }
  return out;
}

std::string compileLsh(const std::string &dir, const LshCfg &c, int64_t H, int64_t D, int64_t bound,
                       std::vector<std::string> flags = {}) {
  return kt::compile(dir, "lsh", [&](Model &m) {
    Dim L = m.seq("L", bound);
    Tensor qk = m.input("qk", {H, L, D}), v = m.input("v", {H, L, D});
    Tensor rot = m.param("rot", {c.hashes, D, c.buckets / 2}, {.scale = 1.0f});
    m.output("o", lsh_attention(qk, v, rot, {.buckets = c.buckets, .hashes = c.hashes, .chunk = c.chunk, .causal = c.causal}));
  }, [&] {
    flags.insert(flags.end(), {"--dump-dir", dir + "/dump"});
    return flags;
  }());
}

// Runs the executable on qk, v; returns the output and the rotations it used.
ref::T runLsh(const std::string &dir, const std::string &exe, const ref::T &qk, const ref::T &v, ref::T *rot) {
  kt::saveNpy(dir + "/qk.npy", qk);
  kt::saveNpy(dir + "/v.npy", v);
  auto r = kt::run(exe + " --random-weights --seed 11 --save-weights " + dir + "/w.safetensors --input qk=" + dir +
                   "/qk.npy --input v=" + dir + "/v.npy --output-dir " + dir + "/out");
  EXPECT_EQ(r.code, 0) << r.output;
  *rot = kt::loadWeights(dir + "/w.safetensors")["rot"];
  return kt::loadNpy(dir + "/out/o.npy");
}

class LshAttention : public ::testing::TestWithParam<LshCfg> {};

TEST_P(LshAttention, MatchesThePlainAlgorithmWithTheSameRotations) {
  const LshCfg &c = GetParam();
  const int64_t H = 2, D = 16;
  std::string dir = kt::workDir("lsh_" + std::to_string(c.buckets) + "_" + std::to_string(c.hashes) + "_" +
                                std::to_string(c.chunk) + (c.causal ? "_causal" : ""));
  std::string exe = compileLsh(dir, c, H, D, 300);
  ASSERT_FALSE(exe.empty());
  for (int64_t L : {1, 5, 37, 300}) {
    SCOPED_TRACE("L = " + std::to_string(L));
    ref::T qk = kt::randomT({H, L, D}, 21 + (unsigned)L), v = kt::randomT({H, L, D}, 22 + (unsigned)L), rot;
    ref::T got = runLsh(dir, exe, qk, v, &rot);
    double margin;
    ref::T want = lshReference(qk, v, rot, c, &margin);
    ASSERT_GT(margin, 1e-4) << "a hash projection lies within rounding of a tie: draw other inputs";
    EXPECT_TRUE(kt::allClose(want, got));
  }
}
// --precision bf16 on a CPU target: the hashing and the chunked attention read qk and v rounded
// to bfloat16 (the norms, scores, softmax and the rounds' merge in f32): the plain algorithm on
// rounded operands with the same rotations, and not on the unrounded ones.
TEST(LshAttentionBf16, RoundsQkAndValues) {
  const LshCfg c{8, 2, 16, true};
  const int64_t H = 2, D = 16, L = 100;
  std::string dir = kt::workDir("lsh_bf16");
  std::string exe = compileLsh(dir, c, H, D, 128, {"--target", "host", "--precision", "bf16"});
  ASSERT_FALSE(exe.empty());
  auto sched = kt::run("grep -l 'precision=bf16' " + dir + "/dump/*lsh*.schedule.txt | wc -l");
  EXPECT_EQ(std::atoi(sched.output.c_str()), 2) << "the hashing and the chunked attention: " << sched.output;
  // The first of a few draws whose hash projections are clear of ties (same draws every run).
  ref::T qk, v, rot, got, want;
  double margin = 0, margin32;
  for (unsigned seed = 61; seed < 81 && margin <= 1e-4; seed += 2) {
    qk = kt::randomT({H, L, D}, seed), v = kt::randomT({H, L, D}, seed + 1);
    got = runLsh(dir, exe, qk, v, &rot);
    want = lshReference(kt::roundedBf16(qk), kt::roundedBf16(v), rot, c, &margin);
  }
  ASSERT_GT(margin, 1e-4) << "every draw's hash projections lie within rounding of a tie";
  EXPECT_TRUE(kt::allClose(want, got));
  ref::T unrounded = lshReference(qk, v, rot, c, &margin32);
  double top = 0, diff = 0;
  for (size_t i = 0; i < got.v.size(); ++i) {
    top = std::max(top, (double)std::abs(unrounded.v[i]));
    diff = std::max(diff, (double)std::abs(unrounded.v[i] - got.v[i]));
  }
  EXPECT_GT(diff, 1e-4 * top) << "qk and v were not rounded";
}

INSTANTIATE_TEST_SUITE_P(Configs, LshAttention,
                         ::testing::Values(LshCfg{4, 1, 8, false}, LshCfg{8, 3, 16, true}, LshCfg{16, 2, 32, false},
                                           LshCfg{2, 2, 5, true}),
                         [](const auto &i) {
                           return "b" + std::to_string(i.param.buckets) + "_h" + std::to_string(i.param.hashes) + "_c" +
                                  std::to_string(i.param.chunk) + (i.param.causal ? "_causal" : "");
                         });

// With clustered inputs (attention concentrates on a position's cluster), more hash rounds
// bring LSH attention close to full shared-QK attention (32 buckets, chunks of 32, L = 256).
TEST(LshAttentionApproximation, ApproachesFullAttentionWithMoreRounds) {
  const int64_t H = 1, D = 32, L = 256, clusters = 16;
  ref::T qk({H, L, D}), v = kt::randomT({H, L, D}, 5);
  ref::T centers = kt::randomT({clusters, D}, 6, 18.0f), noise = kt::randomT({L, D}, 7, 0.3f);
  for (int64_t i = 0; i < L; ++i)
    for (int64_t d = 0; d < D; ++d) qk.v[i * D + d] = centers.v[(i % clusters) * D + d] + noise.v[i * D + d];
  // Full attention over all keys with the same conventions (normalized keys, itself excluded).
  ref::T full({H, L, D});
  for (int64_t i = 0; i < L; ++i) {
    std::vector<double> s(L);
    double mx = -INFINITY, sum = 0;
    for (int64_t j = 0; j < L; ++j) {
      double dot = 0, nj = 0;
      for (int64_t d = 0; d < D; ++d) dot += (double)qk.v[i * D + d] * qk.v[j * D + d], nj += (double)qk.v[j * D + d] * qk.v[j * D + d];
      s[j] = j == i ? -INFINITY : dot / std::sqrt(nj) / std::sqrt((double)D);
      mx = std::max(mx, s[j]);
    }
    for (int64_t j = 0; j < L; ++j) sum += std::exp(s[j] - mx);
    for (int64_t d = 0; d < D; ++d) {
      double a = 0;
      for (int64_t j = 0; j < L; ++j) a += std::exp(s[j] - mx) / sum * v.v[j * D + d];
      full.v[i * D + d] = (float)a;
    }
  }
  auto relErr = [&](const ref::T &o) {
    double num = 0, den = 0;
    for (size_t k = 0; k < o.v.size(); ++k) num += std::pow(o.v[k] - full.v[k], 2), den += std::pow(full.v[k], 2);
    return std::sqrt(num / den);
  };
  std::vector<double> errs;
  for (int64_t rounds : {1, 2, 4, 8}) {
    LshCfg c{32, rounds, 32, false};
    std::string dir = kt::workDir("lsh_approx_" + std::to_string(rounds));
    std::string exe = compileLsh(dir, c, H, D, L);
    ASSERT_FALSE(exe.empty());
    ref::T rot, got = runLsh(dir, exe, qk, v, &rot);
    errs.push_back(relErr(got));
    fprintf(stderr, "[ lsh      ] 32 buckets, %lld round(s), chunk 32: relative error to full attention %.4f\n",
            (long long)rounds, errs.back());
  }
  // A loose bound: with 8 rounds within 20% of full attention, and much closer than with one.
  EXPECT_LT(errs[3], 0.2);
  EXPECT_LT(errs[3], 0.5 * errs[0]);
}

}  // namespace

namespace {
// ---------------------------------------------------------------- reversible layers
// A 4-layer reversible stack; from its final output alone, reversible_inverse recomputes the
// input of every layer, which must equal the activations the forward pass computed.
TEST(Reversible, InputsOfEveryLayerRecomputedFromTheOutput) {
  const int64_t c = 32, layers = 4;
  std::string dir = kt::workDir("reversible");
  std::string exe = kt::compile(dir, "rev", [&](Model &m) {
    Dim L = m.seq("L", 64);
    Tensor x = m.input("x", {L, 2 * c});
    std::vector<SubLayer> F, G;
    for (int64_t i = 0; i < layers; ++i) {
      std::string p = "rev." + std::to_string(i);
      Tensor w1 = m.param(p + ".f.weight", {c, c}, {.scale = 0.1f}), b1 = m.param(p + ".f.bias", {c}, {.scale = 0.1f});
      Tensor w2 = m.param(p + ".g1.weight", {4 * c, c}, {.scale = 0.1f}), b2 = m.param(p + ".g1.bias", {4 * c}, {.scale = 0.1f});
      Tensor w3 = m.param(p + ".g2.weight", {c, 4 * c}, {.scale = 0.1f}), b3 = m.param(p + ".g2.bias", {c}, {.scale = 0.1f});
      F.push_back([=](Tensor h) { return gelu(linear(h, w1, b1)); });
      G.push_back([=](Tensor h) { return linear(relu(linear(h, w2, b2)), w3, b3); });  // kiln-chunk-ffn runs it
    }
    std::vector<Tensor> acts{x};
    for (int64_t i = 0; i < layers; ++i) acts.push_back(reversible(acts.back(), F[i], G[i]));
    Tensor y = acts.back();
    m.output("y", y);
    for (int64_t i = layers; i-- > 0;) {
      if (i > 0) m.output("x" + std::to_string(i), acts[i]);  // x0 is the input itself
      y = reversible_inverse(y, F[i], G[i]);
      m.output("back" + std::to_string(i), y);
    }
  }, {"--dump-dir", dir + "/dump"});
  ASSERT_FALSE(exe.empty());
  ref::T x = kt::randomT({50, 2 * c}, 3);
  kt::saveNpy(dir + "/x.npy", x);
  auto r = kt::run(exe + " --random-weights --input x=" + dir + "/x.npy --output-dir " + dir + "/out");
  ASSERT_EQ(r.code, 0) << r.output;
  for (int64_t i = 1; i < layers; ++i) {
    SCOPED_TRACE("layer " + std::to_string(i));
    EXPECT_TRUE(kt::allClose(kt::loadNpy(dir + "/out/x" + std::to_string(i) + ".npy"),
                             kt::loadNpy(dir + "/out/back" + std::to_string(i) + ".npy")));
  }
  EXPECT_TRUE(kt::allClose(x, kt::loadNpy(dir + "/out/back0.npy")));
  // The inverse is IR like the rest: its subtractions are kiln ops at the user's lines.
  std::ifstream f(dir + "/dump/00-input.mlir");
  std::string ir((std::istreambuf_iterator<char>(f)), {});
  EXPECT_NE(ir.find("kiln.scale"), std::string::npos);
}
}  // namespace

namespace {
// ---------------------------------------------------------------- examples/reformer
// The example (built at a small size: 2 layers, d 64, 2 heads, 8 buckets, 2 rounds, chunks of
// 32) against the same network written with the plain reference ops and lshReference.
TEST(ReformerExample, MatchesReference) {
  const int64_t layers = 2, d = 64, H = 2;
  const LshCfg c{8, 2, 32, false};
  std::string dir = kt::workDir("reformer_example");
  for (int L : {1, 77, 200}) {
    SCOPED_TRACE("L = " + std::to_string(L));
    std::vector<int32_t> ids = kt::randomIds(L, 256, 40 + L);
    kt::saveIds(dir + "/ids.npy", ids);
    auto r = kt::run(kt::example("reformer") + " --random-weights --seed 9 --save-weights " + dir +
                     "/w.safetensors --input tokens=" + dir + "/ids.npy --output-dir " + dir + "/out");
    ASSERT_EQ(r.code, 0) << r.output;
    std::map<std::string, ref::T> w = kt::loadWeights(dir + "/w.safetensors");
    auto ln = [&](const ref::T &x, const std::string &n) { return ref::layer_norm(x, w[n + ".weight"], w[n + ".bias"], 1e-5f); };
    auto dense = [&](const ref::T &x, const std::string &n) { return ref::linear(x, w[n + ".weight"], w[n + ".bias"], true); };
    ref::T e = ref::embedding(w["tok_embed.weight"], ids);
    for (float &f : e.v) f *= std::sqrt((float)d);
    e = ref::add(e, ref::sinusoid(L, d));
    ref::T x1 = e, x2 = e;
    double margin = INFINITY;
    for (int64_t i = 0; i < layers; ++i) {
      std::string p = "layers." + std::to_string(i);
      ref::T n = ln(x2, p + ".attn.norm");
      double m;
      ref::T a = lshReference(ref::to_heads(dense(n, p + ".attn.qk"), H), ref::to_heads(dense(n, p + ".attn.v"), H), w[p + ".attn.rotations"], c, &m);
      margin = std::min(margin, m);
      x1 = ref::add(x1, dense(ref::from_heads(a), p + ".attn.out"));
      x2 = ref::add(x2, dense(ref::gelu_erf(dense(ln(x1, p + ".ffn.norm"), p + ".ffn.fc1")), p + ".ffn.fc2"));
    }
    ref::T mean = ref::add(x1, x2);
    for (float &f : mean.v) f *= 0.5f;
    ASSERT_GT(margin, 1e-4) << "a hash projection lies within rounding of a tie";
    EXPECT_TRUE(kt::allClose(ln(mean, "norm"), kt::loadNpy(dir + "/out/hidden.npy")));
  }
}
}  // namespace
