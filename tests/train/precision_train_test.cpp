// precision_train_test.cpp - mixed-precision training (--precision bf16): the byte-level demo's
// GPT-2 trains with its GEMMs on bfloat16 operands (the forward's and the backward's input
// gradients; f32 sums, f32 weight gradients, master weights and AdamW moments) to within 2% of
// f32 training's loss after 200 steps.
#include <gtest/gtest.h>

#include <cmath>

#include "grad_check.h"

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
}  // namespace
