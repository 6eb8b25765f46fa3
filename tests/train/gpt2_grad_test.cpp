// gpt2_grad_test.cpp - examples/gpt2 compiled with --train: its `gradients` entry against
// PyTorch autograd on the same weights (tests/reference/make_grad_fixtures.py): the loss, and
// every parameter's gradient within max |kiln - torch| <= 1e-4 max |torch|.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>

#include "harness.h"

namespace {

TEST(Gpt2Gradients, MatchPyTorchAutograd) {
  std::string fx = std::string(KILN_SOURCE_DIR) + "/tests/fixtures/gpt2_grad";
  std::string dir = kt::workDir("train_gpt2_grad");
  auto c = kt::run(std::string(KILN_BIN) + "/gpt2-compile --train --layers 2 --d-model 64 --heads 4 --vocab 256 --ctx 64 "
                   "--quiet --cache-dir " KILN_TEST_CACHE " -o " + dir + "/gpt2");
  ASSERT_EQ(c.code, 0) << c.output;
  auto r = kt::run(dir + "/gpt2 --entry gradients --weights " + fx + "/weights.safetensors --input tokens=" + fx +
                   "/tokens.npy --input targets=" + fx + "/targets.npy --output-dir " + dir + "/out");
  ASSERT_EQ(r.code, 0) << r.output;
  float loss = kt::loadNpy(dir + "/out/loss.npy").v.at(0), want = kt::loadNpy(fx + "/loss.npy").v.at(0);
  EXPECT_NEAR(loss, want, 1e-5 * std::abs(want));
  std::map<std::string, ref::T> grads = kt::loadWeights(fx + "/grads.safetensors");
  ASSERT_EQ(grads.size(), 2u + 2u + 12u * 2u) << "the fixture's parameters";
  for (auto &[name, g] : grads) {
    ref::T got = kt::loadNpy(dir + "/out/grad." + name + ".npy");
    ASSERT_EQ(got.shape, g.shape) << name;
    double maxRef = 0, maxDiff = 0;
    for (size_t i = 0; i < g.v.size(); ++i) {
      maxRef = std::max(maxRef, (double)std::abs(g.v[i]));
      maxDiff = std::max(maxDiff, (double)std::abs(g.v[i] - got.v[i]));
    }
    EXPECT_GT(maxRef, 0.0) << name;
    EXPECT_LE(maxDiff, 1e-4 * maxRef) << "grad." << name << ": max |kiln - torch| " << maxDiff << ", max |torch| " << maxRef;
  }
}

}  // namespace
