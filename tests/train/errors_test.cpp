// errors_test.cpp - training's bad input: DSL misuse at the user's line, ops the loss depends on
// without a gradient rule at the model's line, and targets outside the vocabulary at run time.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "harness.h"
#include "kiln/Driver/Driver.h"
#include "kiln/dsl/Ops.h"

namespace {
using ::testing::HasSubstr;

TEST(TrainingErrors, DslMisuseIsReportedAtTheUsersLine) {
  kiln::Model m("bad");
  kiln::Dim L = m.seq("L", 8);
  auto tok = m.tokens("tokens", L, 10);
  auto tgt = m.targets("targets", L, 10);
  auto logits = kiln::embedding(m.param("e", {10, 10}), tok);
  EXPECT_KILN_ERROR(m.gradients(), "gradients: entry 'forward' has no loss yet");
  EXPECT_KILN_ERROR(m.loss(logits), "loss: a loss term must be an f32 scalar of shape [1]");
  EXPECT_KILN_ERROR(kiln::cross_entropy(logits, tok, {.ignore_index = 0}), "ignore_index must be negative");
  EXPECT_KILN_ERROR(kiln::cross_entropy(logits, kiln::slice(logits, 1, 0, 1)), "the targets must have rank 1");
  EXPECT_KILN_ERROR(kiln::cross_entropy(logits, tgt, {.ignore_index = -100}),
                    "the targets (input 'targets') mark ignored positions with -1 but ignore_index is -100");
  auto wide = m.targets("wide", L, 11);
  EXPECT_KILN_ERROR(kiln::cross_entropy(logits, wide), "the targets' vocab (input 'wide') is 11 but the logits have only 10");
  EXPECT_KILN_ERROR(m.targets("t2", L, 10, 3), "ignore_index must be negative");
  EXPECT_KILN_ERROR(m.checkpoint([&] { return m.checkpoint([&] { return kiln::relu(logits); }); }),
                    "checkpoint: a checkpointed block inside another one is not supported");
  EXPECT_NO_THROW(m.checkpoint([&] { return kiln::relu(logits); }));  // the failed one left no block open
  m.loss(kiln::cross_entropy(logits, tgt));
  EXPECT_NO_THROW(m.gradients());
  EXPECT_KILN_ERROR(m.train({.optimizer = {.lr = 0}}), "train: the learning rate must be positive");
  EXPECT_KILN_ERROR(m.train({.warmup_steps = 10, .decay = kiln::Cosine{.steps = 5}}),
                    "the cosine decay needs steps beyond the warmup");
  // Another entry may have its own "loss" (one output), of the same shape only.
  m.entry("other");
  auto t2 = m.tokens("tokens", L, 10);
  EXPECT_KILN_ERROR(m.output("loss", kiln::embedding(m.param("e", {10, 10}), t2)),
                    "output 'loss' is shared between entries but has shape [L(<=8), 10] here and [1] in entry 'forward'");
}

// Compiles `build` with the driver; its exit code, stderr in `err`.
int compileModel(const std::string &name, const std::function<void(kiln::Model &)> &build, std::string &err) {
  std::string dir = kt::workDir("train_errors");
  std::vector<std::string> args{name, "-o", dir + "/" + name, "--quiet", "--cache-dir", KILN_TEST_CACHE};
  std::vector<char *> argv;
  for (auto &a : args) argv.push_back(a.data());
  kiln::Driver d(name, "test model");
  testing::internal::CaptureStderr();
  int rc = d.run((int)argv.size(), argv.data(), build);
  err = testing::internal::GetCapturedStderr();
  return rc;
}

TEST(TrainingErrors, AnOpWithoutAGradientRuleIsNamedAtItsLine) {
  std::string err;
  int line = 0;
  int rc = compileModel("no_rule", [&](kiln::Model &m) {
    kiln::Dim L = m.seq("L", 8);
    auto x = kiln::reshape(kiln::embedding(m.param("e", {10, 4}), m.tokens("tokens", L, 10)), {1, L, 4});
    line = __LINE__ + 1;
    auto y = kiln::batch_matmul(x, m.param("k", {1, 4, 10}));
    m.loss(kiln::cross_entropy(kiln::reshape(y, {L, 10}), m.targets("targets", L, 10)));
    m.gradients();
  }, err);
  EXPECT_NE(rc, 0);
  EXPECT_THAT(err, HasSubstr("errors_test.cpp:" + std::to_string(line)));
  EXPECT_THAT(err, HasSubstr("'kiln.batch_matmul' has no gradient rule, and the loss depends on it"));

  rc = compileModel("cache_rule", [&](kiln::Model &m) {
    kiln::Dim L = m.seq("L", 8);
    auto x = kiln::split_heads(kiln::embedding(m.param("e", {10, 4}), m.tokens("tokens", L, 10)), 2);
    auto past = m.input("past", {1}, {.dtype = kiln::DType::I32, .vocab = 8});
    line = __LINE__ + 1;
    auto a = kiln::attention(x, x, x, {.mask = kiln::Mask::causal(), .past = past});
    m.loss(kiln::cross_entropy(kiln::linear(kiln::merge_heads(a), m.param("w", {10, 4})), m.targets("targets", L, 10)));
    m.gradients();
  }, err);
  EXPECT_NE(rc, 0);
  EXPECT_THAT(err, HasSubstr("errors_test.cpp:" + std::to_string(line)));
  EXPECT_THAT(err, HasSubstr("attention over a cache (past or key_count) is not differentiable"));
}

TEST(TrainingErrors, TargetsOutsideTheVocabularyAreRejected) {
  std::string dir = kt::workDir("train_targets");
  std::string exe = kt::compile(dir, "ce", [&](kiln::Model &m) {
    kiln::Dim L = m.seq("L", 8);
    auto x = kiln::embedding(m.param("e", {10, 10}), m.tokens("tokens", L, 10));
    m.loss(kiln::cross_entropy(x, m.targets("targets", L, 10)));
  });
  ASSERT_FALSE(exe.empty());
  auto r = kt::run(exe + " --random-weights --tokens tokens=1,2,3 --tokens targets=4,-1,9");
  EXPECT_EQ(r.code, 0) << r.output;
  r = kt::run(exe + " --random-weights --tokens tokens=1,2,3 --tokens targets=4,-2,9");
  EXPECT_NE(r.code, 0);
  EXPECT_THAT(r.output, HasSubstr("input 'targets': token id -2 at position 1 is outside the vocabulary [0, 10) "
                                  "(-1 marks an ignored position)"));
  r = kt::run(exe + " --random-weights --tokens tokens=1,2,3 --tokens targets=4,10,9");
  EXPECT_NE(r.code, 0);
  EXPECT_THAT(r.output, HasSubstr("token id 10 at position 1 is outside the vocabulary"));
}

// The loss itself: the mean over valid positions of -log softmax, none valid giving 0.
TEST(CrossEntropy, IsTheMeanOverValidPositions) {
  std::string dir = kt::workDir("train_ce_values");
  const int64_t V = 300;  // wider than a vector, not a multiple of one
  std::string exe = kt::compile(dir, "ce", [&](kiln::Model &m) {
    kiln::Dim L = m.seq("L", 64);
    auto logits = m.input("logits", {L, V});
    m.loss(kiln::cross_entropy(logits, m.targets("targets", L, V)));
  });
  ASSERT_FALSE(exe.empty());
  for (int64_t L : {1, 37}) {
    ref::T logits = kt::randomT({L, V}, 3, 4.0f);
    std::vector<int32_t> t = kt::randomIds((int)L, (int)V, 4);
    for (size_t i = 0; i < t.size(); i += 3) t[i] = -1;
    kt::saveNpy(dir + "/logits.npy", logits);
    kt::saveIds(dir + "/targets.npy", t);
    auto r = kt::run(exe + " --input logits=" + dir + "/logits.npy --input targets=" + dir + "/targets.npy --output-dir " +
                     dir + "/out");
    ASSERT_EQ(r.code, 0) << r.output;
    double sum = 0;
    int n = 0;
    for (int64_t i = 0; i < L; ++i) {
      if (t[i] < 0) continue;
      double mx = -1e30, s = 0;
      for (int64_t c = 0; c < V; ++c) mx = std::max(mx, (double)logits.at(i, c));
      for (int64_t c = 0; c < V; ++c) s += std::exp((double)logits.at(i, c) - mx);
      sum += std::log(s) + mx - logits.at(i, t[i]);
      ++n;
    }
    ref::T got = kt::loadNpy(dir + "/out/loss.npy");
    EXPECT_NEAR(got.v.at(0), n ? sum / n : 0.0, 1e-5 * std::max(1.0, sum / std::max(n, 1))) << "L = " << L;
  }
}

}  // namespace
