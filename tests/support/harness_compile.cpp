// harness_compile.cpp - the test harness's one function that needs the kiln compiler.
#include <filesystem>

#include "harness.h"
#include "kiln/Pipelines/Driver.h"

namespace kt {

std::string compile(const std::string &dir, const std::string &name, const std::function<void(kiln::Model &)> &build,
                    std::vector<std::string> flags) {
  std::string out = dir + "/" + name;
  std::vector<std::string> args{name + "-compile", "-o", out, "--quiet", "--cache-dir", KILN_TEST_CACHE};
  for (auto &f : flags) args.push_back(f);
  std::vector<char *> argv;
  for (auto &a : args) argv.push_back(a.data());
  kiln::Driver driver(name, "test model");
  int rc = driver.run((int)argv.size(), argv.data(), build);
  if (rc != 0) {
    ADD_FAILURE() << "compiling " << name << " failed with exit code " << rc;
    return "";
  }
  // ctest gpu/ptxas-e2e: the same model for --target=cuda, every kernel's PTX through ptxas.
  const char *ptxas = getenv("KILN_TEST_PTXAS");
  bool ownTarget = false;
  for (auto &f : flags) ownTarget |= f.rfind("--target", 0) == 0 || f.rfind("--emit", 0) == 0;
  if (ptxas && *ptxas && !ownTarget) {
    std::string ptxDir = dir + "/" + name + ".ptx";
    std::filesystem::remove_all(ptxDir);
    std::vector<std::string> cargs{name + "-compile", "--target=cuda", "--emit=ptx", "-o", ptxDir, "--quiet", "--cache-dir",
                                   KILN_TEST_CACHE};
    for (auto &f : flags) cargs.push_back(f);
    std::vector<char *> cargv;
    for (auto &a : cargs) cargv.push_back(a.data());
    kiln::Driver cuda(name, "test model, CUDA");
    if (int crc = cuda.run((int)cargv.size(), cargv.data(), build); crc != 0) {
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
