// sparse_train_test.cpp - block-sparse attention in training: examples/sparse --train, whose
// backward (kiln.attention_grad with the pattern, kiln-tile-sparse-pattern's block schedule)
// visits only the forward's blocks.
//   - Gradients against PyTorch autograd on the same network with a masked dense softmax as its
//     attention (tests/fixtures/sparse_grad_*, tests/reference/make_grad_fixtures.py): strided
//     and fixed with each of the three combinations (merged: two parts and their log-sum-exp
//     merge; alternate: one part per layer; heads: one attention per half of the heads), a
//     window, and block layouts, causal and not. 45 positions: blocks of 16, the last partial;
//     and strided and fixed over 300 positions (19 blocks of 16: many slots per block).
//   - A batch of two sequences attends within each; the cost report counts the visited pairs.
//   - A short training run: the loss falls.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>
#include <regex>

#include "grad_check.h"

namespace {
struct Variant {
  std::string fixture, args;
  int64_t heads = 2;
  std::string size = "--d-model 32 --ctx 64 --summary 2";
};

class SparseGradients : public ::testing::TestWithParam<Variant> {};

TEST_P(SparseGradients, MatchPyTorchMaskedDenseAttention) {
  const Variant &v = GetParam();
  std::string dir = kt::workDir("train_" + v.fixture);
  auto c = kt::run(std::string(KILN_BIN) + "/sparse-compile --train --layers 2 --heads " + std::to_string(v.heads) +
                   " --vocab 64 " + v.size + " " + v.args + " --quiet --cache-dir " KILN_TEST_CACHE " -o " + dir + "/sparse");
  ASSERT_EQ(c.code, 0) << c.output;
  std::map<std::string, ref::T> grads = kt::runFixtureGradients(dir + "/sparse", v.fixture, {"tokens", "targets"}, dir + "/out");
  ASSERT_EQ(grads.size(), 2u + 12u * 2 + 3u) << "the fixture's parameters";
  kt::expectFixtureGradients(grads, dir + "/out");
}

INSTANTIATE_TEST_SUITE_P(
    Patterns, SparseGradients,
    ::testing::Values(Variant{"sparse_grad_strided_merged", "--pattern strided --combine merged --stride 8"},
                      Variant{"sparse_grad_strided_alternate", "--pattern strided --combine alternate --stride 8"},
                      Variant{"sparse_grad_strided_heads", "--pattern strided --combine heads --stride 8", 4},
                      Variant{"sparse_grad_fixed_merged", "--pattern fixed --combine merged --stride 8"},
                      Variant{"sparse_grad_fixed_alternate", "--pattern fixed --combine alternate --stride 8"},
                      Variant{"sparse_grad_fixed_heads", "--pattern fixed --combine heads --stride 8", 4},
                      Variant{"sparse_grad_strided_long", "--pattern strided --stride 16", 2, "--d-model 16 --ctx 320 --summary 4"},
                      Variant{"sparse_grad_fixed_long", "--pattern fixed --stride 16", 2, "--d-model 16 --ctx 320 --summary 4"},
                      Variant{"sparse_grad_window", "--pattern window --stride 8"},
                      Variant{"sparse_grad_layout", "--pattern layout --stride 16 --layout '#...,##..,.##.,#.##'"},
                      Variant{"sparse_grad_layout_noncausal",
                              "--pattern layout --stride 16 --layout '#.#.,.##.,#..#,##.#' --noncausal"}),
    [](const ::testing::TestParamInfo<Variant> &i) { return i.param.fixture; });

// --batch 2: the rows of two sequences one after another, each attending within itself. Two
// copies of the fixture's sequence give its loss and gradients (the mean of two equal halves);
// a second sequence attending into the first would change both.
TEST(SparseTraining, ABatchAttendsWithinEachSequence) {
  std::string dir = kt::workDir("train_sparse_batch");
  auto c = kt::run(std::string(KILN_BIN) + "/sparse-compile --train --batch 2 --layers 2 --heads 2 --vocab 64 --d-model 32 "
                   "--ctx 64 --summary 2 --pattern strided --stride 8 --quiet --cache-dir " KILN_TEST_CACHE " -o " + dir + "/sparse");
  ASSERT_EQ(c.code, 0) << c.output;
  std::string fx = std::string(KILN_SOURCE_DIR) + "/tests/fixtures/sparse_grad_strided_merged";
  for (std::string in : {"tokens", "targets"}) {
    ref::T t = kt::loadNpy(fx + "/" + in + ".npy");
    std::vector<int32_t> two;
    for (int copy = 0; copy < 2; ++copy)
      for (float v : t.v) two.push_back((int32_t)v);
    kt::saveIdRows(dir + "/" + in + ".npy", two, 2);
  }
  auto r = kt::run(dir + "/sparse --entry gradients --weights " + fx + "/weights.safetensors --input tokens=" + dir +
                   "/tokens.npy --input targets=" + dir + "/targets.npy --output-dir " + dir + "/out");
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NEAR(kt::loadNpy(dir + "/out/loss.npy").v.at(0), kt::loadNpy(fx + "/loss.npy").v.at(0), 1e-5 * 4.6);
  kt::expectFixtureGradients(kt::loadWeights(fx + "/grads.safetensors"), dir + "/out");
}

// The cost report counts a sparse gradient's visited pairs, not the causal triangle: at L = 1024
// with stride 32 (blocks of 32), each attention_grad of the strided decoder costs under a
// quarter of the dense causal decoder's (0.19 when this test was written).
TEST(SparseTraining, GradientCostFollowsThePattern) {
  std::string dir = kt::workDir("train_sparse_cost");
  auto flops = [&](const std::string &pattern) {
    std::string cost = dir + "/cost_" + pattern + ".txt";
    auto r = kt::run(std::string(KILN_BIN) + "/sparse-compile --train --layers 1 --d-model 32 --heads 2 --vocab 64 --ctx 1024 "
                     "--stride 32 --pattern " + pattern + " --emit cost --quiet --cache-dir " KILN_TEST_CACHE " -o " + cost);
    EXPECT_EQ(r.code, 0) << r.output;
    std::ifstream f(cost);
    std::string line;
    double v = -1;
    bool inGradients = false;
    while (std::getline(f, line)) {
      if (line.rfind("== entry", 0) == 0) inGradients = line.find("entry gradients") != std::string::npos;
      std::smatch m;
      if (inGradients && std::regex_search(line, m, std::regex(R"(attention_grad\s+\S+\s+([0-9.]+) (K|M|G))"))) {
        v = std::stod(m[1]) * (m[2] == "K" ? 1e3 : m[2] == "M" ? 1e6 : 1e9);
        break;
      }
    }
    EXPECT_GT(v, 0) << cost << ": no attention_grad in the gradients entry";
    return v;
  };
  double sparse = flops("strided"), causal = flops("causal");
  std::cout << "attention_grad FLOPs at L = 1024: strided " << sparse << ", causal " << causal << "\n";
  EXPECT_LT(sparse, 0.25 * causal);
}

TEST(SparseTraining, CombiningAPatternWithoutHalvesIsRefused) {
  std::string dir = kt::workDir("train_sparse_refused");
  auto r = kt::run(std::string(KILN_BIN) + "/sparse-compile --pattern window --combine alternate --layers 1 --d-model 32 --heads 2 "
                   "--ctx 64 --quiet -o " + dir + "/s");
  EXPECT_NE(r.code, 0);
  EXPECT_THAT(r.output, ::testing::HasSubstr("--combine alternate combines the halves of a factorized pattern"));
  r = kt::run(std::string(KILN_BIN) + "/sparse-compile --pattern layout --layers 1 --d-model 32 --heads 2 --ctx 64 --quiet -o " +
              dir + "/s");
  EXPECT_NE(r.code, 0);
  EXPECT_THAT(r.output, ::testing::HasSubstr("--layout (and --noncausal) go with --pattern layout"));
}

// 40 AdamW steps of a 2-layer strided decoder (stride 16, union) on a learnable sequence of 256
// positions: the loss falls.
TEST(SparseTraining, StridedDecoderTrains) {
  std::string dir = kt::workDir("train_sparse_steps");
  std::vector<int32_t> data = kt::randomIds(6000, 64, 12);
  for (size_t i = 0; i < data.size(); ++i) data[i] = i % 7 == 3 ? data[i] : (int32_t)(i % 13);  // learnable
  kt::saveIds(dir + "/data.npy", data);
  auto c = kt::run(std::string(KILN_BIN) + "/sparse-compile --train --train-lr 3e-3 --layers 2 --d-model 32 --heads 2 --vocab 64 "
                   "--ctx 256 --stride 16 --quiet --cache-dir " KILN_TEST_CACHE " -o " + dir + "/sparse");
  ASSERT_EQ(c.code, 0) << c.output;
  auto r = kt::run(dir + "/sparse --train --data " + dir + "/data.npy --seq 256 --steps 40 --seed 3 --threads 2 --log " + dir +
                   "/log.csv --save " + dir + "/trained.safetensors");
  ASSERT_EQ(r.code, 0) << r.output;
  std::vector<double> l = kt::trainLosses(dir + "/log.csv");
  ASSERT_EQ(l.size(), 40u) << r.output;
  for (double x : l) ASSERT_TRUE(std::isfinite(x));
  EXPECT_LT(l.back(), 0.7 * l.front()) << "the loss falls";
  std::cout << "strided decoder: loss " << l.front() << " -> " << l.back() << " in 40 steps\n";
}
}  // namespace
