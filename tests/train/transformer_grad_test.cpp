// transformer_grad_test.cpp - examples/transformer compiled with --train: its `gradients` entry
// (the teacher-forced loss through the encoder, causal self-attention and cross-attention over
// the encoder's output, S != T) against torch.nn.Transformer's autograd on the same weights
// (tests/fixtures/transformer_grad, from tests/reference/make_grad_fixtures.py): the loss, and
// every parameter's gradient within max |kiln - torch| <= 1e-4 max |torch|.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>

#include "grad_check.h"

namespace {

TEST(TransformerGradients, MatchPyTorchAutograd) {
  std::string fx = std::string(KILN_SOURCE_DIR) + "/tests/fixtures/transformer_grad";
  std::string dir = kt::workDir("train_transformer_grad");
  auto c = kt::run(std::string(KILN_BIN) + "/transformer-compile --train --layers 2 --d-model 32 --heads 2 --d-ff 64 "
                   "--src-vocab 50 --tgt-vocab 60 --ctx 32 --quiet --cache-dir " KILN_TEST_CACHE " -o " + dir + "/transformer");
  ASSERT_EQ(c.code, 0) << c.output;
  auto r = kt::run(dir + "/transformer --entry gradients --weights " + fx + "/weights.safetensors --input src_tokens=" + fx +
                   "/src_tokens.npy --input tgt_tokens=" + fx + "/tgt_tokens.npy --input targets=" + fx +
                   "/targets.npy --output-dir " + dir + "/out");
  ASSERT_EQ(r.code, 0) << r.output;
  float loss = kt::loadNpy(dir + "/out/loss.npy").v.at(0), want = kt::loadNpy(fx + "/loss.npy").v.at(0);
  EXPECT_NEAR(loss, want, 1e-5 * std::abs(want));
  std::map<std::string, ref::T> grads = kt::loadWeights(fx + "/grads.safetensors");
  // Per layer: encoder 12 tensors, decoder 18; the final norms 2 + 2; embeddings and generator 4.
  ASSERT_EQ(grads.size(), 2u * 12u + 2u * 18u + 4u + 4u) << "the fixture's parameters";
  kt::expectFixtureGradients(grads, dir + "/out");
}

}  // namespace
