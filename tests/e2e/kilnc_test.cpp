// kilnc_test.cpp - kilnc: a kiln-dialect file compiled end to end, input it rejects, and the
// DSL's output round-tripping through it.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <set>
#include <sstream>

#include "harness.h"
#include "kiln/dsl/Blocks.h"
#include "kilnrt/api.h"
#include "models.h"

using namespace kiln;
using W = std::map<std::string, ref::T>;

namespace {
// ---------------------------------------------------------------- kilnc
const std::string kSrc = KILN_SOURCE_DIR;

TEST(Kilnc, CompilesAKilnDialectFileEndToEnd) {
  std::string dir = kt::workDir("kilnc");
  auto r = kt::run(std::string(KILN_BIN) + "/kilnc " + kSrc + "/tests/e2e/mlir/mlp.mlir --quiet --cache-dir " +
                   KILN_TEST_CACHE + " -o " + dir + "/mlp");
  ASSERT_EQ(r.code, 0) << r.output;
  ref::T x = kt::randomT({9, 16}, 4);
  kt::saveNpy(dir + "/x.npy", x);
  W w;
  ref::T got = kt::runModel(dir, dir + "/mlp", "--input x=" + dir + "/x.npy", "y", w);
  ref::T h = ref::relu(ref::linear(x, w["fc1.w"], w["fc1.b"], true));
  EXPECT_TRUE(kt::allClose(ref::linear(h, w["fc2.w"], {}, false), got));
}

// Under KILN_TEST_GPU (ctest gpu/opencl-e2e, gpu/opencl-device-e2e) the models the tests compile
// through the command line and the examples they run are built for that GPU target, so those
// runs check the GPU schedules against the same references; on the CPU they are the CPU builds.
TEST(GpuTarget, CommandLineCompilesAndExamplesUseTheTestTarget) {
  std::string dir = kt::workDir("gpu_target");
  const char *gpu = getenv("KILN_TEST_GPU");
  std::string want = gpu && *gpu ? std::string(gpu).find(",device") != std::string::npos ? "(buffers on the device)"
                                                                                         : "(buffers on the host)"
                                 : "";
  auto r = kt::run(std::string(KILN_BIN) + "/kilnc " + kSrc + "/tests/e2e/mlir/mlp.mlir --quiet --cache-dir " +
                   KILN_TEST_CACHE + " -o " + dir + "/mlp");
  ASSERT_EQ(r.code, 0) << r.output;
  for (std::string exe : {dir + "/mlp", kt::example("gpt2")}) {
    SCOPED_TRACE(exe);
    r = kt::run(exe + " --version");
    ASSERT_EQ(r.code, 0) << r.output;
    if (want.empty()) {
      EXPECT_EQ(r.output.find("(buffers on the"), std::string::npos) << r.output;
    } else {
      EXPECT_NE(r.output.find("-opencl ("), std::string::npos) << r.output;
      EXPECT_NE(r.output.find(want), std::string::npos) << r.output;
    }
  }
}

TEST(Kilnc, RejectsInputWithoutSequenceBounds) {
  auto r = kt::run(std::string(KILN_BIN) + "/kilnc " + kSrc + "/tests/e2e/mlir/no_bounds.mlir --quiet -o /dev/null");
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.output.find("expected module attributes kiln.seq_names"), std::string::npos) << r.output;
  r = kt::run(std::string(KILN_BIN) + "/kilnc " + kSrc + "/tests/e2e/mlir/absent.mlir --quiet -o /dev/null");
  EXPECT_EQ(r.code, 1);
}

TEST(Kilnc, DslOutputRoundTripsThroughKilnc) {
  // gpt2-compile --emit=mlir, then kilnc on that file: same executable behaviour.
  std::string dir = kt::workDir("roundtrip");
  std::string cfg = " --layers 1 --d-model 64 --heads 4 --vocab 64 --ctx 32 --quiet --cache-dir " + std::string(KILN_TEST_CACHE);
  auto r = kt::run(std::string(KILN_BIN) + "/gpt2-compile" + cfg + " --compile-to=input -o " + dir + "/g.mlir");
  ASSERT_EQ(r.code, 0) << r.output;
  r = kt::run(std::string(KILN_BIN) + "/kilnc " + dir + "/g.mlir --quiet --cache-dir " + KILN_TEST_CACHE + " -o " + dir + "/a");
  ASSERT_EQ(r.code, 0) << r.output;
  r = kt::run(std::string(KILN_BIN) + "/gpt2-compile" + cfg + " -o " + dir + "/b");
  ASSERT_EQ(r.code, 0) << r.output;
  auto a = kt::run(dir + "/a --random-weights --tokens 5,6,7 --output-dir " + dir + "/oa");
  auto b = kt::run(dir + "/b --random-weights --tokens 5,6,7 --output-dir " + dir + "/ob");
  ASSERT_EQ(a.code, 0) << a.output;
  ASSERT_EQ(b.code, 0) << b.output;
  EXPECT_TRUE(kt::allClose(kt::loadNpy(dir + "/ob/logits.npy"), kt::loadNpy(dir + "/oa/logits.npy")));
}
}  // namespace
