// aux_loss_test.cpp - Al-Rfou et al. 2018's auxiliary losses (examples/gpt2 --train-aux-layers
// --train-ahead K) against PyTorch (tests/reference/make_grad_fixtures.py, gpt2_aux_loss):
// every intermediate block predicting through the shared head, dropped on a schedule bound to
// the step counter (LossOptions::until, kiln.loss_weight), and heads for the tokens further
// ahead (Model::targets with Ahead, which --train fills from a longer window).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>

#include "grad_check.h"
#include "kiln/dsl/Ops.h"

namespace {
using ::testing::HasSubstr;

const std::string kSmall = "--train --layers 3 --d-model 32 --heads 2 --vocab 64 --ctx 32 --train-aux-layers ";

// The `gradients` entry run on its own (no --train, so no total: every term counts) against
// autograd: the loss and all 42 gradients, the extra heads' among them.
TEST(AuxLosses, GradientsOfEveryTermMatchPyTorch) {
  std::string dir = kt::workDir("train_aux_grad");
  auto c = kt::run(std::string(KILN_BIN) + "/gpt2-compile " + kSmall + "--train-ahead 3 --quiet --cache-dir " KILN_TEST_CACHE
                   " -o " + dir + "/gpt2");
  ASSERT_EQ(c.code, 0) << c.output;
  std::map<std::string, ref::T> grads =
      kt::runFixtureGradients(dir + "/gpt2", "gpt2_aux_grad", {"tokens", "targets", "targets.2", "targets.3"}, dir + "/out");
  ASSERT_EQ(grads.size(), 2u + 2u + 12u * 3u + 2u) << "the fixture's parameters";
  kt::expectFixtureGradients(grads, dir + "/out");
}

// Ten steps of `./gpt2 --train --steps 10`: block 1's term counts at step 1, block 2's at steps
// 1-3, then only the next-token loss and the head two ahead (weight 0.5) remain. Each step's
// loss, its next-token term and the final weights against torch.optim.AdamW on the same
// windows of T + 2 tokens.
TEST(AuxLosses, TenStepsDropTheIntermediateTermsOnScheduleAsTorch) {
  std::string fx = std::string(KILN_SOURCE_DIR) + "/tests/fixtures/gpt2_aux_adamw";
  std::string dir = kt::workDir("train_aux_adamw");
  auto c = kt::run(std::string(KILN_BIN) + "/gpt2-compile " + kSmall + "--train-ahead 2 --train-lr 3e-3 --train-warmup 3 "
                   "--quiet --cache-dir " KILN_TEST_CACHE " -o " + dir + "/gpt2");
  ASSERT_EQ(c.code, 0) << c.output;
  auto r = kt::run(dir + "/gpt2 --train --quiet --weights " + fx + "/init.safetensors --data " + fx +
                   "/data.npy --seq 19 --steps 10 --seed 5 --log " + dir + "/log.csv --save " + dir + "/final.safetensors");
  ASSERT_EQ(r.code, 0) << r.output;
  ref::T losses = kt::loadNpy(fx + "/losses.npy");
  ASSERT_EQ(losses.v.size(), 10u);
  // The fixture itself shows the schedule: two intermediate terms at step 1, one at 2-3, none
  // after (each about ln 64 at the start), so a kiln that never dropped them could not match.
  EXPECT_GT(losses.v[0] - losses.v[1], 3.0);
  EXPECT_GT(losses.v[2] - losses.v[3], 3.0);
  std::vector<double> got = kt::trainLosses(dir + "/log.csv");
  ASSERT_EQ(got.size(), 10u);
  for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], losses.v[i], 1e-4 * losses.v[i]) << "loss at step " << i + 1;
  // The next-token term on its own (LossOptions::name "next"): the log's column loss.next.
  ref::T next = kt::loadNpy(fx + "/next_losses.npy");
  std::ifstream log(dir + "/log.csv");
  std::string header, row;
  std::getline(log, header);
  EXPECT_TRUE(header.ends_with(",loss.next")) << header;
  for (size_t i = 0; std::getline(log, row) && i < next.v.size(); ++i) {
    double v = std::stod(row.substr(row.rfind(',') + 1));
    EXPECT_NEAR(v, next.v[i], 1e-4 * next.v[i]) << "loss.next at step " << i + 1;
  }
  ASSERT_TRUE(kt::loadWeights(fx + "/final.safetensors").count("aux.ahead.2.weight"));
  kt::expectTrainedWeights(fx, dir + "/final.safetensors", "10 steps");
}

TEST(AuxLosses, BadOptionsAreRefused) {
  kiln::Model m("bad");
  kiln::Dim L = m.seq("L", 8);
  auto tok = m.tokens("tokens", L, 10);
  auto tgt = m.targets("targets", L, 10);
  auto ce = kiln::cross_entropy(kiln::embedding(m.param("e", {10, 10}), tok), tgt);
  EXPECT_KILN_ERROR(m.loss(ce, {.until = 1.5f}), "loss: until must be a fraction of the training steps in (0, 1]");
  EXPECT_KILN_ERROR(m.loss(ce, {.until = -0.25f}), "got -0.25");
  EXPECT_KILN_ERROR(m.targets("t0", L, 10, kiln::Ahead{.k = 0}), "targets 't0': the target must be 1 to 1024 positions ahead");
  EXPECT_KILN_ERROR(m.targets("t3", L, 10, kiln::Ahead{.k = 3, .ignore_index = 2}), "ignore_index must be negative");
  // Two scheduled terms in one entry share its step counter.
  EXPECT_NO_THROW(m.loss(ce, {.until = 0.5f}));
  EXPECT_NO_THROW(m.loss(ce, {.weight = 0.5f, .until = 0.25f}));
}

// A data file shorter than one window of T + K tokens is named with that length.
TEST(AuxLosses, DataShorterThanTheLongerWindowIsRefused) {
  std::string dir = kt::workDir("train_aux_short");
  auto c = kt::run(std::string(KILN_BIN) + "/gpt2-compile --train --layers 1 --d-model 16 --heads 2 --vocab 64 --ctx 32 "
                   "--train-ahead 3 --quiet --cache-dir " KILN_TEST_CACHE " -o " + dir + "/gpt2");
  ASSERT_EQ(c.code, 0) << c.output;
  kt::saveIds(dir + "/d.npy", kt::randomIds(10, 64, 1));
  auto r = kt::run(dir + "/gpt2 --train --random-weights --data " + dir + "/d.npy --seq 8 --steps 2");
  EXPECT_NE(r.code, 0);
  EXPECT_THAT(r.output, HasSubstr("holds 10 tokens, fewer than one window of --seq + 3 = 11"));
}

}  // namespace
