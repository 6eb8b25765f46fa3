// llama_grad_test.cpp - examples/llama compiled with --train against transformers'
// LlamaForCausalLM and PyTorch autograd (tests/fixtures/llama_grad_b3, written by
// tests/reference/make_llama_fixtures.py): a batch of 3 sequences of 37 positions, a few
// targets ignored, grouped-query attention, every parameter perturbed. The loss, and every
// parameter's gradient within 5e-6 of its largest element (measured: 1.0e-6 at most, a key
// projection's; the others under 1e-6).
#include <gtest/gtest.h>

#include "grad_check.h"

namespace {

TEST(LlamaGradients, MatchTransformersAutograd) {
  std::string dir = kt::workDir("train_llama_grad");
  auto c = kt::run(std::string(KILN_BIN) + "/llama-compile --train --batch 3 --ctx 64 --config " KILN_SOURCE_DIR
                   "/tests/fixtures/llama_grad_b3/config.json --quiet --cache-dir " KILN_TEST_CACHE " -o " + dir + "/llama");
  ASSERT_EQ(c.code, 0) << c.output;
  std::map<std::string, ref::T> grads = kt::runFixtureGradients(dir + "/llama", "llama_grad_b3", {"tokens", "targets"}, dir + "/out");
  ASSERT_EQ(grads.size(), 3u + 2u * 9u) << "the fixture's parameters";
  kt::expectFixtureGradients(grads, dir + "/out", {}, 5e-6);
}

}  // namespace
