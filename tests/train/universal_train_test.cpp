// universal_train_test.cpp - the Universal Transformer trains with ACT's ponder cost
// (examples/universal --train --causal; kiln-unroll-act, kiln.act_update_grad, kiln.mean):
//   - Its gradients and loss (next-token cross-entropy + tau * mean(N + R)) against PyTorch
//     autograd through the ACT loop unrolled in plain code, positions halting after 2, 3 and 4
//     steps (tests/fixtures/universal_grad, tests/reference/make_grad_fixtures.py); the same
//     with the depthwise-separable convolution as the transition (universal_grad_sepconv).
//   - Training steps: the loss falls, the ponder term is logged, and afterwards the positions of
//     a sequence halt at different depths.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <set>

#include "grad_check.h"

namespace {
const std::string kSmall = "--train --causal --d-model 32 --heads 2 --vocab 64 --ctx 64 --max-steps 4";

// Compiles examples/universal with `flags` into `dir` and compares its gradients on the fixture
// with PyTorch's. attn.k.bias has a zero gradient in exact arithmetic (it shifts a query's
// scores by one constant, which softmax ignores): rounding noise on both sides, compared to the
// largest gradient instead of to itself.
void expectUniversalGradients(const std::string &fixture, const std::string &flags, const std::string &dir) {
  std::string exe = kt::compileExample("universal", flags, dir);
  ASSERT_FALSE(exe.empty());
  std::map<std::string, ref::T> grads = kt::runFixtureGradients(exe, fixture, {"tokens", "targets"}, dir + "/out");
  ASSERT_EQ(grads.size(), flags.find("sepconv") != std::string::npos ? 21u : 19u) << "the fixture's parameters";
  auto kBias = [](const std::string &n) { return n == "ut.block.attn.k.bias"; };
  kt::expectFixtureGradients(grads, dir + "/out", kBias);
  float largest = 0;
  for (auto &[name, g] : grads)
    for (float v : g.v) largest = std::max(largest, std::abs(v));
  ref::T got = kt::loadNpy(dir + "/out/grad.ut.block.attn.k.bias.npy"), want = grads.at("ut.block.attn.k.bias");
  ASSERT_EQ(got.shape, want.shape);
  for (size_t i = 0; i < want.v.size(); ++i) EXPECT_LE(std::abs(got.v[i] - want.v[i]), 1e-6f * largest) << i;
}

TEST(UniversalTrain, GradientsMatchPyTorchUnrolledAct) {
  std::string dir = kt::workDir("train_universal_grad");
  expectUniversalGradients("universal_grad", kSmall + " --act-ponder 0.5", dir);
  // The ponder term reaches the halting unit: without it (tau 0) its gradient differs.
  std::string exe0 = kt::compileExample("universal", kSmall + " --act-ponder 0", dir + "/no_ponder");
  ASSERT_FALSE(exe0.empty());
  std::string fx = std::string(KILN_SOURCE_DIR) + "/tests/fixtures/universal_grad";
  auto r = kt::run(exe0 + " --entry gradients --weights " + fx + "/weights.safetensors --input tokens=" + fx +
                   "/tokens.npy --input targets=" + fx + "/targets.npy --output-dir " + dir + "/out0");
  ASSERT_EQ(r.code, 0) << r.output;
  ref::T hb = kt::loadNpy(dir + "/out/grad.ut.halt.bias.npy"), hb0 = kt::loadNpy(dir + "/out0/grad.ut.halt.bias.npy");
  EXPECT_GT(std::abs(hb.v[0] - hb0.v[0]), 1e-3) << "the ponder cost's gradient of the halting bias";
}

// The depthwise-separable transition: kiln.depthwise_conv_grad's input and weight gradients.
TEST(UniversalTrain, SepconvGradientsMatchPyTorch) {
  expectUniversalGradients("universal_grad_sepconv", kSmall + " --act-ponder 0.5 --transition sepconv",
                           kt::workDir("train_universal_grad_sepconv"));
}

// A sequence the model can learn; 200 AdamW steps with tau 0.1. The loss falls, the log has
// the ponder term (mean(N + R), unweighted), which falls, and the trained model's positions
// halt at different depths (at the start every position takes 2 steps: the halting bias starts
// at 1, p = 0.73). With tau 0.01 as many steps leave every position at 2.
TEST(UniversalTrain, TrainsAndPositionsHaltAtDifferentDepths) {
  std::string dir = kt::workDir("train_universal_steps");
  std::string exe = kt::compileExample("universal", kSmall + " --train-lr 3e-3 --act-ponder 0.1", dir);
  ASSERT_FALSE(exe.empty());
  std::vector<int32_t> data = kt::randomIds(4000, 64, 21);
  for (size_t i = 0; i < data.size(); ++i) data[i] = i % 5 == 2 ? data[i] : (int32_t)(i % 11);  // learnable
  kt::saveIds(dir + "/data.npy", data);
  auto r = kt::run(exe + " --train --data " + dir + "/data.npy --seq 48 --steps 200 --seed 4 --threads 2 --log " + dir +
                   "/log.csv --save " + dir + "/trained.safetensors");
  ASSERT_EQ(r.code, 0) << r.output;
  std::vector<std::vector<std::string>> rows = kt::readCsv(dir + "/log.csv");
  ASSERT_EQ(rows.size(), 201u) << r.output;
  ASSERT_EQ(rows[0].back(), "loss.ut.ponder");
  std::vector<double> loss = kt::trainLosses(dir + "/log.csv");
  double ponder0 = std::stod(rows[1].back()), ponder1 = std::stod(rows.back().back());
  EXPECT_GT(ponder0, 1.0) << "mean(N + R): at least one step";
  EXPECT_LT(ponder1, ponder0) << "the ponder cost falls";
  EXPECT_LT(loss.back(), 0.7 * loss.front()) << "the loss falls";
  std::cout << "loss " << loss.front() << " -> " << loss.back() << ", ponder term " << ponder0 << " -> " << ponder1
            << " in 200 steps\n";
  // The trained weights' halting depths over a sequence of the data.
  std::vector<int32_t> seq(data.begin() + 100, data.begin() + 148);
  kt::saveIds(dir + "/seq.npy", seq);
  r = kt::run(exe + " --weights " + dir + "/trained.safetensors --input tokens=" + dir + "/seq.npy --output-dir " + dir + "/out");
  ASSERT_EQ(r.code, 0) << r.output;
  ref::T steps = kt::loadNpy(dir + "/out/steps.npy");
  std::set<float> depths(steps.v.begin(), steps.v.end());
  EXPECT_GE(depths.size(), 2u) << "every position halted after the same number of steps";
  std::map<float, int> count;
  for (float s : steps.v) count[s]++;
  std::cout << "halting depths after training:";
  for (auto [s, n] : count) std::cout << " " << n << " positions x " << s << " steps;";
  std::cout << "\n";
}

TEST(UniversalTrain, TrainingABidirectionalEncoderIsRefused) {
  std::string dir = kt::workDir("train_universal_refused");
  auto r = kt::run(std::string(KILN_BIN) + "/universal-compile --train --d-model 32 --heads 2 --ctx 64 --quiet -o " + dir + "/u");
  EXPECT_NE(r.code, 0);
  EXPECT_THAT(r.output, ::testing::HasSubstr("--train trains a language model (each position predicts the next token): add --causal"));
}
}  // namespace
