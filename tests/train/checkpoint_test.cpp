// checkpoint_test.cpp - gradient checkpointing (Model::checkpoint, kiln-recompute-checkpoints):
// examples/gpt2 with 12 blocks compiled with and without --train-checkpoint. The same weights
// and tokens give the same loss and gradients; the checkpointed backward's buffer plan peaks at
// a quarter or less of the other's, and the cost report says what each keeps and recomputes.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>
#include <regex>
#include <sstream>

#include "grad_check.h"

namespace {
using ::testing::HasSubstr;

struct Compiled {
  std::string exe, cost;
};

// `flag`: "" (plain), "--train-checkpoint" or "--recompute-ffn X"; `stem` the executable's name.
Compiled compileGpt2(const std::string &dir, const std::string &flag, const std::string &stem) {
  std::string args = std::string(KILN_BIN) + "/gpt2-compile --train --layers 12 --d-model 32 --heads 2 --vocab 64 --ctx 256 --quiet "
                     "--cache-dir " KILN_TEST_CACHE " " + flag;
  std::string name = dir + "/" + stem;
  auto c = kt::run(args + " -o " + name);
  EXPECT_EQ(c.code, 0) << c.output;
  auto r = kt::run(args + " --emit cost -o " + name + ".cost.txt");
  EXPECT_EQ(r.code, 0) << r.output;
  std::ifstream f(name + ".cost.txt");
  std::stringstream ss;
  ss << f.rdbuf();
  return {c.code == 0 ? name : "", ss.str()};
}

// Writes a random window of L + 1 tokens as dir/tokens.npy and dir/targets.npy.
void writeWindow(const std::string &dir, int L) {
  std::vector<int32_t> ids = kt::randomIds(L + 1, 64, 7);
  kt::saveIds(dir + "/tokens.npy", std::vector<int32_t>(ids.begin(), ids.end() - 1));
  kt::saveIds(dir + "/targets.npy", std::vector<int32_t>(ids.begin() + 1, ids.end()));
}

// Every grad.*.npy in `want` (one per parameter of the 12-block model) matches `got`'s.
void expectSameGradients(const std::string &want, const std::string &got) {
  int grads = 0;
  for (auto &e : std::filesystem::directory_iterator(want)) {
    std::string n = e.path().filename().string();
    if (n.rfind("grad.", 0) != 0) continue;
    ++grads;
    EXPECT_TRUE(kt::allClose(kt::loadNpy(e.path().string()), kt::loadNpy(got + "/" + n))) << n;
  }
  EXPECT_EQ(grads, 2 + 2 + 12 * 12) << "every parameter's gradient";
}

// The "arena: X KiB" line a run prints: the peak of its buffer plan.
double arenaKiB(const std::string &output) {
  std::smatch m;
  if (!std::regex_search(output, m, std::regex("arena: ([0-9.]+) KiB"))) return -1;
  return std::stod(m[1]);
}

// The cost report's backward line of entry `entry` at the bound.
std::string backwardLine(const std::string &cost, const std::string &entry) {
  size_t at = cost.find("== entry " + entry + " at");
  if (at == std::string::npos) return "";
  size_t b = cost.find("backward:", at), next = cost.find("== entry", at + 1);
  if (b == std::string::npos || b > next) return "";
  return cost.substr(b, cost.find('\n', b) - b);
}

// Runs `exe`'s gradients entry on dir's window (writeWindow) with random weights of `seed`,
// its results into `out`; returns the peak of its buffer plan in KiB, or -1 if the run failed.
double runGradients(const std::string &exe, const std::string &dir, int seed, const std::string &out) {
  auto r = kt::run(exe + " --entry gradients --random-weights --seed " + std::to_string(seed) + " --input tokens=" + dir +
                   "/tokens.npy --input targets=" + dir + "/targets.npy --output-dir " + out);
  EXPECT_EQ(r.code, 0) << r.output;
  double kib = r.code == 0 ? arenaKiB(r.output) : -1;
  EXPECT_GT(kib, 0) << r.output;
  return kib;
}

TEST(Checkpointing, QuarterOfThePeakSameGradients) {
  std::string dir = kt::workDir("train_checkpoint");
  Compiled plain = compileGpt2(dir, "", "plain"), ckpt = compileGpt2(dir, "--train-checkpoint", "ckpt");
  ASSERT_FALSE(plain.exe.empty());
  ASSERT_FALSE(ckpt.exe.empty());
  const int L = 256;
  writeWindow(dir, L);
  double pa = runGradients(plain.exe, dir, 11, dir + "/plain_out"), pb = runGradients(ckpt.exe, dir, 11, dir + "/ckpt_out");
  ASSERT_GT(pa, 0);
  ASSERT_GT(pb, 0);

  // The same numbers: the recomputed blocks are the same kernels on the same inputs.
  EXPECT_EQ(kt::loadNpy(dir + "/plain_out/loss.npy").v, kt::loadNpy(dir + "/ckpt_out/loss.npy").v);
  expectSameGradients(dir + "/plain_out", dir + "/ckpt_out");

  // The peak of the buffer plan (the arena: activations, the backward's gradients).
  EXPECT_LE(pb, pa / 4) << "checkpointed peak " << pb << " KiB vs " << pa << " KiB";
  std::cout << "12 blocks at L = " << L << ": buffer plan peak " << pa << " KiB, checkpointed " << pb << " KiB\n";

  // The cost report: saved activations, recomputed FLOPs, the plan's peak.
  std::string lp = backwardLine(plain.cost, "gradients"), lc = backwardLine(ckpt.cost, "gradients");
  EXPECT_THAT(lp, HasSubstr("recomputed 0 FLOP in 0 ops")) << plain.cost;
  EXPECT_THAT(lc, HasSubstr("saved activations")) << ckpt.cost;
  EXPECT_THAT(lc, ::testing::Not(HasSubstr("in 0 ops"))) << lc;
  std::cout << "plain:        " << lp << "\ncheckpointed: " << lc << "\n";
}

// --recompute-ffn (kiln-checkpoint-ffn): `all` recomputes each FFN's two intermediates (the
// first linear's output and the activation's) in the backward instead of keeping them from the
// forward, whose FFN becomes one chunked kiln.ffn; `activation` recomputes the activation's
// output alone, from the kept first one. The gradients agree with the plain build's (`all`
// runs the forward's FFN as another kernel, so to rounding, not bit for bit); the backward
// keeps less: at the bound L = 256, 12 · 256 · 128 · 4 bytes less per recomputed intermediate.
TEST(Checkpointing, RecomputedFfnKeepsLessSameGradients) {
  std::string dir = kt::workDir("train_recompute_ffn");
  Compiled plain = compileGpt2(dir, "", "plain");
  ASSERT_FALSE(plain.exe.empty());
  const int L = 200;  // no multiple of the FFN's chunk
  writeWindow(dir, L);
  double pa = runGradients(plain.exe, dir, 5, dir + "/plain_out");
  ASSERT_GT(pa, 0);
  auto savedBytes = [](const std::string &line) -> double {
    std::smatch m;
    if (!std::regex_search(line, m, std::regex("saved activations ([0-9.]+) (B|KB|MB|GB)"))) return -1;
    double unit = m[2] == "GB" ? 1e9 : m[2] == "MB" ? 1e6 : m[2] == "KB" ? 1e3 : 1;
    return std::stod(m[1]) * unit;
  };
  std::string lp = backwardLine(plain.cost, "gradients");
  double sp = savedBytes(lp);
  ASSERT_GT(sp, 0) << lp;
  std::cout << "plain:      " << lp << "\n";

  for (auto [mode, intermediates] : {std::pair<std::string, int>{"all", 2}, {"activation", 1}}) {
    SCOPED_TRACE("--recompute-ffn " + mode);
    Compiled ffn = compileGpt2(dir, "--recompute-ffn " + mode, "ffn_" + mode);
    ASSERT_FALSE(ffn.exe.empty());
    std::string out = dir + "/" + mode + "_out";
    double pb = runGradients(ffn.exe, dir, 5, out);
    ASSERT_GT(pb, 0);
    EXPECT_TRUE(kt::allClose(kt::loadNpy(dir + "/plain_out/loss.npy"), kt::loadNpy(out + "/loss.npy")));
    expectSameGradients(dir + "/plain_out", out);

    EXPECT_LT(pb, pa) << "peak " << pb << " KiB vs " << pa << " KiB";
    std::cout << "12 blocks at L = " << L << ": buffer plan peak " << pa << " KiB, --recompute-ffn " << mode << " " << pb
              << " KiB\n";

    // One op recomputed per recomputed intermediate and FFN.
    std::string lf = backwardLine(ffn.cost, "gradients");
    EXPECT_THAT(lf, HasSubstr("in " + std::to_string(12 * intermediates) + " ops")) << ffn.cost;
    double sf = savedBytes(lf);
    ASSERT_GT(sf, 0) << lf;
    EXPECT_NEAR(sp - sf, 12.0 * intermediates * 256 * 128 * 4, 0.01 * sp) << lp << "\n" << lf;
    std::cout << mode << ": " << lf << "\n";
  }
}

}  // namespace

namespace {
// kiln-chunk-ffn-grad (--ffn-grad-chunk): with --recompute-ffn all, each FFN's backward runs
// over chunks of 48 of the 128 d_ff columns (48, 48, 32: a tail chunk), on slices of the weights
// (views, read before the optimizer updates them in place). The same gradients as one chunk of
// all of d_ff (to rounding: dx is a sum of the chunks' products), a lower buffer plan peak, and
// the same losses over training steps, where the optimizer writes the sliced weights.
TEST(Checkpointing, ChunkedFfnBackwardSameGradientsLowerPeak) {
  std::string dir = kt::workDir("train_ffn_grad_chunk");
  Compiled whole = compileGpt2(dir, "--recompute-ffn all --ffn-grad-chunk off", "whole");
  Compiled chunked = compileGpt2(dir, "--recompute-ffn all --ffn-grad-chunk 48", "chunked");
  ASSERT_FALSE(whole.exe.empty());
  ASSERT_FALSE(chunked.exe.empty());
  const int L = 200;
  writeWindow(dir, L);
  double pa = runGradients(whole.exe, dir, 5, dir + "/whole_out"), pb = runGradients(chunked.exe, dir, 5, dir + "/chunked_out");
  ASSERT_GT(pa, 0);
  ASSERT_GT(pb, 0);
  EXPECT_EQ(kt::loadNpy(dir + "/whole_out/loss.npy").v, kt::loadNpy(dir + "/chunked_out/loss.npy").v);
  expectSameGradients(dir + "/whole_out", dir + "/chunked_out");
  // The [rows, d_ff] intermediates of an FFN's backward become [rows, 48]: at the bound
  // L = 256, each 256 · (128 - 48) · 4 bytes = 80 KiB less. The plan's peak drops by more than
  // one of them: 3052 KiB against 2890 when this test was written.
  EXPECT_LT(pb, pa - 120) << "peak " << pb << " KiB vs " << pa << " KiB";
  std::cout << "12 blocks at L = " << L << ", --recompute-ffn all: buffer plan peak " << pa << " KiB, by chunks of 48 columns "
            << pb << " KiB\n";
  // Training: the optimizer updates the weights the chunks read as views.
  std::vector<int32_t> data = kt::randomIds(3000, 64, 9);
  kt::saveIds(dir + "/data.npy", data);
  for (const std::string &exe : {whole.exe, chunked.exe}) {
    auto t = kt::run(exe + " --train --data " + dir + "/data.npy --seq 100 --steps 6 --seed 2 --log " + exe + ".csv");
    ASSERT_EQ(t.code, 0) << t.output;
  }
  std::vector<double> lw = kt::trainLosses(whole.exe + ".csv"), lc = kt::trainLosses(chunked.exe + ".csv");
  ASSERT_EQ(lw.size(), 6u);
  ASSERT_EQ(lc.size(), 6u);
  for (size_t i = 0; i < lw.size(); ++i) EXPECT_NEAR(lc[i], lw[i], 1e-5 * std::abs(lw[i])) << "step " << i + 1;
  EXPECT_LT(lw.back(), lw.front());
}
}  // namespace
