// optimizer_test.cpp - Model::train and the executable's --train: AdamW with clipping, warmup
// and cosine decay against a plain double-precision reference (torch.optim.AdamW's formulas,
// gradients by central differences), and a resumed run against one that never stopped.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "grad_check.h"
#include "kiln/dsl/Ops.h"

namespace {
using ::testing::HasSubstr;
using ::testing::Not;

const int64_t V = 19, d = 6;

// A bigram model: logits = relu(embedding(tokens)) · headᵀ + b; the matrices decay, the bias not.
kiln::TrainOptions options() {
  return {.optimizer = {.lr = 0.05f, .beta1 = 0.8f, .beta2 = 0.95f, .eps = 1e-6f, .weight_decay = 0.1f},
          .clip_norm = 0.5f,
          .warmup_steps = 2,
          .decay = kiln::Cosine{.steps = 5, .min_ratio = 0.2f}};
}

void build(kiln::Model &m) {
  kiln::Dim L = m.seq("L", 16);
  auto tok = m.tokens("tokens", L, V);
  auto tgt = m.targets("targets", L, V);
  auto x = kiln::embedding(m.param("emb", {V, d}, {.scale = 0.5f}), tok);
  auto logits = kiln::linear(kiln::relu(x), m.param("head", {V, d}, {.scale = 0.5f}), m.param("b", {V}, {.scale = 0.5f}));
  m.loss(kiln::cross_entropy(logits, tgt));
  m.train(options());
}

// The same over a batch of up to 4 windows a step (rows(B, L)).
void buildBatched(kiln::Model &m) {
  kiln::Dim L = m.seq("L", 16), B = m.batch("B", 4), N = m.rows(B, L);
  auto tok = m.tokens("tokens", N, V);
  auto tgt = m.targets("targets", N, V);
  auto x = kiln::embedding(m.param("emb", {V, d}, {.scale = 0.5f}), tok);
  auto logits = kiln::linear(kiln::relu(x), m.param("head", {V, d}, {.scale = 0.5f}), m.param("b", {V}, {.scale = 0.5f}));
  m.loss(kiln::cross_entropy(logits, tgt));
  m.train(options());
}

using Params = std::map<std::string, std::vector<double>>;

double refLoss(const Params &w, const std::vector<int32_t> &tok, const std::vector<int32_t> &tgt) {
  double total = 0;
  for (size_t i = 0; i < tok.size(); ++i) {
    std::vector<double> l(V);
    double mx = -1e300, s = 0;
    for (int64_t o = 0; o < V; ++o) {
      double a = w.at("b")[o];
      for (int64_t c = 0; c < d; ++c) a += std::max(0.0, w.at("emb")[tok[i] * d + c]) * w.at("head")[o * d + c];
      l[o] = a;
      mx = std::max(mx, a);
    }
    for (double a : l) s += std::exp(a - mx);
    total += std::log(s) + mx - l[tgt[i]];
  }
  return total / tok.size();
}

TEST(Optimizer, AdamWStepsMatchTheReference) {
  std::string dir = kt::workDir("train_adamw");
  std::string exe = kt::compile(dir, "bigram", build);
  ASSERT_FALSE(exe.empty());
  // T + 1 tokens: every step reads the one window there is.
  const int64_t T = 9, steps = 6;
  std::vector<int32_t> data = kt::randomIds((int)T + 1, (int)V, 17);
  kt::saveIds(dir + "/data.npy", data);
  auto r = kt::run(exe + " --train --data " + dir + "/data.npy --seq " + std::to_string(T) + " --steps " +
                   std::to_string(steps) + " --random-weights --seed 4 --save-weights " + dir + "/init.safetensors --save " +
                   dir + "/ckpt.safetensors --log " + dir + "/log.csv");
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("step 6/6"));

  // The reference: torch.optim.AdamW's update after clip_grad_norm_, with the schedule.
  auto init = kt::loadWeights(dir + "/init.safetensors");
  Params w;
  for (auto &[n, t] : init)  // the parameters (the file also has the optimizer's zero state)
    if (n.rfind("optimizer.", 0) != 0) w[n] = std::vector<double>(t.v.begin(), t.v.end());
  ASSERT_EQ(w.size(), 3u);
  Params m1, v1;
  for (auto &[n, p] : w) m1[n] = v1[n] = std::vector<double>(p.size(), 0.0);
  std::vector<int32_t> tok(data.begin(), data.end() - 1), tgt(data.begin() + 1, data.end());
  auto rows = kt::readCsv(dir + "/log.csv");
  ASSERT_EQ(rows.size(), (size_t)steps + 1);
  EXPECT_EQ(rows[0], (std::vector<std::string>{"step", "loss", "eval_loss", "lr", "grad_norm", "tokens_per_s", "elapsed_s"}));
  const double lr = 0.05, b1 = 0.8, b2 = 0.95, eps = 1e-6, wd = 0.1, clip = 0.5, warm = 2, decay = 5, minRatio = 0.2;
  for (int t = 1; t <= steps; ++t) {
    Params g;
    double norm2 = 0;
    for (auto &[n, p] : w) {
      g[n].resize(p.size());
      for (size_t i = 0; i < p.size(); ++i) {
        double keep = p[i], h = 1e-6;
        p[i] = keep + h;
        double up = refLoss(w, tok, tgt);
        p[i] = keep - h;
        double down = refLoss(w, tok, tgt);
        p[i] = keep;
        g[n][i] = (up - down) / (2 * h);
        norm2 += g[n][i] * g[n][i];
      }
    }
    double loss = refLoss(w, tok, tgt);
    double rate = t <= warm ? lr * t / warm
                            : lr * (minRatio + (1 - minRatio) * 0.5 * (1 + std::cos(M_PI * std::min(1.0, (t - warm) / (decay - warm)))));
    EXPECT_NEAR(std::stod(rows[t][1]), loss, 2e-5 * loss) << "loss at step " << t;
    EXPECT_NEAR(std::stod(rows[t][3]), rate, 1e-5 * rate) << "lr at step " << t;
    EXPECT_NEAR(std::stod(rows[t][4]), std::sqrt(norm2), 1e-4 * std::sqrt(norm2)) << "grad norm at step " << t;
    double c = std::min(1.0, clip / (std::sqrt(norm2) + 1e-6));
    for (auto &[n, p] : w) {
      double decayOf = n == "b" ? 0.0 : wd;  // rank-1 parameters are not decayed by default
      for (size_t i = 0; i < p.size(); ++i) {
        double gi = g[n][i] * c;
        m1[n][i] = b1 * m1[n][i] + (1 - b1) * gi;
        v1[n][i] = b2 * v1[n][i] + (1 - b2) * gi * gi;
        double denom = std::sqrt(v1[n][i]) / std::sqrt(1 - std::pow(b2, t)) + eps;
        p[i] = p[i] * (1 - rate * decayOf) - rate / (1 - std::pow(b1, t)) * m1[n][i] / denom;
      }
    }
  }
  auto got = kt::loadWeights(dir + "/ckpt.safetensors");
  for (auto &[n, p] : w) {
    ASSERT_TRUE(got.count(n)) << n;
    double maxRef = 0, maxDiff = 0;
    for (size_t i = 0; i < p.size(); ++i) {
      maxRef = std::max(maxRef, std::abs(p[i]));
      maxDiff = std::max(maxDiff, std::abs(p[i] - (double)got[n].v[i]));
    }
    EXPECT_LE(maxDiff, 1e-4 * maxRef) << n << " after " << steps << " steps: max |kiln - reference| " << maxDiff;
  }
  // The checkpoint carries the optimizer's state under optimizer.*, which inference ignores.
  EXPECT_TRUE(got.count("optimizer.m.emb") && got.count("optimizer.v.head") && got.count("optimizer.step"));
  EXPECT_EQ(got["optimizer.step"].v.at(0), (float)steps);
}

TEST(Optimizer, ResumingGivesTheSameRunAsNotStopping) {
  std::string dir = kt::workDir("train_resume");
  std::string exe = kt::compile(dir, "bigram", build);
  ASSERT_FALSE(exe.empty());
  kt::saveIds(dir + "/data.npy", kt::randomIds(500, (int)V, 9));
  std::string common = exe + " --train --quiet --data " + dir + "/data.npy --seq 11 --seed 5 ";
  auto r = kt::run(common + "--steps 8 --save " + dir + "/straight.safetensors --log " + dir + "/straight.csv");
  ASSERT_EQ(r.code, 0) << r.output;
  r = kt::run(common + "--steps 4 --save " + dir + "/half.safetensors --log " + dir + "/resumed.csv");
  ASSERT_EQ(r.code, 0) << r.output;
  r = kt::run(common + "--steps 8 --resume " + dir + "/half.safetensors --save " + dir + "/resumed.safetensors --log " +
              dir + "/resumed.csv");
  ASSERT_EQ(r.code, 0) << r.output;
  auto a = kt::readCsv(dir + "/straight.csv"), b = kt::readCsv(dir + "/resumed.csv");
  ASSERT_EQ(a.size(), 9u);
  ASSERT_EQ(b.size(), 9u);
  for (size_t i = 1; i < a.size(); ++i) {
    EXPECT_EQ(a[i][0], b[i][0]);
    EXPECT_EQ(a[i][1], b[i][1]) << "loss at step " << a[i][0];
    EXPECT_EQ(a[i][3], b[i][3]) << "lr at step " << a[i][0];
  }
  auto wa = kt::loadWeights(dir + "/straight.safetensors"), wb = kt::loadWeights(dir + "/resumed.safetensors");
  for (auto &[n, t] : wa) EXPECT_EQ(t.v, wb[n].v) << n;
  // Already there: a clear error, nothing overwritten.
  r = kt::run(common + "--steps 8 --resume " + dir + "/resumed.safetensors");
  EXPECT_EQ(r.code, 1);
  EXPECT_THAT(r.output, HasSubstr("the checkpoint is already at step 8"));
}

// --resume continues a run only from a file holding the whole optimizer state: the parameters
// alone (an inference export, a Hugging Face checkpoint) or a checkpoint missing its second
// moments would silently start over at step 1 with zero moments; each is refused by name, the
// log left as it was. --weights starts a fresh run from the same file.
TEST(Optimizer, ResumingFromAFileWithoutTheOptimizerStateIsRefused) {
  std::string dir = kt::workDir("train_resume_partial");
  std::string exe = kt::compile(dir, "bigram", build);
  ASSERT_FALSE(exe.empty());
  kt::saveIds(dir + "/data.npy", kt::randomIds(200, (int)V, 4));
  std::string common = exe + " --train --quiet --data " + dir + "/data.npy --seq 11 --seed 5 ";
  auto r = kt::run(common + "--steps 2 --save " + dir + "/ckpt.safetensors --log " + dir + "/log.csv");
  ASSERT_EQ(r.code, 0) << r.output;
  auto full = kt::loadWeights(dir + "/ckpt.safetensors");
  std::map<std::string, ref::T> params, noV;
  for (auto &[n, t] : full) {
    if (n.rfind("optimizer.", 0) != 0) params[n] = t;
    if (n.rfind("optimizer.v.", 0) != 0) noV[n] = t;
  }
  ASSERT_LT(noV.size(), full.size());
  kt::saveWeights(dir + "/params.safetensors", params);
  kt::saveWeights(dir + "/no_v.safetensors", noV);
  const std::string logBefore = kt::readFile(dir + "/log.csv");
  for (const char *f : {"params", "no_v"}) {
    SCOPED_TRACE(f);
    r = kt::run(common + "--steps 4 --resume " + dir + "/" + f + ".safetensors --log " + dir + "/log.csv");
    EXPECT_EQ(r.code, 1) << r.output;
    EXPECT_THAT(r.output, HasSubstr("the file lacks the optimizer state optimizer."));
    EXPECT_THAT(r.output, HasSubstr("give --weights " + dir + "/" + f + ".safetensors instead"));
    EXPECT_EQ(kt::readFile(dir + "/log.csv"), logBefore);
  }
  r = kt::run(common + "--steps 2 --weights " + dir + "/params.safetensors");
  EXPECT_EQ(r.code, 0) << r.output;
}

// A checkpoint records its run (seed, data, --seq, --batch: what each step's windows depend on),
// and --resume refuses another, naming each difference and both values, the log left as it
// was; the same run resumes. A checkpoint that records no run (written by another tool) is
// resumed with a note.
TEST(Optimizer, ResumingAnotherRunIsRefused) {
  std::string dir = kt::workDir("train_resume_run");
  std::string exe = kt::compile(dir, "bigram", buildBatched);
  ASSERT_FALSE(exe.empty());
  kt::saveIds(dir + "/data.npy", kt::randomIds(200, (int)V, 4));
  kt::saveIds(dir + "/other.npy", kt::randomIds(200, (int)V, 5));
  const std::string base = exe + " --train --quiet --log " + dir + "/log.csv --steps 4 --resume " + dir + "/ckpt.safetensors ";
  auto r = kt::run(exe + " --train --quiet --data " + dir + "/data.npy --seq 11 --seed 5 --batch 2 --steps 2 --save " + dir +
                   "/ckpt.safetensors --log " + dir + "/log.csv");
  ASSERT_EQ(r.code, 0) << r.output;
  const std::string logBefore = kt::readFile(dir + "/log.csv");
  struct Case {
    std::string flags, want;
  };
  const Case cases[] = {
      {"--data " + dir + "/data.npy --seq 11 --seed 6 --batch 2", "--seed 6 (the checkpoint's run: 5)"},
      {"--data " + dir + "/data.npy --seq 12 --seed 5 --batch 2", "--seq 12 (the checkpoint's run: 11)"},
      {"--data " + dir + "/data.npy --seq 11 --seed 5 --batch 3", "--batch 3 (the checkpoint's run: 2)"},
      {"--data " + dir + "/other.npy --seq 11 --seed 5 --batch 2", "--data '" + dir + "/other.npy' holds 200 tokens, hash "},
  };
  for (const Case &c : cases) {
    SCOPED_TRACE(c.flags);
    r = kt::run(base + c.flags);
    EXPECT_EQ(r.code, 1) << r.output;
    EXPECT_THAT(r.output, HasSubstr("not the run the checkpoint comes from: "));
    EXPECT_THAT(r.output, HasSubstr(c.want));
    EXPECT_THAT(r.output, HasSubstr("--weights " + dir + "/ckpt.safetensors"));
    EXPECT_EQ(kt::readFile(dir + "/log.csv"), logBefore);
  }
  r = kt::run(base + "--data " + dir + "/other.npy --seq 11 --seed 5 --batch 2");
  EXPECT_THAT(r.output, HasSubstr("(the checkpoint's run: 200 tokens, hash "));
  // Two differences, both named.
  r = kt::run(base + "--data " + dir + "/data.npy --seq 12 --seed 6 --batch 2");
  EXPECT_THAT(r.output, HasSubstr("--seed 6 (the checkpoint's run: 5); --seq 12 (the checkpoint's run: 11)"));
  // The same run goes on.
  r = kt::run(base + "--data " + dir + "/data.npy --seq 11 --seed 5 --batch 2");
  EXPECT_EQ(r.code, 0) << r.output;
  EXPECT_EQ(kt::readCsv(dir + "/log.csv").size(), 5u);
  // The same tensors without the run's record: resumed, with a note.
  kt::saveWeights(dir + "/bare.safetensors", kt::loadWeights(dir + "/ckpt.safetensors"));
  r = kt::run(exe + " --train --data " + dir + "/other.npy --seq 11 --steps 5 --resume " + dir + "/bare.safetensors");
  EXPECT_EQ(r.code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("the checkpoint does not record its run (--seed, --data, --seq, --batch): continuing"));
}

// --save is checked before the first step: a missing folder, a read-only one (unless root, who
// can write anywhere) and a folder given as the file are refused at once, no log written.
TEST(Optimizer, ASavePathThatCannotBeWrittenIsRefusedBeforeTheFirstStep) {
  std::string dir = kt::workDir("train_save_path");
  std::string exe = kt::compile(dir, "bigram", build);
  ASSERT_FALSE(exe.empty());
  kt::saveIds(dir + "/data.npy", kt::randomIds(200, (int)V, 4));
  std::filesystem::create_directories(dir + "/ro");
  std::filesystem::permissions(dir + "/ro", std::filesystem::perms::owner_read | std::filesystem::perms::owner_exec);
  const bool root = geteuid() == 0;
  struct Case {
    std::string save, want;
  };
  std::vector<Case> cases = {
      {dir + "/missing/ckpt.safetensors", "cannot write checkpoint (--save) '" + dir + "/missing/ckpt.safetensors': No such file or directory"},
      {dir, "--save '" + dir + "' is a folder: give the checkpoint's file name (for example " + dir + "/ckpt.safetensors)"}};
  if (!root) cases.push_back({dir + "/ro/ckpt.safetensors", "'" + dir + "/ro/ckpt.safetensors': Permission denied"});
  for (const Case &c : cases) {
    SCOPED_TRACE(c.save);
    std::filesystem::remove(dir + "/log.csv");
    auto r = kt::run(exe + " --train --data " + dir + "/data.npy --seq 11 --steps 50 --log " + dir + "/log.csv --save " + c.save);
    EXPECT_EQ(r.code, 1) << r.output;
    EXPECT_THAT(r.output, HasSubstr(c.want));
    EXPECT_THAT(r.output, Not(HasSubstr("step 1")));
    EXPECT_FALSE(std::filesystem::exists(dir + "/log.csv"));
  }
  EXPECT_TRUE(std::filesystem::is_empty(dir + "/ro"));
  std::filesystem::permissions(dir + "/ro", std::filesystem::perms::owner_all);
}

// A loss that turns non-finite stops the run at that step, naming the last checkpoint (here the
// one --save-every 1 wrote after step 1), which holds that step.
TEST(Optimizer, ANonFiniteLossStopsTheRunNamingTheLastCheckpoint) {
  std::string dir = kt::workDir("train_nonfinite");
  std::string exe = kt::compile(dir, "bigram", build);
  ASSERT_FALSE(exe.empty());
  kt::saveIds(dir + "/data.npy", kt::randomIds(200, (int)V, 4));
  // A rate of 1e20 moves every weight by ~1e20: the next step's logits overflow.
  auto r = kt::run(exe + " --train --data " + dir + "/data.npy --seq 11 --steps 50 --lr 1e20 --save-every 1 --save " + dir +
                   "/ckpt.safetensors --log " + dir + "/log.csv");
  EXPECT_EQ(r.code, 1) << r.output;
  EXPECT_THAT(r.output, HasSubstr("step 2: the loss is not finite ("));
  EXPECT_THAT(r.output, HasSubstr("); stopped, the last checkpoint (step 1) is " + dir + "/ckpt.safetensors"));
  auto w = kt::loadWeights(dir + "/ckpt.safetensors");
  ASSERT_TRUE(w.count("optimizer.step"));
  EXPECT_EQ(w["optimizer.step"].v[0], 1.0f);
  EXPECT_EQ(kt::readCsv(dir + "/log.csv").size(), 2u);  // the header and step 1
  // Without --save: said so.
  r = kt::run(exe + " --train --data " + dir + "/data.npy --seq 11 --steps 50 --lr 1e20");
  EXPECT_EQ(r.code, 1);
  EXPECT_THAT(r.output, HasSubstr("); stopped, no checkpoint written by this run"));
}

// A checkpoint that cannot be written during --train (a file-size limit, SIGXFSZ ignored) stops
// the run with the reason, the previous checkpoint left as it was and no temporary file.
TEST(Optimizer, AFailedCheckpointWriteStopsTheRunAndKeepsThePreviousOne) {
  namespace fs = std::filesystem;
  std::string dir = kt::workDir("train_save_fails");
  std::string exe = kt::compile(dir, "bigram", build);
  ASSERT_FALSE(exe.empty());
  kt::saveIds(dir + "/data.npy", kt::randomIds(200, (int)V, 4));
  const std::string common = exe + " --train --quiet --data " + dir + "/data.npy --seq 11 --save " + dir + "/ckpt.safetensors ";
  auto r = kt::run(common + "--steps 2");
  ASSERT_EQ(r.code, 0) << r.output;
  const std::string before = kt::readFile(dir + "/ckpt.safetensors");
  ASSERT_GT(before.size(), 2048u);  // beyond the limit below: 1 block of 512 bytes (dash) or 1 KiB (bash)
  r = kt::run("sh -c \"trap '' XFSZ; ulimit -f 1; exec " + common + "--steps 6 --seed 9 --save-every 2\"");
  EXPECT_EQ(r.code, 1) << r.output;
  EXPECT_THAT(r.output, HasSubstr("error writing weights file '" + dir + "/ckpt.safetensors': File too large (the file was left as it was)"));
  EXPECT_EQ(kt::readFile(dir + "/ckpt.safetensors"), before);
  for (auto &e : fs::directory_iterator(dir)) EXPECT_EQ(e.path().filename().string().find(".kiln-tmp-"), std::string::npos) << e.path();
}

// --lr replaces the peak and keeps the schedule's shape (warmup 2, cosine to step 5, floor 0.2);
// the checkpoint keeps it, so a resumed run goes on at the same rate without the flag.
TEST(Optimizer, LrOverridesThePeakAndTheCheckpointKeepsIt) {
  std::string dir = kt::workDir("train_lr");
  std::string exe = kt::compile(dir, "bigram", build);
  ASSERT_FALSE(exe.empty());
  kt::saveIds(dir + "/data.npy", kt::randomIds(100, (int)V, 3));
  std::string common = exe + " --train --quiet --data " + dir + "/data.npy --seq 11 --log " + dir + "/log.csv ";
  auto r = kt::run(common + "--steps 3 --lr 0.02 --save " + dir + "/ckpt.safetensors");
  ASSERT_EQ(r.code, 0) << r.output;
  r = kt::run(common + "--steps 4 --resume " + dir + "/ckpt.safetensors");
  ASSERT_EQ(r.code, 0) << r.output;
  auto rows = kt::readCsv(dir + "/log.csv");
  ASSERT_EQ(rows.size(), 5u);
  const double want[] = {0.01, 0.02, 0.02 * (0.2 + 0.4 * (1 + std::cos(M_PI / 3))), 0.02 * (0.2 + 0.4 * (1 + std::cos(2 * M_PI / 3)))};
  for (int t = 1; t <= 4; ++t) EXPECT_NEAR(std::stod(rows[t][3]), want[t - 1], 1e-6) << "lr at step " << t;
  for (const char *bad : {"-1", "0"}) {
    r = kt::run(common + "--steps 3 --lr " + bad);
    EXPECT_EQ(r.code, 1) << bad;
    EXPECT_THAT(r.output, HasSubstr("expected a positive finite rate")) << bad;
  }
}

TEST(Optimizer, BadTrainingInputIsAClearError) {
  std::string dir = kt::workDir("train_bad");
  std::string exe = kt::compile(dir, "bigram", build);
  ASSERT_FALSE(exe.empty());
  kt::saveIds(dir + "/short.npy", kt::randomIds(5, (int)V, 1));
  auto r = kt::run(exe + " --train --data " + dir + "/short.npy --seq 8 --steps 2");
  EXPECT_EQ(r.code, 1);
  EXPECT_THAT(r.output, HasSubstr("holds 5 tokens, fewer than one window of --seq + 1 = 9"));
  std::vector<int32_t> bad = kt::randomIds(50, (int)V, 2);
  bad[20] = (int)V;
  kt::saveIds(dir + "/bad.npy", bad);
  r = kt::run(exe + " --train --data " + dir + "/bad.npy --seq 8 --steps 2");
  EXPECT_EQ(r.code, 1);
  EXPECT_THAT(r.output, HasSubstr("token id 19 at position 20 is outside the vocabulary [0, 19)"));
  r = kt::run(exe + " --train --data " + dir + "/short.npy --seq 17 --steps 2");
  EXPECT_EQ(r.code, 1);
  EXPECT_THAT(r.output, HasSubstr("--seq 17 exceeds the compiled bound 16"));
  r = kt::run(exe + " --train --data " + dir + "/bad.npy --seq 8 --steps 2 --batch 4");
  EXPECT_EQ(r.code, 1);
  EXPECT_THAT(r.output, HasSubstr("--batch 4: input 'tokens' of entry 'forward' takes one sequence"));
  r = kt::run(exe + " --data " + dir + "/bad.npy");
  EXPECT_EQ(r.code, 1);
  EXPECT_THAT(r.output, HasSubstr("--data applies to --train"));
}

}  // namespace
