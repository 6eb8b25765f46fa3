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
  std::string dir = kt::workDir("train_transformer_grad");
  auto c = kt::run(std::string(KILN_BIN) + "/transformer-compile --train --layers 2 --d-model 32 --heads 2 --d-ff 64 "
                   "--src-vocab 50 --tgt-vocab 60 --ctx 32 --quiet --cache-dir " KILN_TEST_CACHE " -o " + dir + "/transformer");
  ASSERT_EQ(c.code, 0) << c.output;
  std::map<std::string, ref::T> grads = kt::runFixtureGradients(dir + "/transformer", "transformer_grad",
                                                                {"src_tokens", "tgt_tokens", "targets"}, dir + "/out");
  // Per layer: encoder 12 tensors, decoder 18; the final norms 2 + 2; embeddings and generator 4.
  ASSERT_EQ(grads.size(), 2u * 12u + 2u * 18u + 4u + 4u) << "the fixture's parameters";
  kt::expectFixtureGradients(grads, dir + "/out");
}

}  // namespace
