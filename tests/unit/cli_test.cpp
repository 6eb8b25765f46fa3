// Tests of a compiled executable's command line (build/bin/gpt2, made by kiln_add_model):
// flags, exit codes (0 ok, 1 user error, 2 internal error) and messages for bad input.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>
#include <limits>

#include "harness.h"

using ::testing::HasSubstr;

namespace {
// KILN_CLI_EXE: the same tests against another build of the model (the ASan+UBSan one).
const std::string kExe = getenv("KILN_CLI_EXE") ? getenv("KILN_CLI_EXE") : std::string(KILN_BIN) + "/gpt2";
std::string dir() { return kt::workDir("cli"); }
kt::RunResult gpt2(const std::string &args) { return kt::run(kExe + " " + args); }
std::string file(const std::string &p) {
  std::ifstream f(p, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(f)), {});
}
}  // namespace

TEST(Cli, VersionAndHelp) {
  auto r = gpt2("--version");
  EXPECT_EQ(r.code, 0);
  EXPECT_THAT(r.output, HasSubstr("kiln 0.1.0"));
  EXPECT_THAT(r.output, HasSubstr("hash"));
  EXPECT_THAT(r.output, HasSubstr("target x86-64"));
  r = gpt2("--help");
  EXPECT_EQ(r.code, 0);
  EXPECT_THAT(r.output, HasSubstr("tokens [L<=128] i32 (token ids < 256)"));
  EXPECT_THAT(r.output, HasSubstr("logits [L<=128, 256] f32"));
  EXPECT_THAT(r.output, HasSubstr("transformer.h.1.mlp.c_proj.weight [512, 128] f32"));
}

TEST(Cli, RunsAndWritesOutputs) {
  auto r = gpt2("--random-weights --seed 1 --tokens 1,2,3 --output-dir " + dir() + "/o1 --repeat 3");
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("logits: shape [3, 256]"));
  EXPECT_THAT(r.output, HasSubstr("median time over 3 runs"));
  ref::T a = kt::loadNpy(dir() + "/o1/logits.npy");
  EXPECT_EQ(a.shape, (std::vector<int64_t>{3, 256}));
  // One thread gives the same numbers: every output element is computed the same way.
  r = gpt2("--random-weights --seed 1 --tokens 1,2,3 --threads 1 --output-dir " + dir() + "/o2");
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_EQ(file(dir() + "/o1/logits.npy"), file(dir() + "/o2/logits.npy"));
  // Saved weights reproduce the run; int64 ids in a .npy are accepted.
  r = gpt2("--random-weights --seed 1 --save-weights " + dir() + "/w.safetensors --tokens 1,2,3");
  ASSERT_EQ(r.code, 0) << r.output;
  kt::saveIds(dir() + "/ids.npy", {1, 2, 3}, true);
  r = gpt2("--weights " + dir() + "/w.safetensors --input tokens=" + dir() + "/ids.npy --output-dir " + dir() + "/o3");
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_EQ(file(dir() + "/o1/logits.npy"), file(dir() + "/o3/logits.npy"));
}

TEST(Cli, BadTokensAreRejectedBeforeAnyWork) {
  auto r = gpt2("--random-weights --tokens 1,256");
  EXPECT_EQ(r.code, 1);
  EXPECT_THAT(r.output, HasSubstr("token id 256 at position 1 is outside the vocabulary [0, 256)"));
  r = gpt2("--random-weights --tokens 1,-3");
  EXPECT_EQ(r.code, 1);
  EXPECT_THAT(r.output, HasSubstr("token id -3"));
  r = gpt2("--random-weights --tokens 1,x2");
  EXPECT_EQ(r.code, 1);
  EXPECT_THAT(r.output, HasSubstr("'x2' is not an integer token id"));
  std::string many;
  for (int i = 0; i < 129; ++i) many += (i ? "," : "") + std::to_string(i % 7);
  r = gpt2("--random-weights --tokens " + many);
  EXPECT_EQ(r.code, 1);
  EXPECT_THAT(r.output, HasSubstr("sequence length L = 129 exceeds the compiled bound 128"));
  r = gpt2("--random-weights --tokens other=1,2");
  EXPECT_EQ(r.code, 1);
  EXPECT_THAT(r.output, HasSubstr("no input 'other'"));
}

TEST(Cli, FlagErrors) {
  auto r = gpt2("--tokens 1,2");
  EXPECT_EQ(r.code, 1);
  EXPECT_THAT(r.output, HasSubstr("no weights"));
  r = gpt2("--random-weights --bogus");
  EXPECT_EQ(r.code, 1);
  r = gpt2("--random-weights --threads 0 --tokens 1");
  EXPECT_EQ(r.code, 1);
  r = gpt2("--random-weights");
  EXPECT_EQ(r.code, 1);
  EXPECT_THAT(r.output, HasSubstr("input 'tokens' was not given"));
  r = gpt2("--random-weights --input tokens");
  EXPECT_EQ(r.code, 1);
  EXPECT_THAT(r.output, HasSubstr("--input expects NAME=FILE.npy"));
  r = gpt2("--random-weights --input tokens=" + dir() + "/nope.npy");
  EXPECT_EQ(r.code, 1);
  EXPECT_THAT(r.output, HasSubstr("cannot open"));
  kt::saveNpy(dir() + "/f.npy", kt::randomT({3}, 1));
  r = gpt2("--random-weights --input tokens=" + dir() + "/f.npy");
  EXPECT_EQ(r.code, 1);
  EXPECT_THAT(r.output, HasSubstr("input 'tokens' must be i32, got f32"));
}

TEST(Cli, BadWeightsFilesNameTheProblem) {
  ASSERT_EQ(gpt2("--random-weights --save-weights " + dir() + "/good.safetensors --tokens 1").code, 0);
  std::string good = file(dir() + "/good.safetensors");
  auto write = [&](const std::string &name, const std::string &bytes) {
    std::ofstream(dir() + "/" + name, std::ios::binary) << bytes;
    return dir() + "/" + name;
  };
  auto r = gpt2("--weights " + write("trunc.safetensors", good.substr(0, good.size() / 2)) + " --tokens 1");
  EXPECT_EQ(r.code, 1);
  EXPECT_THAT(r.output, HasSubstr("lie outside"));
  r = gpt2("--weights " + write("hdr.safetensors", good.substr(0, 20)) + " --tokens 1");
  EXPECT_EQ(r.code, 1);
  EXPECT_THAT(r.output, HasSubstr("header claims"));
  // a renamed tensor: missing under its name and extra under the other
  std::string renamed = good;
  auto p = renamed.find("\"transformer.wpe.weight\"");
  ASSERT_NE(p, std::string::npos);
  renamed.replace(p, 24, "\"transformer.wpX.weight\"");
  r = gpt2("--weights " + write("renamed.safetensors", renamed) + " --tokens 1");
  EXPECT_EQ(r.code, 1);
  EXPECT_THAT(r.output, HasSubstr("missing (1): transformer.wpe.weight"));
  EXPECT_THAT(r.output, HasSubstr("unexpected (1): transformer.wpX.weight"));
  r = gpt2("--weights " + dir() + "/absent.safetensors --tokens 1");
  EXPECT_EQ(r.code, 1);
  r = gpt2("--weights " + dir() + "/good.safetensors --random-weights --tokens 1");
  EXPECT_EQ(r.code, 1);
  EXPECT_THAT(r.output, HasSubstr("not both"));
}

// kiln-npy-compare, the comparison tests/gpu/run.sh uses where the test suite is absent.
TEST(NpyCompare, ToleranceInfinitiesAndNans) {
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  auto cmp = [](std::vector<float> want, std::vector<float> got) {
    ref::T w({(int64_t)want.size()}), g({(int64_t)got.size()});
    w.v = want, g.v = got;
    kt::saveNpy(dir() + "/want.npy", w);
    kt::saveNpy(dir() + "/got.npy", g);
    return kt::run(std::string(KILN_BIN) + "/kiln-npy-compare " + dir() + "/want.npy " + dir() + "/got.npy 1e-4").code;
  };
  EXPECT_EQ(cmp({1, 2, 3}, {1, 2, 3.0001f}), 0);  // within 1e-4 |want| + 1e-4 max|want|
  EXPECT_EQ(cmp({1, 2, 3}, {1, 2, 3.01f}), 1);
  EXPECT_EQ(cmp({-inf, 1, 2}, {-inf, 1, 2}), 0);  // a fully masked row's log-sum-exp on both sides
  EXPECT_EQ(cmp({-inf, 1, 2}, {-inf, 1, 2.5f}), 1);  // an infinity does not widen the tolerance
  EXPECT_EQ(cmp({-inf, 1}, {0, 1}), 1);
  EXPECT_EQ(cmp({nan, 1}, {nan, 1}), 0);
  EXPECT_EQ(cmp({nan, 1}, {0, 1}), 1);
  EXPECT_EQ(cmp({1, 2}, {1, 2, 3}), 1);  // shapes differ
}
