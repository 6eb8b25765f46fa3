// harness.h - what the end-to-end and CLI tests share: compile a DSL model to an executable,
// run executables, read their .npy/.safetensors files, and the one shared comparison.
#pragma once
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "kiln/dsl/Model.h"
#include "reference.h"

// Runs `stmt`, which must throw kiln::Error at this very line of this file with `msg` in its
// text (and "<file>:<line>:" too, as the DSL reports it).
#define EXPECT_KILN_ERROR(stmt, msg)                                                                  \
  do {                                                                                                \
    int line_ = __LINE__;                                                                             \
    std::string file_ = std::filesystem::path(__FILE__).filename().string();                          \
    try {                                                                                             \
      stmt;                                                                                           \
      ADD_FAILURE() << "expected a kiln::Error from " #stmt;                                          \
    } catch (const kiln::Error &e) {                                                                  \
      EXPECT_EQ(e.line, (unsigned)line_) << e.what();                                                 \
      EXPECT_THAT(e.file, ::testing::EndsWith(file_));                                                \
      EXPECT_THAT(e.what(), ::testing::HasSubstr(msg));                                               \
      EXPECT_THAT(e.what(), ::testing::HasSubstr(file_ + ":" + std::to_string(line_) + ":"));         \
    }                                                                                                 \
  } while (0)

namespace kt {

// Folder for this test's files (under the build tree).
std::string workDir(const std::string &test);
// Compiles `build` with the kiln driver into `dir/name`; returns the path ("" and a gtest
// failure if the compile fails). `flags` are extra driver flags.
std::string compile(const std::string &dir, const std::string &name, const std::function<void(kiln::Model &)> &build,
                    std::vector<std::string> flags = {});
// KILN_TEST_GPU_BUNDLE=DIR (tests/gpu/run.sh prepare): every model kt::compile builds is also
// compiled for the GPU (KILN_TEST_GPU_BUNDLE_API, default cuda; device-resident buffers) into
// DIR/models, and every successful kt::run of such a model with --output-dir is recorded as a case
// DIR/cases/NNNN: its arguments, input files and the CPU's outputs, which the GPU machine reruns.
const char *gpuBundle();  // DIR, or null
void registerGpuVariant(const std::string &exe, const std::string &gpuExe);
// A reference a kiln output matched (allClose does this itself when it succeeds; tests that
// compare otherwise call it): a recorded case whose output equals `kilnOutput` carries
// `reference` too (DIR/cases/NNNN/ref/), and the GPU machine compares its output with both.
void noteReference(const ref::T &kilnOutput, const ref::T &reference);
// The example model `name` as the build compiled it (build/bin/<name>). Under KILN_TEST_GPU the
// same program with the build's arguments compiled for that GPU target instead (once per run).
std::string example(const std::string &name);
struct RunResult {
  int code;
  std::string output;  // stdout and stderr
};
// Runs a shell command. Under KILN_TEST_GPU (ctest gpu/opencl-e2e...) a plain compile of a model
// (<model>-compile or kilnc, -o PATH, no --target, --emit or --compile-to of its own) is made for
// that GPU target, as kt::compile's models are.
RunResult run(const std::string &cmd);
// Runs `exe` with random weights from `seed` (saved to dir/weights.safetensors) and `inputArgs`,
// its outputs into dir/out; returns output `name` and sets `weights` to the weights used.
ref::T runModel(const std::string &dir, const std::string &exe, const std::string &inputArgs, const std::string &name,
                std::map<std::string, ref::T> &weights, int seed = 3);
std::map<std::string, ref::T> loadWeights(const std::string &path);
// A file's bytes ("" when it cannot be read).
std::string readFile(const std::string &path);
// Writes f32 tensors as safetensors (a gtest failure if it cannot).
void saveWeights(const std::string &path, const std::map<std::string, ref::T> &weights);
ref::T loadNpy(const std::string &path, bool *is_int = nullptr);  // i32 as floats; *is_int says which
void saveNpy(const std::string &path, const ref::T &t);
void saveIds(const std::string &path, const std::vector<int32_t> &ids, bool as_int64 = false);
std::string idList(const std::vector<int32_t> &ids);
std::vector<int32_t> randomIds(int n, int vocab, unsigned seed);
ref::T randomT(std::vector<int64_t> shape, unsigned seed, float scale = 1.0f);
// x rounded to bfloat16 (to nearest, ties to even; a NaN stays one), as an f32: what kiln's
// mixed precision (--precision bf16) reads an operand as.
float roundBf16(float x);
ref::T roundedBf16(ref::T t);  // every element rounded

// The shared comparison: |got - ref| <= 1e-4 |ref| + 1e-4 max|ref| elementwise, same shape.
::testing::AssertionResult allClose(const ref::T &ref, const ref::T &got);

}  // namespace kt
