// Tests of a compiled executable's command line (build/bin/gpt2, made by kiln_add_model):
// flags, exit codes (0 ok, 1 user error, 2 internal error) and messages for bad input.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <csignal>
#include <filesystem>
#include <fstream>
#include <limits>

#include "harness.h"

using ::testing::HasSubstr;

namespace {
// KILN_CLI_EXE: the same tests against another build of the model (the ASan+UBSan one).
const std::string kExe = getenv("KILN_CLI_EXE") ? getenv("KILN_CLI_EXE") : std::string(KILN_BIN) + "/gpt2";
std::string dir() { return kt::workDir("cli"); }
kt::RunResult gpt2(const std::string &args) { return kt::run(kExe + " " + args); }
std::string file(const std::string &p) { return kt::readFile(p); }
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

// A NaN in a weight (review finding: the first element of h.0.ln_1.weight gave finite logits
// where PyTorch gives NaN) is refused with the tensor's name and index, unless allowed.
TEST(Cli, NonFiniteWeightsAreRefusedUnlessAllowed) {
  ASSERT_EQ(gpt2("--random-weights --save-weights " + dir() + "/finite.safetensors --tokens 1").code, 0);
  auto w = kt::loadWeights(dir() + "/finite.safetensors");
  ASSERT_TRUE(w.count("transformer.h.0.ln_1.weight"));
  w["transformer.h.0.ln_1.weight"].v[0] = std::numeric_limits<float>::quiet_NaN();
  kt::saveWeights(dir() + "/nan.safetensors", w);
  auto r = gpt2("--weights " + dir() + "/nan.safetensors --tokens 1,2,3");
  EXPECT_EQ(r.code, 1);
  EXPECT_THAT(r.output, HasSubstr("tensor 'transformer.h.0.ln_1.weight' holds a non-finite value (nan) at flat index 0"));
  EXPECT_THAT(r.output, HasSubstr("--allow-non-finite-weights"));
  r = gpt2("--weights " + dir() + "/nan.safetensors --allow-non-finite-weights --tokens 1,2,3");
  EXPECT_EQ(r.code, 0) << r.output;
}

// Outputs are written to a temporary name and renamed when complete. Under a file-size limit a
// process killed by SIGXFSZ leaves the previous file intact; with SIGXFSZ ignored the write
// fails with a clear error and exit code 1, the previous file intact, no temporary file left.
TEST(Cli, WritesNeverLeaveATruncatedFile) {
  namespace fs = std::filesystem;
  std::string d = dir() + "/atomic";
  fs::remove_all(d);
  fs::create_directories(d + "/out");
  std::string tokens;
  for (int i = 0; i < 128; ++i) tokens += (i ? "," : "") + std::to_string(i % 200);
  std::string run = kExe + " --random-weights --tokens " + tokens;
  ASSERT_EQ(kt::run(run + " --seed 2 --save-weights " + d + "/w.safetensors --output-dir " + d + "/out").code, 0);
  const std::string weights = file(d + "/w.safetensors"), logits = file(d + "/out/logits.npy");
  ASSERT_GT(weights.size(), 100000u);
  ASSERT_GT(logits.size(), 100000u);
  auto temps = [&] {  // temporary files left in the output folders (removed as they are counted)
    int n = 0;
    for (const char *sub : {"", "/out"})
      for (auto &e : fs::directory_iterator(d + sub))
        if (e.path().filename().string().find(".kiln-tmp-") != std::string::npos) fs::remove(e.path()), ++n;
    return n;
  };
  // 64 blocks of 512 bytes (dash) or 1 KiB (bash): far less than either file.
  for (const std::string &what : {std::string(" --save-weights ") + d + "/w.safetensors",
                                  std::string(" --output-dir ") + d + "/out"}) {
    SCOPED_TRACE(what);
    auto killed = kt::run("sh -c 'ulimit -f 64; exec " + run + " --seed 5" + what + "'");
    EXPECT_EQ(killed.code, 128 + SIGXFSZ) << killed.output;
    EXPECT_EQ(file(d + "/w.safetensors"), weights);
    EXPECT_EQ(file(d + "/out/logits.npy"), logits);
    temps();  // a killed process cannot remove its temporary file
    auto failed = kt::run("sh -c \"trap '' XFSZ; ulimit -f 64; exec " + run + " --seed 5" + what + "\"");
    EXPECT_EQ(failed.code, 1) << failed.output;
    EXPECT_THAT(failed.output, HasSubstr("File too large (the file was left as it was)"));
    EXPECT_EQ(file(d + "/w.safetensors"), weights);
    EXPECT_EQ(file(d + "/out/logits.npy"), logits);
    EXPECT_EQ(temps(), 0);
  }
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
