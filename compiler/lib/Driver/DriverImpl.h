// DriverImpl.h - the driver's state and its three parts: flags (Driver.cpp), the phases and
// kernels (Compile.cpp), and the orchestration, runtime table and link (Link.cpp). Built with
// exceptions: CLI11, Halide and the DSL report errors by throwing, and every throw is turned
// into a message and an exit code in Driver.cpp.
#pragma once
#include <chrono>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "kiln/Driver/Driver.h"
#include "kiln/Pipeline/Phases.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"

#ifndef KILN_VERSION
#define KILN_VERSION "0.1.0"
#endif

namespace kiln {

struct UserError {
  std::string msg;
};
struct InternalError {
  std::string msg;
};

// --emit: the artefact. Ordered as the phases produce them: mlir (up to --compile-to, at most
// kernels), the reports after kernels, then what needs the kernels or the object file.
enum class Emit { Mlir, Cost, Schedule, HalideStmt, Ptx, Llvm, Obj, Lib, Exe };
std::optional<Emit> parseEmit(const std::string &name);
const char *emitName(Emit e);

// An output written under a temporary name beside `path` and renamed when complete, so an
// interrupted or failed write never leaves a truncated file under the final name; the temporary
// file is removed if the output is never committed.
struct PendingFile {
  std::string path, tmp;
  bool done = false;
  explicit PendingFile(const std::string &p);
  void commit();
  ~PendingFile();
};

struct Driver::Impl {
  std::string name;
  CLI::App app;
  // Flags.
  std::string output, emitFlag = "exe", compileTo = "exe", dumpDir, target = "host", cacheDir, input,
      symbol = "kiln_model", maxMemory;
  bool printIR = false, quiet = false, keepTemps = false;
  // The flags that pick a compile option, as the enums (KilnEnums.td) the passes take; the chunk
  // flags as their passes' counts (0: the pass's default, -1: no chunking).
  GpuBuffers gpuBuffers = GpuBuffers::host;
  RecomputeFfn recomputeFfn = RecomputeFfn::off;
  ReversibleBackward reversibleBackward = ReversibleBackward::reconstruct;
  PrecisionOption precision = PrecisionOption::model;
  WeightFormat quantize = WeightFormat::f32;  // --quantize (given: every eligible weight; else a GGUF --config's types)
  std::vector<std::string> tensorFormats;     // a GGUF --config's quantized tensors, name=format
  int64_t ffnChunk = 0, ffnGradChunk = 0;
  std::string configFile;  // --config
  // The runtime compiled models link (the build tree's unless an install prefix is known).
  std::string runtimeInclude = KILN_RUNTIME_INCLUDE, runtimeLib = KILN_RUNTIME_LIB, mainLib = KILN_MAIN_LIB;
  struct ConfigOption {  // one of the four targets is set
    std::string key, flag;
    int64_t *size = nullptr;
    double *real = nullptr;
    bool *flagValue = nullptr;
    std::string *text = nullptr;
  };
  std::vector<ConfigOption> configOptions;
  std::chrono::steady_clock::time_point start = std::chrono::steady_clock::now(), kernelsStart;

  // Decided from the flags by compile().
  Emit emit = Emit::Exe;
  Phase upto = Phase::Exe;
  TargetInfo tgt;
  PhaseOptions phases;

  Impl(std::string n, std::string desc);
  void progress(const std::string &line);
  int guarded(const std::function<int()> &body);
  std::string defaultCache();
  int64_t memoryLimit();
  void writeText(const std::string &path, const std::string &text);

  // Compile.cpp: flags to decisions, the phases, the reports, the kernels.
  int compile(mlir::MLIRContext &ctx, mlir::ModuleOp module);
  void decide();
  struct Kernels {
    std::vector<std::string> objects;  // one per distinct kernel
    std::string runtime;               // Halide's runtime object
  };
  // Worker processes generating the kernels the cache lacks (startKernelWorkers); wait() returns
  // how many kernels they were given.
  struct KernelWorkers {
    std::vector<int> pids;
    int kernels = 0;
    int wait();
  };
  std::string kernelCache();
  KernelWorkers startKernelWorkers(const std::vector<KernelRef> &refs, const std::string &cache);
  Kernels buildKernels(const std::vector<KernelRef> &refs, const std::string &cache, int parallel);
  // Link.cpp: the orchestration lowered to an object and the runtime table compiled, in a
  // temporary folder (removed with it); then an object, a library or the executable.
  struct Lowered {
    std::string work, orchestration, ll;
    bool keep = false;
    ~Lowered();
  };
  std::unique_ptr<Lowered> lower(mlir::ModuleOp module, IRDumps &dumps);
  int link(const Lowered &lowered, const Kernels &kernels);
};

// A path as one shell word.
std::string shellWord(const std::string &path);
// Runs a shell command; an internal error when it fails.
void runCommand(const std::string &cmd);

}  // namespace kiln
