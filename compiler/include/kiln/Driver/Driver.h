// Driver.h - the kiln compiler driver shared by DSL programs and kilnc.
//
// A DSL program:
//
//   int main(int argc, char **argv) {
//     kiln::Driver driver("mlp", "a two-layer MLP");
//     int64_t width = 64;
//     driver.app().add_option("--width", width, "hidden width");
//     return driver.run(argc, argv, [&](kiln::Model &m) { build_mlp(m, width); });
//   }
//
// Common flags: -o, --emit=mlir|schedule|halide-stmt|ptx|llvm|obj|lib|exe|cost,
// --compile-to=input|fused|tiled|scheduled|kernels|llvm|exe, --dump-dir, --print-ir-after-all,
// --target, --gpu-buffers, --cache-dir, --ffn-chunk, --recompute-ffn, --lib-symbol, --max-memory, --quiet, and
// --config for programs that declare config_option()s.
// Exit codes: 0 success, 1 user error, 2 internal error.
#pragma once
#include <CLI/CLI.hpp>
#include <functional>
#include <memory>
#include <string>

// Where the runtime the compiled models link lives: a program built against an installed kiln
// (find_package(kiln) defines KILN_PREFIX) passes that prefix; otherwise kilnc next to an
// installed lib/, or the build tree kiln was built in.
#ifdef KILN_PREFIX
#define KILN_DRIVER_PREFIX KILN_PREFIX
#else
#define KILN_DRIVER_PREFIX ""
#endif

namespace kiln {
class Model;

class Driver {
 public:
  Driver(std::string name, std::string description, std::string prefix = KILN_DRIVER_PREFIX);
  ~Driver();
  CLI::App &app();
  // A size `flag` that --config config.json sets from `key` (alternatives "a|b"; the flag given
  // too with another value is an error); with --config, the model's checkpoint_config fields are then checked against
  // the file (a field that differs is an error naming it).
  void config_option(const std::string &key, const std::string &flag, int64_t &value);
  // The same for a real number (an epsilon, a rotary base) and a true/false field. A key may name
  // a field inside an object with dots ("rope_parameters.rope_theta").
  void config_option(const std::string &key, const std::string &flag, double &value);
  void config_option(const std::string &key, const std::string &flag, bool &value);
  // And a string field (a model_type).
  void config_option(const std::string &key, const std::string &flag, std::string &value);
  // Parses the flags, builds the model with `build`, compiles it; returns the exit code.
  int run(int argc, char **argv, const std::function<void(Model &)> &build);
  // kilnc: the same, for a kiln-dialect .mlir file given as the positional argument.
  int runFile(int argc, char **argv);

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace kiln
