// harness_compile.cpp - the test harness's one function that needs the kiln compiler.
#include <cstdio>
#include <cstdlib>
#include <filesystem>

#include "harness.h"
#include "kiln/Driver/Driver.h"
#include "kilnrt/api.h"

namespace kt {

namespace {
// KILN_TEST_GPU=opencl...: without an OpenCL device every test would fail the same way; the
// whole run is reported as a visible skip instead (ctest SKIP_RETURN_CODE 77).
struct GpuEnvironment : ::testing::Environment {
  void SetUp() override {
    const char *gpu = getenv("KILN_TEST_GPU");
    if (!gpu || std::string(gpu).rfind("opencl", 0) != 0) return;
    if (kilnrt_opencl_check() != KILNRT_OK) {
      printf("SKIP: %s: the end-to-end models are not run on OpenCL\n", kilnrt_last_error());
      fflush(stdout);
      std::_Exit(77);
    }
  }
};
[[maybe_unused]] auto *const gpuEnvironment = ::testing::AddGlobalTestEnvironment(new GpuEnvironment);

// Runs the kiln driver on `args` (argv[0] first) with `build` as the model; its exit code.
int drive(const std::string &name, const char *what, std::vector<std::string> args,
          const std::function<void(kiln::Model &)> &build) {
  std::vector<char *> argv;
  for (auto &a : args) argv.push_back(a.data());
  kiln::Driver driver(name, what);
  return driver.run((int)argv.size(), argv.data(), build);
}
}  // namespace

std::string compile(const std::string &dir, const std::string &name, const std::function<void(kiln::Model &)> &build,
                    std::vector<std::string> flags) {
  std::string out = dir + "/" + name;
  std::vector<std::string> args{name + "-compile", "-o", out, "--quiet", "--cache-dir", KILN_TEST_CACHE};
  bool ownTarget = false;
  for (auto &f : flags) ownTarget |= f.rfind("--target", 0) == 0 || f.rfind("--emit", 0) == 0;
  // ctest gpu/opencl-e2e-*: every test model compiled for --target=opencl (the GPU schedules,
  // run on PoCL's CPU device) and checked by the same tests: KILN_TEST_GPU=opencl[,device].
  if (const char *gpu = getenv("KILN_TEST_GPU"); gpu && *gpu && !ownTarget) {
    std::string g = gpu;
    args.push_back("--target=" + g.substr(0, g.find(',')));
    if (g.find(",device") != std::string::npos) args.push_back("--gpu-buffers=device");
  }
  for (auto &f : flags) args.push_back(f);
  if (int rc = drive(name, "test model", args, build); rc != 0) {
    ADD_FAILURE() << "compiling " << name << " failed with exit code " << rc;
    return "";
  }
  // tests/gpu/run.sh prepare: the same model for the GPU, into the bundle (see harness.h).
  if (const char *bundle = gpuBundle(); bundle && !ownTarget && !getenv("KILN_TEST_GPU")) {
    static int models = 0;
    const char *api = getenv("KILN_TEST_GPU_BUNDLE_API");
    std::string gpuOut = std::string(bundle) + "/models/" + std::to_string(models++) + "-" + name;
    std::filesystem::create_directories(std::string(bundle) + "/models");
    std::vector<std::string> gargs{name + "-compile", "--target=" + std::string(api && *api ? api : "cuda"),
                                   "--gpu-buffers=device", "-o", gpuOut, "--quiet", "--cache-dir", KILN_TEST_CACHE};
    for (auto &f : flags) gargs.push_back(f);
    if (int grc = drive(name, "test model, GPU", gargs, build); grc != 0)
      ADD_FAILURE() << "compiling " << name << " for the GPU bundle failed with exit code " << grc;
    else
      registerGpuVariant(out, gpuOut);
  }
  // ctest gpu/ptxas-e2e: the same model for --target=cuda, every kernel's PTX through ptxas.
  const char *ptxas = getenv("KILN_TEST_PTXAS");
  if (ptxas && *ptxas && !ownTarget) {
    std::string ptxDir = dir + "/" + name + ".ptx";
    std::filesystem::remove_all(ptxDir);
    std::vector<std::string> cargs{name + "-compile", "--target=cuda", "--emit=ptx", "-o", ptxDir, "--quiet", "--cache-dir",
                                   KILN_TEST_CACHE};
    for (auto &f : flags) cargs.push_back(f);
    if (int crc = drive(name, "test model, CUDA", cargs, build); crc != 0) {
      ADD_FAILURE() << "compiling " << name << " for --target=cuda failed with exit code " << crc;
      return out;
    }
    int n = 0;
    for (auto &e : std::filesystem::directory_iterator(ptxDir)) {
      auto r = run(std::string(ptxas) + " -arch=sm_90 '" + e.path().string() + "' -o /dev/null");
      EXPECT_EQ(r.code, 0) << "ptxas -arch=sm_90 rejected " << e.path() << ":\n" << r.output;
      ++n;
    }
    EXPECT_GT(n, 0) << "no kernel of " << name << " has PTX";
  }
  return out;
}

}  // namespace kt
