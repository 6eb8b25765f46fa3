// bert_mlm_test.cpp - examples/bert compiled with --train (the masked-LM head over the tied word
// embeddings): its `gradients` entry against PyTorch autograd (tests/fixtures/bert_mlm_grad,
// from tests/reference/make_grad_fixtures.py), the masking --train does (kilnrt_tokens_mask)
// against its stated rates, and a short masked-LM training run that learns.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <sstream>

#include "grad_check.h"
#include "kilnrt/api.h"

namespace {
using ::testing::HasSubstr;

std::string compileBert(const std::string &dir, const std::string &extra = "") {
  auto c = kt::run(std::string(KILN_BIN) + "/bert-compile --train --layers 2 --d-model 32 --heads 2 --vocab 120 --ctx 32 " +
                   extra + " --quiet --cache-dir " KILN_TEST_CACHE " -o " + dir + "/bert");
  EXPECT_EQ(c.code, 0) << c.output;
  return c.code == 0 ? dir + "/bert" : "";
}

TEST(BertMaskedLm, GradientsMatchPyTorchAutograd) {
  std::string dir = kt::workDir("train_bert_mlm_grad");
  std::string exe = compileBert(dir);
  ASSERT_FALSE(exe.empty());
  std::map<std::string, ref::T> grads = kt::runFixtureGradients(exe, "bert_mlm_grad", {"tokens", "targets"}, dir + "/out");
  ASSERT_EQ(grads.size(), 5u + 2u * 16u + 5u) << "the fixture's parameters";
  // q·b_k is the same for every key of a row, which softmax cancels: the key bias's exact
  // gradient is zero, and both sides hold rounding noise. Both must be tiny next to the key
  // weight's gradient.
  auto keyBias = [](const std::string &name) { return name.ends_with("attention.self.key.bias"); };
  kt::expectFixtureGradients(grads, dir + "/out", keyBias);
  auto maxAbs = [](const ref::T &t) {
    double m = 0;
    for (float v : t.v) m = std::max(m, (double)std::abs(v));
    return m;
  };
  int keyBiases = 0;
  for (auto &[name, g] : grads) {
    if (!keyBias(name)) continue;
    ++keyBiases;
    double scale = maxAbs(grads.at(name.substr(0, name.size() - 4) + "weight"));
    EXPECT_LE(maxAbs(g), 1e-5 * scale) << name;
    EXPECT_LE(maxAbs(kt::loadNpy(dir + "/out/grad." + name + ".npy")), 1e-5 * scale) << name;
  }
  EXPECT_EQ(keyBiases, 2);
}

// kilnrt_tokens_mask: about 15% of positions picked, of those 80% [MASK], 10% random, 10% kept;
// targets only where picked; never a window without a target; the seed decides.
TEST(BertMaskedLm, MaskingFollowsTheRates) {
  const int64_t n = 200000, vocab = 1000, mask = 103;
  std::vector<int32_t> ids = kt::randomIds((int)n, (int)vocab, 5);
  for (auto &i : ids) i = i == mask ? 0 : i;  // no [MASK] in the text: every masked one is the mask's doing
  std::vector<int32_t> tok(n), tgt(n);
  ASSERT_EQ(kilnrt_tokens_mask(ids.data(), n, vocab, mask, 0.15f, 42, tok.data(), tgt.data()), KILNRT_OK);
  int64_t picked = 0, masked = 0, kept = 0, random = 0;
  for (int64_t i = 0; i < n; ++i) {
    if (tgt[i] < 0) {
      EXPECT_EQ(tok[i], ids[i]) << i;
      ASSERT_EQ(tgt[i], -1);
      continue;
    }
    ++picked;
    ASSERT_EQ(tgt[i], ids[i]);
    if (tok[i] == mask) ++masked;
    else if (tok[i] == ids[i]) ++kept;
    else ++random;
  }
  EXPECT_NEAR(picked / (double)n, 0.15, 0.005);
  EXPECT_NEAR(masked / (double)picked, 0.8, 0.01);
  EXPECT_NEAR(random / (double)picked, 0.1, 0.01);  // a random id equal to the original counts as kept
  EXPECT_NEAR(kept / (double)picked, 0.1, 0.01);
  std::vector<int32_t> tok2(n), tgt2(n);
  ASSERT_EQ(kilnrt_tokens_mask(ids.data(), n, vocab, mask, 0.15f, 42, tok2.data(), tgt2.data()), KILNRT_OK);
  EXPECT_EQ(tok, tok2);
  EXPECT_EQ(tgt, tgt2);
  // A short window at a small rate still gets a target.
  for (uint64_t seed = 0; seed < 50; ++seed) {
    ASSERT_EQ(kilnrt_tokens_mask(ids.data(), 3, vocab, mask, 0.01f, seed, tok.data(), tgt.data()), KILNRT_OK);
    EXPECT_GE(std::max({tgt[0], tgt[1], tgt[2]}), 0) << "seed " << seed;
  }
  EXPECT_EQ(kilnrt_tokens_mask(ids.data(), 3, vocab, vocab, 0.15f, 1, tok.data(), tgt.data()), KILNRT_USER_ERROR);
  EXPECT_THAT(kilnrt_last_error(), HasSubstr("the mask token 1000 is outside the vocabulary [0, 1000)"));
}

// ./bert --train on a text with structure (a phrase of 11 distinct ids, repeated): a model that
// ignores the context can do no better than ln 11 = 2.40 nats at a masked position; after 3000
// steps (about 2 s) the eval loss (on fixed masks) must be below ln 11 - 0.4, so the model reads
// the neighbours (seeds 1-5 measured: 0.25 to 1.37).
TEST(BertMaskedLm, TrainingLearns) {
  std::string dir = kt::workDir("train_bert_mlm_run");
  std::string exe = compileBert(dir, "--train-lr 1e-3 --train-warmup 20");
  ASSERT_FALSE(exe.empty());
  std::vector<int32_t> data;
  for (int rep = 0; rep < 200; ++rep)
    for (int t : {5, 17, 42, 8, 99, 23, 61, 7, 3, 77, 11}) data.push_back(t);
  kt::saveIds(dir + "/data.npy", data);
  auto r = kt::run(exe + " --train --quiet --data " + dir + "/data.npy --eval-data " + dir + "/data.npy --seq 32 --steps 3000 "
                   "--eval-every 3000 --seed 3 --log " + dir + "/log.csv");
  ASSERT_EQ(r.code, 0) << r.output;
  std::ifstream log(dir + "/log.csv");
  std::vector<std::vector<std::string>> rows;
  for (std::string line; std::getline(log, line);) {
    std::vector<std::string> row;
    std::stringstream ss(line);
    for (std::string cell; std::getline(ss, cell, ',');) row.push_back(cell);
    rows.push_back(row);
  }
  ASSERT_EQ(rows.size(), 3001u);
  double first = 0, last = 0;
  for (int i = 1; i <= 10; ++i) first += std::stod(rows[i][1]) / 10;
  for (int i = 2901; i <= 3000; ++i) last += std::stod(rows[i][1]) / 100;
  ASSERT_GE(rows[3000].size(), 3u);
  const double contextFree = std::log(11.0), eval = std::stod(rows[3000][2]);
  EXPECT_LT(eval, contextFree - 0.4) << "eval loss";
  EXPECT_LT(last, contextFree - 0.4) << "mean training loss of the last 100 steps";
  std::cout << "masked-LM loss: first 10 steps " << first << ", last 100 " << last << ", eval " << eval << " (ln 11 = "
            << contextFree << ")\n";
}

}  // namespace
