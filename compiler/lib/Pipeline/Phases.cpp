// Phases.cpp - kiln's phases as pass pipelines, their registration, the numbered dumps and the
// input's interface check.
#include "kiln/Pipeline/Phases.h"

#include <chrono>
#include <cstdio>
#include <set>

#include "kiln/Dialect/KilnDialect.h"
#include "kiln/Transforms/Passes.h"
#include "kiln/Transforms/Utils.h"
#include "kiln/dsl/Model.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Target/LLVMIR/Dialect/Builtin/BuiltinToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/LLVMIR/LLVMToLLVMIRTranslation.h"
#include "llvm/Support/raw_ostream.h"

using namespace mlir;

namespace kiln {

static const char *kPhaseNames[] = {"input", "fused", "tiled", "scheduled", "kernels", "llvm", "exe"};
std::optional<Phase> parsePhase(const std::string &name) {
  for (int i = 0; i < 7; ++i)
    if (name == kPhaseNames[i]) return (Phase)i;
  return std::nullopt;
}
const char *phaseName(Phase p) { return kPhaseNames[(int)p]; }

void registerKilnDialects(DialectRegistry &registry) {
  registry.insert<KilnDialect, func::FuncDialect, LLVM::LLVMDialect>();
  registerBuiltinDialectTranslation(registry);
  registerLLVMDialectTranslation(registry);
}

void buildPhasePipeline(OpPassManager &pm, Phase phase, const PhaseOptions &opt) {
  const TargetInfo &t = opt.target;
  switch (phase) {
    case Phase::Fused:
      pm.addPass(createUnrollAct());      // a differentiated entry's ACT steps in straight code
      pm.addPass(createDifferentiate());  // first: the backward is fused and tiled with the forward
      if (opt.reversible == ReversibleBackward::reconstruct) pm.addPass(createReverseLayers());
      if (opt.recompute_ffn != RecomputeFfn::off)
        pm.addPass(createCheckpointFfn(CheckpointFfnOptions{opt.recompute_ffn == RecomputeFfn::activation}));
      pm.addPass(createRecomputeCheckpoints());
      pm.addPass(createApplyOptimizer());
      pm.addPass(createFuseAttention());
      pm.addPass(createLowerLshAttention());
      pm.addPass(createLowerAct());
      pm.addPass(createFuseEpilogue());
      break;
    case Phase::Tiled:
      // GPU kernels: chunks of 1024 rows by default (a chunk's GEMMs must fill the device, and
      // h is chunk x d_ff of device memory); the CPU's from kiln-chunk-ffn's intermediate budget.
      if (opt.ffn_chunk >= 0) pm.addPass(createChunkFfn(ChunkFfnOptions{opt.ffn_chunk == 0 && t.isGpu() ? 1024 : opt.ffn_chunk}));
      // The backward of a recomputed FFN, over chunks of d_ff (CPU kernels: the backward's
      // kernels have no GPU schedules yet).
      if (opt.ffn_grad_chunk >= 0 && !t.isGpu()) pm.addPass(createChunkFfnGrad(ChunkFfnGradOptions{opt.ffn_grad_chunk}));
      if (opt.quantize != WeightFormat::f32 || !opt.tensor_formats.empty()) {
        QuantizeWeightsOptions q;
        q.format = opt.quantize;
        q.tensorFormats.assign(opt.tensor_formats.begin(), opt.tensor_formats.end());
        q.gpu = t.isGpu();
        pm.addPass(createQuantizeWeights(q));
      }
      pm.addPass(createPrepackWeights(PrepackWeightsOptions{t.vector_width, t.isGpu()}));
      pm.addPass(createTileSparsePattern());
      pm.addPass(createTileOps(TileOpsOptions{t.vector_width, t.isGpu()}));
      pm.addPass(createAssignPrecision(AssignPrecisionOptions{opt.precision, t.bf16_dot, !t.isGpu()}));
      break;
    case Phase::Scheduled: pm.addPass(createAssignSchedule(AssignScheduleOptions{t.vector_width})); break;
    case Phase::Kernels:
      pm.addPass(createFoldViews(FoldViewsOptions{t.isGpu()}));
      pm.addPass(createLoopSequences());
      pm.addPass(createOutlineKernels(OutlineKernelsOptions{t.name}));
      pm.addPass(createPlanBuffers());
      break;
    case Phase::Input:
    case Phase::LLVM:
    case Phase::Exe: break;  // no passes of their own (LLVM: kiln-lower-to-llvm, ObjectEmitter.h)
  }
}

namespace {
struct PhasePipelineOptions : PassPipelineOptions<PhasePipelineOptions> {
  Option<std::string> target{*this, "target", llvm::cl::desc("host, x86-64-avx512, x86-64-avx512bf16, x86-64-avx2, x86-64-sse41, cuda, opencl"),
                             llvm::cl::init("x86-64-avx512")};
  Option<int64_t> ffnChunk{*this, "ffn-chunk", llvm::cl::desc("kiln-chunk-ffn rows per chunk (0: default, -1: off)"),
                           llvm::cl::init(0)};
  Option<int64_t> ffnGradChunk{*this, "ffn-grad-chunk",
                               llvm::cl::desc("kiln-chunk-ffn-grad d_ff columns per chunk (0: default, -1: off)"), llvm::cl::init(0)};
  Option<ReversibleBackward> reversibleBackward{
      *this, "reversible-backward", llvm::cl::desc("reversible layers' backward (kiln-reverse-layers)"),
      llvm::cl::init(ReversibleBackward::reconstruct),
      llvm::cl::values(clEnumValN(ReversibleBackward::reconstruct, "reconstruct", "each layer's input from its output"),
                       clEnumValN(ReversibleBackward::store, "store", "keep every layer's activations"))};
  Option<RecomputeFfn> recomputeFfn{
      *this, "recompute-ffn", llvm::cl::desc("what the backward recomputes of each FFN (kiln-checkpoint-ffn)"),
      llvm::cl::init(RecomputeFfn::off),
      llvm::cl::values(clEnumValN(RecomputeFfn::off, "off", "nothing"),
                       clEnumValN(RecomputeFfn::activation, "activation", "the activation's output"),
                       clEnumValN(RecomputeFfn::all, "all", "both intermediates"))};
  Option<PrecisionOption> precision{
      *this, "precision", llvm::cl::desc("GEMM operands (kiln-assign-precision)"), llvm::cl::init(PrecisionOption::model),
      llvm::cl::values(clEnumValN(PrecisionOption::model, "model", "the module's kiln.precision, else f32"),
                       clEnumValN(PrecisionOption::f32, "f32", "f32 operands"),
                       clEnumValN(PrecisionOption::bf16, "bf16", "bfloat16 operands, f32 sums"))};
  Option<WeightFormat> quantize{
      *this, "quantize", llvm::cl::desc("GEMM weights and tables in quantized blocks (kiln-quantize-weights)"),
      llvm::cl::init(WeightFormat::f32),
      llvm::cl::values(clEnumValN(WeightFormat::f32, "f32", "as declared"), clEnumValN(WeightFormat::q8_0, "q8_0", "Q8_0"),
                       clEnumValN(WeightFormat::q4_0, "q4_0", "Q4_0"), clEnumValN(WeightFormat::q4_1, "q4_1", "Q4_1"))};
};
}  // namespace

void registerPhasePipelines() {
  for (Phase p : {Phase::Fused, Phase::Tiled, Phase::Scheduled, Phase::Kernels}) {
    std::string name = std::string("kiln-phase-") + phaseName(p);
    PassPipelineRegistration<PhasePipelineOptions>(
        name, std::string("the passes of kiln's ") + phaseName(p) + " phase",
        [p](OpPassManager &pm, const PhasePipelineOptions &o) {
          PhaseOptions opt;
          opt.target = resolveTarget(o.target).value_or(*resolveTarget("x86-64-avx512"));
          opt.ffn_chunk = o.ffnChunk;
          opt.recompute_ffn = o.recomputeFfn;
          opt.ffn_grad_chunk = o.ffnGradChunk;
          opt.reversible = o.reversibleBackward;
          opt.precision = o.precision;
          opt.quantize = o.quantize;
          buildPhasePipeline(pm, p, opt);
        });
  }
}

void IRDumps::dump(Operation *module, llvm::StringRef stem) {
  if (print_) {
    llvm::errs() << "// -----// IR Dump After " << stem << " //----- //\n";
    module->print(llvm::errs());
    llvm::errs() << "\n";
  }
  if (dir_.empty()) return;
  char num[8];
  snprintf(num, sizeof num, "%02d-", next_);
  std::error_code ec;
  llvm::raw_fd_ostream os(dir_ + "/" + num + stem.str() + ".mlir", ec);
  if (!ec) module->print(os, OpPrintingFlags().enableDebugInfo(true, /*prettyForm=*/true));
  ++next_;
}

namespace {
struct DumpAfterPass : PassInstrumentation {
  IRDumps &dumps;
  explicit DumpAfterPass(IRDumps &d) : dumps(d) {}
  void runAfterPass(Pass *pass, Operation *op) override {
    if (isa<ModuleOp>(op)) dumps.dump(op, pass->getArgument());
  }
};
}  // namespace

void IRDumps::attach(PassManager &pm) {
  if (enabled()) pm.addInstrumentation(std::make_unique<DumpAfterPass>(*this));
}

LogicalResult verifyInterface(ModuleOp module) {
  auto names = module->getAttrOfType<ArrayAttr>("kiln.seq_names");
  auto bounds = module->getAttrOfType<DenseI64ArrayAttr>("kiln.seq_bounds");
  if (!names || !bounds || (int64_t)names.size() != (int64_t)bounds.size() ||
      !llvm::all_of(names, [](Attribute a) { return isa<StringAttr>(a); }))
    return module.emitError("expected module attributes kiln.seq_names (strings) and kiln.seq_bounds (array<i64>) "
                            "of the same length, naming each sequence length and its compiled bound");
  for (int64_t b : bounds.asArrayRef())
    if (b < 1 || b > kMaxSeqBound)
      return module.emitError("expected every kiln.seq_bounds entry in [1, ") << kMaxSeqBound << "], got " << b;
  int64_t nsyms = (int64_t)names.size();
  if (nsyms > 8) return module.emitError("expected at most 8 sequence lengths, batches and rows of batches");
  if (auto fa = module->getAttrOfType<DenseI64ArrayAttr>("kiln.seq_factors")) {
    ArrayRef<int64_t> fs = fa.asArrayRef();
    if ((int64_t)fs.size() != 2 * nsyms) return module.emitError("expected kiln.seq_factors to hold two entries per symbol");
    for (int64_t s = 0; s < nsyms; ++s) {
      int64_t b = fs[2 * s], l = fs[2 * s + 1];
      if ((b < 0) != (l < 0) || b >= nsyms || l >= nsyms || b == s || l == s ||
          (b >= 0 && (fs[2 * b] >= 0 || fs[2 * l] >= 0 || bounds[s] != bounds[b] * bounds[l])))
        return module.emitError("expected kiln.seq_factors entry ")
               << s << " to be -1, -1 or a batch and a length, each of its own, whose bounds multiply to its bound";
    }
  }
  if (module.getOps<func::FuncOp>().empty()) return module.emitError("expected at least one func.func entry point");
  for (auto f : module.getOps<func::FuncOp>()) {
    for (unsigned i = 0; i < f.getNumArguments(); ++i) {
      auto t = dyn_cast<RankedTensorType>(f.getArgument(i).getType());
      auto n = f.getArgAttrOfType<StringAttr>(i, "kiln.name");
      auto s = f.getArgAttrOfType<DenseI64ArrayAttr>(i, "kiln.syms");
      if (!t || !n || !s || (int64_t)s.size() != t.getRank())
        return f.emitError("expected argument ") << i << " to be a ranked tensor with kiln.name and kiln.syms (one "
                                                      "sequence-length index per dim, -1 for static dims)";
      for (int64_t d = 0; d < t.getRank(); ++d) {
        int64_t sym = s[d];
        if (sym >= nsyms || ShapedType::isDynamic(t.getDimSize(d)) != (sym >= 0))
          return f.emitError("expected kiln.syms of argument '")
                 << n.getValue() << "' to name a sequence length exactly for its dynamic dims";
      }
    }
    for (unsigned i = 0; i < f.getNumResults(); ++i)
      if (!f.getResultAttrOfType<StringAttr>(i, "kiln.name"))
        return f.emitError("expected result ") << i << " to carry kiln.name";
  }
  return success();
}

LogicalResult runPhases(ModuleOp module, const PhaseOptions &opt, Phase upto, IRDumps &dumps,
                        const std::function<void(const std::string &)> &progress) {
  if (failed(verify(module)) || failed(verifyInterface(module))) return failure();
  dumps.dump(module, "input");
  for (int p = (int)Phase::Fused; p <= (int)upto && p <= (int)Phase::Kernels; ++p) {
    auto t0 = std::chrono::steady_clock::now();
    PassManager pm(module->getContext(), ModuleOp::getOperationName());
    buildPhasePipeline(pm, (Phase)p, opt);
    dumps.attach(pm);
    if (failed(pm.run(module))) return failure();
    if (progress) {
      char buf[96];
      snprintf(buf, sizeof buf, "phase %-9s %7.1f ms", kPhaseNames[p],
               std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
      progress(buf);
    }
  }
  return success();
}

std::vector<KernelRef> collectKernels(ModuleOp module) {
  std::vector<KernelRef> out;
  std::set<std::string> seen;
  module.walk([&](Operation *op) {
    auto n = op->getAttrOfType<StringAttr>("kiln.kernel");
    if (n && isKernelOp(op) && runtimeKernel(op).empty() && seen.insert(n.str()).second)
      out.push_back({n.str(), KernelSpec::of(op)});
  });
  return out;
}

}  // namespace kiln
