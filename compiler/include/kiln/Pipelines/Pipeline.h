// Pipeline.h - kiln's named phases and what the driver needs from the MLIR side.
//
//   input -> fused -> tiled -> scheduled -> kernels -> llvm -> exe
//
// Each phase is a list of passes; `runPhases` runs them in order, writing one numbered file per
// pass to the dump directory. After `kernels`, the module holds everything the code generator
// and the runtime table need; `lowerToObject` turns the orchestration into an object file.
#pragma once
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/Support/LLVM.h"

namespace kiln {

enum class Phase { Input, Fused, Tiled, Scheduled, Kernels, LLVM, Exe };
std::optional<Phase> parsePhase(const std::string &name);
const char *phaseName(Phase p);

// A compilation target: the Halide target string for kernels, the f32 vector width the
// schedules assume, and the CPU features the executable checks for at start-up.
struct TargetInfo {
  std::string name;    // x86-64-avx512, x86-64-avx2, x86-64-sse41; "<cpu>-cuda" / "<cpu>-opencl" with GPU kernels
  std::string halide;  // Halide target string (without no_runtime)
  int64_t vector_width = 16;
  std::string cpu_features;
  // The GPU API the kernels run on: "" (the CPU), "cuda" (an NVIDIA GPU, Halide's CUDA backend,
  // sm_80 PTX) or "opencl" (any OpenCL device; the tests run the GPU schedules on PoCL's CPU device).
  std::string gpu;
  bool gpu_resident = false;  // GPU: buffers live on the device (--gpu-buffers=device), not copied per call
  bool cuda() const { return gpu == "cuda"; }
};
// "host" picks the best of the named targets this CPU supports; "cuda" and "opencl" are that CPU
// plus the GPU API.
std::optional<TargetInfo> resolveTarget(const std::string &name);

struct PipelineOptions {
  TargetInfo target;
  std::string dump_dir;  // empty: no dumps
  bool print_ir_after_all = false;
  int64_t ffn_chunk = 0;
  std::string symbol = "kiln_model";  // the runtime table's symbol; entries are <symbol>_entry_<name>  // kiln-chunk-ffn: rows per chunk; 0 chooses from the cache size, < 0 disables
  std::function<void(const std::string &)> progress;  // one line per phase
};

void registerKilnDialects(mlir::DialectRegistry &registry);

// Verifies the module and runs the passes of the phases after `from` up to `upto` (<= Kernels).
mlir::LogicalResult runPhases(mlir::ModuleOp module, const PipelineOptions &opt, Phase upto);

struct KernelRef {
  std::string name, spec;
};
// The distinct kernels of a module after the kernels phase, in first-use order.
std::vector<KernelRef> collectKernels(mlir::ModuleOp module);
// The runtime table (kilnrt/model.h) as C source.
std::string modelInfoSource(mlir::ModuleOp module, const TargetInfo &target, const std::string &modelName,
                            const std::string &version, const std::string &hash, const std::string &symbol);
// Fails (with an error naming the largest buffers) when an entry's peak memory at the bounds
// (parameters, inputs and outputs, arena) exceeds `limit` bytes; limit <= 0: no limit.
mlir::LogicalResult checkMemoryLimit(mlir::ModuleOp module, int64_t limit);
// FLOPs, bytes and the buffer plan's peak at the bounds and at 1/2 and 1/4 of them.
std::string costReport(mlir::ModuleOp module);
// The schedule of every kernel, as text (what --emit=schedule prints).
std::string scheduleReport(mlir::ModuleOp module);
std::string kernelScheduleText(const std::string &name, const std::string &spec, const std::string &halideSchedule);
// Runs kiln-lower-to-llvm, translates to LLVM IR, optimizes and writes an object (or .ll).
mlir::LogicalResult lowerToObject(mlir::ModuleOp module, const PipelineOptions &opt, int dumpIndex,
                                  const std::string &objPath, const std::string &llPath);
// Number of the next dump file after runPhases(upto = Kernels).
int dumpCount();

}  // namespace kiln
