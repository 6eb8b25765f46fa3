// precision_train_test.cpp - mixed-precision training (--precision bf16): the byte-level demo's
// GPT-2 trains with its GEMMs on bfloat16 operands (the forward's and the backward's input
// gradients; f32 sums, f32 weight gradients, master weights and AdamW moments) to within 2% of
// f32 training's loss after 200 steps; sparse and LSH attention's gradients are those at the
// rounded operands.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>

#include "grad_check.h"
#include "kiln/dsl/Ops.h"

namespace {
TEST(PrecisionTraining, Bf16LossWithinTwoPercentOfF32After200Steps) {
  std::string dir = kt::workDir("train_precision");
  std::string src = KILN_SOURCE_DIR;
  auto r = kt::run("python3 " + src + "/bench/train/bytes.py data " + dir);
  ASSERT_EQ(r.code, 0) << r.output;
  const std::string flags = "--train --layers 2 --d-model 64 --heads 4 --vocab 256 --ctx 64 --train-lr 3e-3 --train-warmup 20";
  std::map<std::string, std::vector<double>> loss;
  for (std::string p : {"f32", "bf16"}) {
    std::string exe = kt::compileExample("gpt2", flags + " --precision " + p, dir + "/" + p);
    ASSERT_FALSE(exe.empty());
    r = kt::run(exe + " --train --data " + dir + "/train.npy --seq 64 --steps 200 --seed 1 --threads 2 --log " + dir + "/" + p +
                ".csv");
    ASSERT_EQ(r.code, 0) << r.output;
    loss[p] = kt::trainLosses(dir + "/" + p + ".csv");
    ASSERT_EQ(loss[p].size(), 200u);
  }
  // The first step's loss: the same weights, the forward's GEMMs rounded: close, not equal.
  EXPECT_NE(loss["f32"][0], loss["bf16"][0]) << "bf16 changed nothing";
  EXPECT_NEAR(loss["bf16"][0], loss["f32"][0], 1e-2 * loss["f32"][0]);
  // After 200 steps: the mean of the last 20 steps' losses (one batch each) within 2%.
  auto tail = [](const std::vector<double> &l) {
    double s = 0;
    for (size_t i = l.size() - 20; i < l.size(); ++i) s += l[i];
    return s / 20;
  };
  double f = tail(loss["f32"]), b = tail(loss["bf16"]);
  std::cout << "loss over steps 181-200: f32 " << f << ", bf16 " << b << " (" << 100 * (b - f) / f << "%); step 1: "
            << loss["f32"][0] << " and " << loss["bf16"][0] << "\n";
  EXPECT_LT(std::abs(b - f), 0.02 * f);
  EXPECT_LT(f, 0.8 * loss["f32"][0]) << "the model learns";
}

// Mixed precision in block-sparse and LSH attention's backward: with --precision bf16 (a CPU
// target) the kernels round q, k and v (LSH: the shared qk, also where it is hashed) to
// bfloat16, so the gradients of a loss through attention alone (no GEMM) must be the f32
// kernels' (checked against PyTorch in sparse_train_test and the Reformer's fixtures) at the
// rounded operands: bf16 on weights P equals f32 on round(P), to float noise, and differs from
// f32 on P (else nothing was rounded).
struct RoundedAttentionCase {
  std::string name;
  std::vector<std::string> rounded;                    // the attention operands (parameters)
  std::map<std::string, std::vector<int64_t>> shapes;  // every parameter
  std::function<kiln::Tensor(kiln::Model &, const std::map<std::string, kiln::Tensor> &)> attend;
};

class RoundedAttentionGradients : public ::testing::TestWithParam<RoundedAttentionCase> {};

TEST_P(RoundedAttentionGradients, AreTheF32GradientsAtTheRoundedOperands) {
  const RoundedAttentionCase &c = GetParam();
  const int64_t H = 2, L = 48, hd = 16;
  std::string dir = kt::workDir("train_bf16_" + c.name);
  std::map<std::string, std::string> exe;
  for (std::string p : {"f32", "bf16"}) {
    exe[p] = kt::compile(dir + "/" + p, c.name, [&](kiln::Model &m) {
      std::map<std::string, kiln::Tensor> t;
      for (auto &[name, shape] : c.shapes) {
        kiln::Shape s(shape.begin(), shape.end());
        t[name] = m.param(name, s);
      }
      kiln::Tensor a = c.attend(m, t);
      m.loss(kiln::mean(kiln::mul(a, m.input("c", {H, L, hd}))));
      m.gradients();
    }, {"--target", "host", "--precision", p, "--dump-dir", dir + "/" + p + "/dump"});
    ASSERT_FALSE(exe[p].empty());
  }
  auto sched = kt::run("cat " + dir + "/bf16/dump/*.schedule.txt | grep -c 'precision=bf16'");
  EXPECT_GE(std::atoi(sched.output.c_str()), 4) << "the forward and the gradients' kernels say bf16";
  kt::saveNpy(dir + "/c.npy", kt::randomT({H, L, hd}, 7));
  std::map<std::string, ref::T> w, wr;
  unsigned seed = 40;
  for (auto &[name, shape] : c.shapes) w[name] = kt::randomT(shape, seed++, name == "rot" ? 1.0f : 0.8f);
  wr = w;
  for (const std::string &n : c.rounded) wr[n] = kt::roundedBf16(w[n]);
  auto grads = [&](const std::string &p, const std::map<std::string, ref::T> &weights, const std::string &tag) {
    std::string out = dir + "/" + tag;
    kt::saveWeights(out + ".safetensors", weights);
    auto r = kt::run(exe[p] + " --weights " + out + ".safetensors --input c=" + dir + "/c.npy --threads 2 --output-dir " + out);
    EXPECT_EQ(r.code, 0) << r.output;
    std::map<std::string, ref::T> g;
    g["loss"] = kt::loadNpy(out + "/loss.npy");
    for (const std::string &n : c.rounded) g[n] = kt::loadNpy(out + "/grad." + n + ".npy");
    return g;
  };
  auto bf = grads("bf16", w, "bf16_at_p"), atRounded = grads("f32", wr, "f32_at_rounded"), f32 = grads("f32", w, "f32_at_p");
  for (const std::string &n : c.rounded) {
    double top = 0, same = kt::maxRelDiff(atRounded[n], bf[n], &top), moved = kt::maxRelDiff(f32[n], bf[n]);
    EXPECT_GT(top, 0.0) << n;
    EXPECT_LE(same, 1e-5) << "grad." << n << ": bf16 on P against f32 on round(P)";
    EXPECT_GT(moved, 1e-4) << "grad." << n << ": bf16 on P equals f32 on P: nothing was rounded";
    std::cout << c.name << " grad." << n << ": |bf16(P) - f32(round P)| " << same << ", |bf16(P) - f32(P)| " << moved
              << " of the largest\n";
  }
  EXPECT_NEAR(bf["loss"].v.at(0), atRounded["loss"].v.at(0), 1e-6 * std::abs(atRounded["loss"].v.at(0)));
}

std::vector<RoundedAttentionCase> roundedAttentionCases() {
  const std::vector<int64_t> qkv = {2, 48, 16};
  auto sparse = [](kiln::Mask mask) {
    return [mask](kiln::Model &, const std::map<std::string, kiln::Tensor> &t) {
      return kiln::attention(t.at("q"), t.at("k"), t.at("v"), {.mask = mask});
    };
  };
  return {
      // Two parts (window and strided columns), merged by log-sum-exp.
      {"strided", {"q", "k", "v"}, {{"q", qkv}, {"k", qkv}, {"v", qkv}}, sparse(kiln::Mask::strided({.stride = 8}))},
      {"fixed", {"q", "k", "v"}, {{"q", qkv}, {"k", qkv}, {"v", qkv}}, sparse(kiln::Mask::fixed({.block = 16, .summary = 2}))},
      {"lsh", {"qk", "v"}, {{"qk", qkv}, {"v", qkv}, {"rot", {2, 16, 4}}},
       [](kiln::Model &, const std::map<std::string, kiln::Tensor> &t) {
         return kiln::lsh_attention(t.at("qk"), t.at("v"), t.at("rot"), {.buckets = 8, .hashes = 2, .chunk = 8, .causal = true});
       }},
  };
}
INSTANTIATE_TEST_SUITE_P(Patterns, RoundedAttentionGradients, ::testing::ValuesIn(roundedAttentionCases()),
                         [](const auto &i) { return i.param.name; });
}  // namespace
