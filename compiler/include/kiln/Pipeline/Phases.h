// Phases.h - kiln's named phases, each a pass pipeline built by one function:
//
//   input -> fused -> tiled -> scheduled -> kernels -> llvm -> exe
//
// `buildPhasePipeline` adds a phase's passes to a pass manager; `registerPhasePipelines` makes
// each one a kiln-opt pipeline (`kiln-opt --kiln-phase-tiled`); `runPhases` runs them up to a
// phase with one numbered dump per pass. After `kernels` the module holds everything the code
// generator and the runtime table need.
#pragma once
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "kiln/Dialect/KernelSpec.h"
#include "kiln/Pipeline/Target.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/Pass/PassInstrumentation.h"
#include "mlir/Pass/PassManager.h"

namespace kiln {

enum class Phase { Input, Fused, Tiled, Scheduled, Kernels, LLVM, Exe };
std::optional<Phase> parsePhase(const std::string &name);
const char *phaseName(Phase p);

// What the phases' passes are parameterized by.
struct PhaseOptions {
  TargetInfo target;
  int64_t ffn_chunk = 0;  // kiln-chunk-ffn's rows per chunk: 0 its default (GPU targets: 1024), < 0 no chunking
  RecomputeFfn recompute_ffn = RecomputeFfn::off;  // kiln-checkpoint-ffn: what backwards recompute of each FFN
  int64_t ffn_grad_chunk = 0;  // kiln-chunk-ffn-grad's d_ff columns per chunk: 0 its default, < 0 none
  // reconstruct: kiln-reverse-layers (reversible layers' backward reconstructs); store: no pass
  ReversibleBackward reversible = ReversibleBackward::reconstruct;
  PrecisionOption precision = PrecisionOption::model;  // kiln-assign-precision's option
  // kiln-quantize-weights' options: every eligible weight's format (--quantize), and the
  // formats of named parameters ("name=q4_1": a GGUF file's tensor types).
  WeightFormat quantize = WeightFormat::f32;
  std::vector<std::string> tensor_formats;
};

// Adds the passes of `phase` (fused, tiled, scheduled or kernels) to `pm`, in order.
void buildPhasePipeline(mlir::OpPassManager &pm, Phase phase, const PhaseOptions &opt);
// kiln-opt --kiln-phase-<fused|tiled|scheduled|kernels>[=target=x86-64-avx2 ffn-chunk=N recompute-ffn=all ffn-grad-chunk=N
// reversible-backward=store precision=bf16 quantize=q8_0].
void registerPhasePipelines();
void registerKilnDialects(mlir::DialectRegistry &registry);

// The IR after every pass: printed to stderr (--print-ir-after-all) and/or written as
// NN-<pass>.mlir into a folder, numbered across every pass manager it is attached to.
class IRDumps {
 public:
  IRDumps(std::string dir, bool print) : dir_(std::move(dir)), print_(print) {}
  bool enabled() const { return print_ || !dir_.empty(); }
  void dump(mlir::Operation *module, llvm::StringRef stem);
  // An instrumentation of `pm` that dumps after each pass through this object.
  void attach(mlir::PassManager &pm);

 private:
  std::string dir_;
  bool print_;
  int next_ = 0;
};

// What kilnc input must declare beyond valid ops: the sequence lengths and their bounds, a
// name and the length of every dynamic dim for each input, a name for each output.
mlir::LogicalResult verifyInterface(mlir::ModuleOp module);

// Verifies the module (and its interface) and runs the phases after input up to `upto`
// (<= Kernels); `progress` gets one line per phase.
mlir::LogicalResult runPhases(mlir::ModuleOp module, const PhaseOptions &opt, Phase upto, IRDumps &dumps,
                              const std::function<void(const std::string &)> &progress = {});

struct KernelRef {
  std::string name;
  KernelSpec spec;
};
// The distinct kernels of a module after the kernels phase, in first-use order (the kernels the
// runtime serves, kiln::runtimeKernel, are not among them).
std::vector<KernelRef> collectKernels(mlir::ModuleOp module);

}  // namespace kiln
