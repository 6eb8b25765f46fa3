// data_parallel_test.cpp - `mpirun -np 2 ./model --train`: each rank takes its rows of the
// same seeded global batch, the gradients are summed over the ranks (kiln.all_reduce, weighted
// by each rank's share of the loss count) and every rank takes the same step. Two ranks must
// give the losses, gradient norms and final weights of one process with the whole batch;
// each rank's log shows its own rows, tokens and loss.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>

#include "grad_check.h"

namespace {
using ::testing::HasSubstr;

// Open MPI as CI runs it: as root, two ranks on however many cores, shared memory only.
const std::string kMpirun =
    "mpirun --allow-run-as-root --oversubscribe --mca btl self,vader --mca btl_vader_single_copy_mechanism none -np 2 ";

// A --log CSV by column name: rows of cells.
struct Log {
  std::vector<std::string> header;
  std::vector<std::vector<std::string>> rows;
  double at(size_t row, const std::string &col) const {
    for (size_t c = 0; c < header.size(); ++c)
      if (header[c] == col) return std::stod(rows.at(row).at(c));
    ADD_FAILURE() << "no column " << col;
    return 0;
  }
};
Log readLog(const std::string &path) {
  Log l;
  l.rows = kt::readCsv(path);
  EXPECT_FALSE(l.rows.empty()) << path;
  if (!l.rows.empty()) l.header = l.rows[0], l.rows.erase(l.rows.begin());
  return l;
}

std::vector<int32_t> learnable(int n, int vocab, int offset) {
  std::vector<int32_t> d(n);
  for (int i = 0; i < n; ++i) d[i] = (int32_t)((i * 7 + i / 13) % (vocab - offset) + offset);
  return d;
}

// Every column both runs share (the loss, the gradient norm, the rate, the evaluation) at every
// step, to 1e-5 relative.
void expectSameSteps(const Log &one, const Log &two, size_t steps) {
  ASSERT_EQ(one.rows.size(), steps);
  ASSERT_EQ(two.rows.size(), steps);
  for (size_t i = 0; i < steps; ++i)
    for (const char *col : {"loss", "grad_norm", "lr"}) {
      double a = one.at(i, col), b = two.at(i, col);
      EXPECT_NEAR(b, a, 1e-5 * std::abs(a)) << col << " at step " << i + 1;
    }
}

// GPT-2, a batch of 3 over 2 ranks: rank 0 takes window 0, rank 1 windows 1 and 2, so the
// gradients are weighted 1/3 and 2/3 (an unweighted mean of the ranks would differ).
TEST(DataParallel, TwoRanksTrainAsOneProcessWithTheWholeBatch) {
  std::string dir = kt::workDir("train_mpi_gpt2");
  std::string exe = kt::compileExample("gpt2", "--train --batch 3 --layers 2 --d-model 32 --heads 2 --vocab 64 --ctx 32", dir);
  ASSERT_FALSE(exe.empty());
  kt::saveIds(dir + "/data.npy", learnable(4000, 64, 0));
  const std::string args = " --train --random-weights --seed 3 --data " + dir + "/data.npy --seq 16 --lr 3e-3 "
                           "--threads 1 --eval-data " + dir + "/data.npy --eval-every 4 --quiet ";
  auto r = kt::run(exe + args + "--steps 8 --batch 3 --log " + dir + "/one.csv --save " + dir + "/one.safetensors");
  ASSERT_EQ(r.code, 0) << r.output;
  r = kt::run(kMpirun + exe + args + "--steps 8 --batch 3 --log " + dir + "/two.csv --save " + dir + "/two.safetensors");
  ASSERT_EQ(r.code, 0) << r.output;
  Log one = readLog(dir + "/one.csv"), two = readLog(dir + "/two.csv"), rank1 = readLog(dir + "/two.rank1.csv");
  expectSameSteps(one, two, 8);
  for (size_t step : {3u, 7u}) EXPECT_NEAR(two.at(step, "eval_loss"), one.at(step, "eval_loss"), 1e-5 * one.at(step, "eval_loss"));
  // Each rank's own rows: rank 0 one window of 16 tokens, rank 1 two; their losses differ and
  // their share-weighted sum is the logged loss.
  ASSERT_EQ(rank1.rows.size(), 8u);
  for (size_t i = 0; i < 8; ++i) {
    EXPECT_EQ(two.at(i, "rank"), 0);
    EXPECT_EQ(two.at(i, "rank_tokens"), 16);
    EXPECT_EQ(rank1.at(i, "rank"), 1);
    EXPECT_EQ(rank1.at(i, "rows"), 2);
    EXPECT_EQ(rank1.at(i, "rank_tokens"), 32);
    double l0 = two.at(i, "rank_loss"), l1 = rank1.at(i, "rank_loss");
    EXPECT_GT(std::abs(l0 - l1), 1e-4) << "the ranks' own losses at step " << i + 1;
    EXPECT_NEAR(l0 / 3 + 2 * l1 / 3, one.at(i, "loss"), 1e-5 * one.at(i, "loss")) << "step " << i + 1;
  }
  // Rank 0's rows are window 0 of each step: one process with --batch 1 takes the same window,
  // so at step 1 (the same weights) its loss is rank 0's own.
  r = kt::run(exe + args + "--batch 1 --steps 1 --log " + dir + "/first.csv");
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NEAR(readLog(dir + "/first.csv").at(0, "loss"), two.at(0, "rank_loss"), 1e-5 * two.at(0, "rank_loss"));
  // Rank 0 wrote the checkpoint: the weights of one process's run. The key bias's exact gradient
  // is zero (softmax cancels q·b_k), so its rounding noise, which AdamW scales up to steps of the
  // learning rate, differs between the runs: that third of c_attn.bias is left out.
  auto want = kt::loadWeights(dir + "/one.safetensors"), got = kt::loadWeights(dir + "/two.safetensors");
  ASSERT_EQ(got.size(), want.size());
  for (auto &[name, w] : want) {
    ref::T g = got.at(name), a = w;
    if (name.ends_with("attn.c_attn.bias"))
      for (size_t k = 32; k < 64; ++k) a.v[k] = g.v[k] = 0;
    EXPECT_LE(kt::maxRelDiff(a, g), 5e-5) << name;
  }
  // Stopped at step 4 and resumed from rank 0's checkpoint by both ranks: the same 8 steps.
  r = kt::run(kMpirun + exe + args + "--steps 4 --batch 3 --log " + dir + "/resumed.csv --save " + dir + "/half.safetensors");
  ASSERT_EQ(r.code, 0) << r.output;
  r = kt::run(kMpirun + exe + " --train --resume " + dir + "/half.safetensors --data " + dir + "/data.npy --seq 16 --lr 3e-3 "
              "--threads 1 --eval-data " + dir + "/data.npy --eval-every 4 --quiet --seed 3 --steps 8 --batch 3 --log " + dir +
              "/resumed.csv");
  ASSERT_EQ(r.code, 0) << r.output;
  expectSameSteps(one, readLog(dir + "/resumed.csv"), 8);
  EXPECT_EQ(readLog(dir + "/resumed.rank1.csv").rows.size(), 8u);
  // Ranks started differently (here another --seed: other windows and other initial weights)
  // are refused before any step, never left to drift apart.
  std::string seed4 = args;
  seed4.replace(seed4.find("--seed 3"), 8, "--seed 4");
  r = kt::run(kMpirun.substr(0, kMpirun.find("-np")) + "-np 1 " + exe + args + "--steps 2 --batch 3 : -np 1 " + exe +
              seed4 + "--steps 2 --batch 3");
  EXPECT_NE(r.code, 0);
  EXPECT_THAT(r.output, HasSubstr("the 2 ranks of this mpirun disagree on the run: start every rank with the same --data"));
  // Another --lr (the optimizer state's rate), or a checkpoint whose moments alone differ, is
  // refused too.
  std::string lr4 = args;
  lr4.replace(lr4.find("--lr 3e-3"), 9, "--lr 4e-3");
  const std::string mpi1 = kMpirun.substr(0, kMpirun.find("-np")) + "-np 1 ";
  r = kt::run(mpi1 + exe + args + "--steps 2 --batch 3 : -np 1 " + exe + lr4 + "--steps 2 --batch 3");
  EXPECT_NE(r.code, 0);
  EXPECT_THAT(r.output, HasSubstr("disagree on the run: start every rank with the same --data, --eval-data, --seq, --batch, "
                                  "--steps, --seed, --lr"));
  auto moved = kt::loadWeights(dir + "/half.safetensors");
  auto m1 = std::find_if(moved.begin(), moved.end(), [](auto &kv) { return kv.first.rfind("optimizer.m.", 0) == 0; });
  ASSERT_NE(m1, moved.end());
  m1->second.v[0] += 1e-3f;
  kt::saveWeights(dir + "/moved.safetensors", moved);
  std::string resumeHalf = args, resumeMoved = args;
  resumeHalf.replace(resumeHalf.find("--random-weights"), 16, "--resume " + dir + "/half.safetensors");
  resumeMoved.replace(resumeMoved.find("--random-weights"), 16, "--resume " + dir + "/moved.safetensors");
  r = kt::run(mpi1 + exe + resumeHalf + "--steps 8 --batch 3 : -np 1 " + exe + resumeMoved + "--steps 8 --batch 3");
  EXPECT_NE(r.code, 0);
  EXPECT_THAT(r.output, HasSubstr("disagree on the run"));
  // Fewer rows than ranks is refused on every rank.
  r = kt::run(kMpirun + exe + args + "--steps 1 --batch 1");
  EXPECT_NE(r.code, 0);
  EXPECT_THAT(r.output, HasSubstr("--batch 1 is smaller than the 2 ranks of this mpirun: each rank takes at least one row"));
  r = kt::run(kMpirun + exe + args + "--steps 1 --batch 8");
  EXPECT_NE(r.code, 0);
  EXPECT_THAT(r.output, HasSubstr("--batch 8 (4 rows per rank: --batch 8 over 2 ranks) exceeds the compiled bound 3 of B"));
}

// BERT's masked-LM loss is a mean over the masked positions, which differ between the ranks'
// rows: each rank's share is its masked count over the batch's (summed over the ranks), and a
// share by rows would give other losses.
TEST(DataParallel, MaskedLmSharesFollowTheMaskedCounts) {
  std::string dir = kt::workDir("train_mpi_bert");
  std::string exe = kt::compileExample("bert", "--train --batch 3 --layers 2 --d-model 32 --heads 2 --vocab 120 --ctx 32", dir);
  ASSERT_FALSE(exe.empty());
  kt::saveIds(dir + "/data.npy", learnable(4000, 120, 5));
  const std::string args = " --train --random-weights --seed 3 --data " + dir + "/data.npy --seq 16 --batch 3 --steps 6 "
                           "--lr 1e-3 --threads 1 --quiet ";
  auto r = kt::run(exe + args + "--log " + dir + "/one.csv");
  ASSERT_EQ(r.code, 0) << r.output;
  r = kt::run(kMpirun + exe + args + "--log " + dir + "/two.csv");
  ASSERT_EQ(r.code, 0) << r.output;
  Log one = readLog(dir + "/one.csv"), two = readLog(dir + "/two.csv"), rank1 = readLog(dir + "/two.rank1.csv");
  expectSameSteps(one, two, 6);
  double byRows = 0;  // the largest gap between the loss and the ranks' losses weighted by rows
  for (size_t i = 0; i < 6; ++i)
    byRows = std::max(byRows, std::abs(two.at(i, "rank_loss") / 3 + 2 * rank1.at(i, "rank_loss") / 3 - one.at(i, "loss")));
  EXPECT_GT(byRows, 1e-3) << "the masked counts differ between the ranks, so weighting by rows must not match";
}

}  // namespace
