// gpt2_grad_test.cpp - examples/gpt2 compiled with --train against PyTorch
// (tests/reference/make_grad_fixtures.py): its `gradients` entry against autograd on the same
// weights (the loss, and every parameter's gradient within max |kiln - torch| <= 1e-4
// max |torch|), and 20 steps of `./gpt2 --train` against torch.optim.AdamW with the same
// clipping, schedule and windows (each step's loss and rate, the final weights).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <sstream>

#include "grad_check.h"

namespace {

TEST(Gpt2Gradients, MatchPyTorchAutograd) {
  std::string dir = kt::workDir("train_gpt2_grad");
  auto c = kt::run(std::string(KILN_BIN) + "/gpt2-compile --train --layers 2 --d-model 64 --heads 4 --vocab 256 --ctx 64 "
                   "--quiet --cache-dir " KILN_TEST_CACHE " -o " + dir + "/gpt2");
  ASSERT_EQ(c.code, 0) << c.output;
  std::map<std::string, ref::T> grads = kt::runFixtureGradients(dir + "/gpt2", "gpt2_grad", {"tokens", "targets"}, dir + "/out");
  ASSERT_EQ(grads.size(), 2u + 2u + 12u * 2u) << "the fixture's parameters";
  kt::expectFixtureGradients(grads, dir + "/out");
}

TEST(Gpt2Training, TwentyAdamWStepsMatchTorch) {
  std::string fx = std::string(KILN_SOURCE_DIR) + "/tests/fixtures/gpt2_adamw";
  std::string dir = kt::workDir("train_gpt2_adamw");
  auto c = kt::run(std::string(KILN_BIN) + "/gpt2-compile --train --layers 2 --d-model 32 --heads 2 --vocab 64 --ctx 32 "
                   "--train-lr 3e-3 --train-warmup 5 --train-decay-steps 15 --quiet --cache-dir " KILN_TEST_CACHE " -o " +
                   dir + "/gpt2");
  ASSERT_EQ(c.code, 0) << c.output;
  auto r = kt::run(dir + "/gpt2 --train --quiet --weights " + fx + "/init.safetensors --data " + fx +
                   "/data.npy --seq 19 --steps 20 --seed 5 --log " + dir + "/log.csv --save " + dir + "/final.safetensors");
  ASSERT_EQ(r.code, 0) << r.output;
  ref::T losses = kt::loadNpy(fx + "/losses.npy"), lrs = kt::loadNpy(fx + "/lrs.npy");
  ASSERT_EQ(losses.v.size(), 20u);
  std::ifstream log(dir + "/log.csv");
  std::string line;
  std::getline(log, line);  // the header
  int step = 0;
  while (std::getline(log, line)) {
    std::stringstream ss(line);
    std::vector<std::string> cells;
    for (std::string cell; std::getline(ss, cell, ',');) cells.push_back(cell);
    ASSERT_GE(cells.size(), 4u) << line;
    ASSERT_LT(step, 20) << line;
    EXPECT_EQ(std::stoi(cells[0]), step + 1);
    EXPECT_NEAR(std::stod(cells[1]), losses.v[step], 1e-4 * losses.v[step]) << "loss at step " << step + 1;
    EXPECT_NEAR(std::stod(cells[3]), lrs.v[step], 1e-5 * lrs.v[step]) << "lr at step " << step + 1;
    ++step;
  }
  EXPECT_EQ(step, 20);
  kt::expectTrainedWeights(fx, dir + "/final.safetensors", "20 steps");
}

}  // namespace
