// harness_compile.cpp - the test harness's one function that needs the kiln compiler.
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
  return out;
}

}  // namespace kt
