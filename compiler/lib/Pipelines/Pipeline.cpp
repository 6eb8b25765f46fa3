// Pipeline.cpp - kiln's phases, per-pass dumps, the runtime table, the cost report, and the
// lowering of the orchestration to an object file.
#include "kiln/Pipelines/Pipeline.h"

#include <chrono>
#include <cstdio>
#include <map>
#include <set>
#include <sstream>

#include "kiln/Support/KernelSpec.h"
#include "kiln/Dialect/KilnDialect.h"
#include "kiln/Transforms/Passes.h"
#include "kiln/Transforms/Utils.h"
#include "kiln/dsl/Model.h"
#include "kilnrt/api.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/IR/LegacyPassManager.h"
#include "llvm/Support/Path.h"
#include "llvm/IR/Module.h"
#include "llvm/MC/TargetRegistry.h"
#include "llvm/Passes/PassBuilder.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/TargetSelect.h"
#include "llvm/Support/raw_ostream.h"
#include "llvm/Target/TargetMachine.h"
#include "llvm/Target/TargetOptions.h"
#include "llvm/TargetParser/Host.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Target/LLVMIR/Dialect/Builtin/BuiltinToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/LLVMIR/LLVMToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Export.h"

using namespace mlir;

namespace kiln {

static const char *kPhaseNames[] = {"input", "fused", "tiled", "scheduled", "kernels", "llvm", "exe"};
std::optional<Phase> parsePhase(const std::string &name) {
  for (int i = 0; i < 7; ++i)
    if (name == kPhaseNames[i]) return (Phase)i;
  return std::nullopt;
}
const char *phaseName(Phase p) { return kPhaseNames[(int)p]; }

std::optional<TargetInfo> resolveTarget(const std::string &name) {
  TargetInfo avx512{"x86-64-avx512", "x86-64-linux-avx-avx2-avx512-avx512_skylake-f16c-fma-sse41", 16,
                    "sse4.1,avx,avx2,fma,f16c,avx512f,avx512cd,avx512bw,avx512dq,avx512vl"};
  TargetInfo avx2{"x86-64-avx2", "x86-64-linux-avx-avx2-f16c-fma-sse41", 8, "sse4.1,avx,avx2,fma,f16c"};
  TargetInfo sse{"x86-64-sse41", "x86-64-linux-sse41", 4, "sse4.1"};
  if (name == avx512.name) return avx512;
  if (name == avx2.name) return avx2;
  if (name == sse.name) return sse;
  if (name == "cuda" || name == "opencl") {  // the host CPU for the orchestration and host kernels, the GPU for the rest
    auto cpu = resolveTarget("host");
    cpu->name += "-" + name;
    cpu->halide += name == "cuda" ? "-cuda-cuda_capability_80" : "-opencl";
    cpu->gpu = name;
    return cpu;
  }
  if (name == "host") {
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq") &&
        __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512cd"))
      return avx512;
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return avx2;
    return sse;
  }
  return std::nullopt;
}

void registerKilnDialects(DialectRegistry &registry) {
  registry.insert<KilnDialect, func::FuncDialect, LLVM::LLVMDialect>();
  registerBuiltinDialectTranslation(registry);
  registerLLVMDialectTranslation(registry);
}


static int g_dump = 0;
int dumpCount() { return g_dump; }

static void dumpModule(ModuleOp module, const PipelineOptions &opt, const std::string &stem) {
  if (opt.print_ir_after_all) {
    llvm::errs() << "// -----// IR Dump After " << stem << " //----- //\n";
    module->print(llvm::errs());
    llvm::errs() << "\n";
  }
  if (opt.dump_dir.empty()) return;
  char num[8];
  snprintf(num, sizeof num, "%02d-", g_dump);
  std::error_code ec;
  llvm::raw_fd_ostream os(opt.dump_dir + "/" + num + stem + ".mlir", ec);
  if (!ec) module->print(os, OpPrintingFlags().enableDebugInfo(true, /*prettyForm=*/true));
  ++g_dump;
}

static std::vector<std::unique_ptr<Pass>> passesOf(Phase p, const PipelineOptions &opt) {
  const TargetInfo &t = opt.target;
  std::vector<std::unique_ptr<Pass>> v;
  switch (p) {
    case Phase::Fused:
      v.push_back(createFuseAttention());
      v.push_back(createLowerLshAttention());
      v.push_back(createLowerAct());
      v.push_back(createFuseEpilogue());
      break;
    case Phase::Tiled:
      // GPU kernels: chunks of 1024 rows by default (a chunk's GEMMs must fill the device, and
      // h is chunk x d_ff of device memory); the CPU default comes from the L2 size.
      if (opt.ffn_chunk >= 0)
        v.push_back(createChunkFfn(ChunkFfnOptions{opt.ffn_chunk == 0 && !opt.target.gpu.empty() ? 1024 : opt.ffn_chunk}));
      v.push_back(createPrepackWeights());
      v.push_back(createTileSparsePattern());
      v.push_back(createTileOps(TileOpsOptions{t.vector_width}));
      break;
    case Phase::Scheduled: v.push_back(createAssignSchedule(AssignScheduleOptions{t.vector_width})); break;
    case Phase::Kernels:
      v.push_back(createOutlineKernels(OutlineKernelsOptions{t.name}));
      v.push_back(createPlanBuffers());
      break;
    default: break;
  }
  return v;
}

// What kilnc input must declare beyond valid ops: the sequence lengths and their bounds, and a
// name and the length of every dynamic dim for each input, a name for each output.
static LogicalResult verifyInterface(ModuleOp module) {
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
  if (nsyms > 4) return module.emitError("expected at most 4 sequence lengths");
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

LogicalResult runPhases(ModuleOp module, const PipelineOptions &opt, Phase upto) {
  g_dump = 0;
  if (failed(verify(module)) || failed(verifyInterface(module))) return failure();
  dumpModule(module, opt, "input");
  for (int p = (int)Phase::Fused; p <= (int)upto && p <= (int)Phase::Kernels; ++p) {
    auto t0 = std::chrono::steady_clock::now();
    for (auto &pass : passesOf((Phase)p, opt)) {
      std::string arg = pass->getArgument().str();
      PassManager pm(module->getContext(), ModuleOp::getOperationName());
      pm.addPass(std::move(pass));
      if (failed(pm.run(module))) return failure();
      dumpModule(module, opt, arg);
    }
    if (opt.progress) {
      char buf[96];
      snprintf(buf, sizeof buf, "phase %-9s %7.1f ms", kPhaseNames[p],
               std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
      opt.progress(buf);
    }
  }
  return success();
}

std::vector<KernelRef> collectKernels(ModuleOp module) {
  std::vector<KernelRef> out;
  std::set<std::string> seen;
  module.walk([&](Operation *op) {
    auto n = op->getAttrOfType<StringAttr>("kiln.kernel");
    auto s = op->getAttrOfType<StringAttr>("kiln.kernel_spec");
    if (n && s && seen.insert(n.str()).second) out.push_back({n.str(), s.str()});
  });
  return out;
}

// ---------------------------------------------------------------- runtime table
static std::string cstr(StringRef s) {
  std::string r = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') r += '\\';
    r += c;
  }
  return r + "\"";
}

static std::string tensorInfo(StringRef name, RankedTensorType t, ArrayRef<int64_t> syms, ArrayRef<int64_t> bounds,
                              int64_t vocab, StringRef init, float scale, bool optional = false, bool transposed = false) {
  std::ostringstream os;
  os << "{" << cstr(name) << ", " << (t.getElementType().isF32() ? "KILN_F32" : "KILN_I32") << ", " << t.getRank()
     << ", {";
  for (int64_t d = 0; d < t.getRank(); ++d) {
    int64_t s = syms.empty() ? -1 : syms[d];
    os << (d ? ", " : "") << "{" << (s >= 0 ? bounds[s] : t.getDimSize(d)) << ", " << s << "}";
  }
  os << "}, " << vocab << ", "
     << (init == "ones" ? "KILN_INIT_ONES" : init == "zeros" ? "KILN_INIT_ZEROS" : "KILN_INIT_NORMAL") << ", "
     << "(float)" << scale << ", " << (optional ? 1 : 0) << ", " << (transposed ? 1 : 0) << "}";
  return os.str();
}

std::string modelInfoSource(ModuleOp module, const TargetInfo &target, const std::string &modelName,
                            const std::string &version, const std::string &hash, const std::string &symbol) {
  std::string entryPrefix = symbol + "_entry_";
  std::ostringstream os;
  auto names = module->getAttrOfType<ArrayAttr>("kiln.seq_names");
  auto bounds = module->getAttrOfType<DenseI64ArrayAttr>("kiln.seq_bounds");
  SmallVector<int64_t> bnd(bounds ? bounds.asArrayRef() : ArrayRef<int64_t>{});
  os << "/* generated by kiln: the runtime table of model " << modelName << " */\n#include \"kilnrt/model.h\"\n\n";
  os << "static const char *const sym_names[] = {";
  for (Attribute a : names) os << cstr(cast<StringAttr>(a).getValue()) << ", ";
  os << "0};\nstatic const int64_t sym_max[] = {";
  for (int64_t b : bnd) os << b << ", ";
  os << "0};\n";
  // parameters, in kiln.params order
  llvm::StringMap<kiln::ParamOp> params;
  module.walk([&](kiln::ParamOp p) { params.try_emplace(p.getName(), p); });
  auto paramNames = module->getAttrOfType<ArrayAttr>("kiln.params");
  os << "static const kiln_tensor_info params[] = {\n";
  for (Attribute a : paramNames) {
    kiln::ParamOp p = params[cast<StringAttr>(a).getValue()];
    os << "  " << tensorInfo(p.getName(), cast<RankedTensorType>(p.getType()), {}, bnd, 0, p.getInit(),
                             p.getInitScale().convertToFloat(), false, p.getTransposed())
       << ",\n";
  }
  os << "  {0}};\n";
  // io, in kiln.io order
  auto ioNames = module->getAttrOfType<ArrayAttr>("kiln.io");
  std::map<std::string, std::string> ioInfo;
  std::vector<std::string> entries;
  for (auto f : module.getOps<func::FuncOp>()) {
    std::string fn = f.getSymName().str();
    std::vector<int64_t> ins, outs;
    auto ioIndex = [&](StringAttr n) {
      for (size_t i = 0; i < ioNames.size(); ++i)
        if (ioNames[i] == n) return (int64_t)i;
      return (int64_t)-1;
    };
    for (unsigned i = 0; i < f.getNumArguments(); ++i) {
      auto n = f.getArgAttrOfType<StringAttr>(i, "kiln.name");
      auto s = f.getArgAttrOfType<DenseI64ArrayAttr>(i, "kiln.syms");
      auto v = f.getArgAttrOfType<IntegerAttr>(i, "kiln.vocab");
      ioInfo[n.str()] = tensorInfo(n.getValue(), cast<RankedTensorType>(f.getArgument(i).getType()), s.asArrayRef(),
                                   bnd, v ? v.getInt() : 0, "normal", 0, f.getArgAttr(i, "kiln.optional") != nullptr);
      ins.push_back(ioIndex(n));
    }
    auto ret = cast<func::ReturnOp>(f.getBody().front().getTerminator());
    for (unsigned i = 0; i < f.getNumResults(); ++i) {
      auto n = f.getResultAttrOfType<StringAttr>(i, "kiln.name");
      Value v = ret.getOperand(i);
      auto s = v.getDefiningOp()->getAttrOfType<DenseI64ArrayAttr>("kiln.syms");
      ioInfo[n.str()] = tensorInfo(n.getValue(), cast<RankedTensorType>(v.getType()), s.asArrayRef(), bnd, 0, "normal", 0);
      outs.push_back(ioIndex(n));
    }
    os << "extern int32_t " << entryPrefix << fn << "(void **, const int64_t *, int32_t *);\n";
    os << "static const int32_t " << fn << "_inputs[] = {";
    for (int64_t i : ins) os << i << ", ";
    os << "0};\nstatic const int32_t " << fn << "_outputs[] = {";
    for (int64_t i : outs) os << i << ", ";
    os << "0};\nstatic const kiln_buffer_info " << fn << "_buffers[] = {\n";
    auto arena = f->getAttrOfType<ArrayAttr>("kiln.arena");
    for (Attribute a : arena) {
      auto r = cast<DenseI64ArrayAttr>(a).asArrayRef();
      os << "  {" << r[0] << ", {" << r[1] << ", " << r[2] << ", " << r[3] << ", " << r[4] << "}, " << r[5] << ", "
         << r[6] << "},\n";
    }
    os << "  {0}};\nstatic const char *const " << fn << "_kernels[] = {\n";
    int nk = 0;
    f.walk([&](Operation *op) {
      if (auto k = op->getAttrOfType<StringAttr>("kiln.kernel")) {
        os << "  " << cstr(k.getValue()) << ",\n";
        ++nk;
      }
    });
    os << "  0};\n";
    std::ostringstream e;
    e << "  {" << cstr(fn) << ", " << entryPrefix << fn << ", " << ins.size() << ", " << outs.size() << ", " << fn
      << "_inputs, " << fn << "_outputs, " << arena.size() << ", " << fn << "_buffers, " << nk << ", " << fn
      << "_kernels},\n";
    entries.push_back(e.str());
  }
  os << "static const kiln_tensor_info io[] = {\n";
  for (Attribute a : ioNames) os << "  " << ioInfo[cast<StringAttr>(a).str()] << ",\n";
  os << "  {0}};\nstatic const kiln_entry_info entries[] = {\n";
  for (auto &e : entries) os << e;
  auto prefixAttr = module->getAttrOfType<StringAttr>("kiln.weights_prefix");
  auto ignoredAttr = module->getAttrOfType<ArrayAttr>("kiln.ignored_weights");
  os << "  {0}};\nstatic const char *const ignored[] = {";
  if (ignoredAttr)
    for (Attribute a : ignoredAttr) os << cstr(cast<StringAttr>(a).getValue()) << ", ";
  os << "0};\n";
  llvm::StringMap<kiln::StateOp> stateOps;
  module.walk([&](kiln::StateOp st) { stateOps.try_emplace(st.getName(), st); });
  auto stateNames = module->getAttrOfType<ArrayAttr>("kiln.states");
  os << "static const kiln_tensor_info states[] = {\n";
  if (stateNames)
    for (Attribute a : stateNames) {
      kiln::StateOp st = stateOps[cast<StringAttr>(a).getValue()];
      os << "  " << tensorInfo(st.getName(), cast<RankedTensorType>(st.getType()), {}, bnd, 0, "zeros", 0) << ",\n";
    }
  os << "  {0}};\n";
  os << "\nconst kiln_model_info " << symbol << " = {KILN_ABI_VERSION, " << cstr(modelName) << ", " << cstr(version)
     << ", " << cstr(hash) << ", " << cstr(target.name + (target.gpu_resident ? "-resident" : "")) << ", " << cstr(target.cpu_features) << ", " << bnd.size()
     << ", sym_names, sym_max, " << paramNames.size() << ", params, " << ioNames.size() << ", io, " << entries.size()
     << ", entries, " << cstr(prefixAttr ? prefixAttr.getValue() : "") << ", " << (ignoredAttr ? ignoredAttr.size() : 0)
     << ", ignored, " << (stateNames ? stateNames.size() : 0) << ", states};\n";
  return os.str();
}

// ---------------------------------------------------------------- cost report
namespace {
struct Cost {
  double flops = 0, read = 0, written = 0;
};
double numel(Value v, ArrayRef<int64_t> symVals) {
  auto t = cast<RankedTensorType>(v.getType());
  ArrayRef<int64_t> syms;
  if (auto ba = dyn_cast<BlockArgument>(v)) {
    if (auto loop = dyn_cast<kiln::LoopOp>(ba.getOwner()->getParentOp()))  // the carry, or the step
      return ba.getArgNumber() == 0 ? numel(loop.getInit(), symVals) : 1;
    auto f = cast<func::FuncOp>(ba.getOwner()->getParentOp());
    syms = f.getArgAttrOfType<DenseI64ArrayAttr>(ba.getArgNumber(), "kiln.syms").asArrayRef();
  } else if (auto s = v.getDefiningOp()->getAttrOfType<DenseI64ArrayAttr>("kiln.syms")) {
    syms = s.asArrayRef();
  }
  double n = 1;
  for (int64_t d = 0; d < t.getRank(); ++d) n *= (!syms.empty() && syms[d] >= 0) ? symVals[syms[d]] : t.getDimSize(d);
  return n;
}
Cost opCost(Operation *op, ArrayRef<int64_t> sv) {
  Cost c;
  double out = numel(op->getResult(0), sv);
  for (Value v : op->getOperands()) c.read += 4 * numel(v, sv);
  c.written = 4 * out;
  if (auto l = dyn_cast<kiln::LinearOp>(op)) {
    auto w = cast<RankedTensorType>(l.getWeight().getType());
    double k = l.getWeightLayout() == "out_in" ? w.getDimSize(1) : w.getDimSize(0);
    c.flops = 2 * out * k + (l.getBias() ? out : 0) + (l.getActivation() == "none" ? 0 : 8 * out);
  } else if (auto f = dyn_cast<kiln::FfnOp>(op)) {
    auto w1 = cast<RankedTensorType>(f.getW1().getType());
    double rows = numel(f.getX(), sv) / cast<RankedTensorType>(f.getX().getType()).getDimSize(1);
    double d = w1.getDimSize(0), dff = w1.getDimSize(1);
    c.flops = 2 * rows * d * dff * 2 + 10 * rows * dff;
  } else if (isa<kiln::MatMulOp, kiln::BatchMatMulOp>(op)) {
    auto a = cast<RankedTensorType>(op->getOperand(0).getType());
    c.flops = 2 * out * a.getDimSize(a.getRank() - 1);
  } else if (auto a = dyn_cast<kiln::AttentionOp>(op)) {
    double lk = numel(a.getKey(), sv) / cast<RankedTensorType>(a.getKey().getType()).getDimSize(2) /
                cast<RankedTensorType>(a.getKey().getType()).getDimSize(0);
    auto q = cast<RankedTensorType>(a.getQuery().getType());
    double lqh = numel(a.getQuery(), sv) / q.getDimSize(2);  // H * Lq
    double d = q.getDimSize(2), dv = cast<RankedTensorType>(a.getValue().getType()).getDimSize(2);
    double pairs = lqh * lk * (a.getMask() == "causal" ? 0.5 : 1.0);
    sparse::Pattern p = patternOf(a);
    if (!p.kind.empty())  // what the block schedule computes, padding and block rounding included
      pairs = q.getDimSize(0) * sparse::countWork(p, (int64_t)lk).visited;
    c.flops = pairs * (2 * d + 2 * dv + 4);
  } else if (auto h = dyn_cast<kiln::LshHashOp>(op)) {  // x·R for every round, then an argmax
    auto r = cast<RankedTensorType>(h.getRotations().getType());
    c.flops = out * (2.0 * r.getDimSize(1) * r.getDimSize(2) + 2.0 * r.getDimSize(2));
  } else if (isa<kiln::LshSortOp>(op)) {  // a counting sort: a few integer ops per position
    c.flops = 0;
  } else if (auto a = dyn_cast<kiln::LshChunkAttentionOp>(op)) {  // each query: 2 chunks of keys per round
    auto q = cast<RankedTensorType>(a.getQk().getType());
    double rounds = cast<RankedTensorType>(a.getBuckets().getType()).getDimSize(1);
    double d = q.getDimSize(2), dv = cast<RankedTensorType>(a.getValue().getType()).getDimSize(2);
    double pairs = numel(a.getQk(), sv) / d * rounds * 2.0 * (double)a.getChunk();
    c.flops = pairs * (2 * d + 2 * dv + 4);
  } else if (auto dw = dyn_cast<kiln::DepthwiseConvOp>(op)) {
    c.flops = 2 * out * cast<RankedTensorType>(dw.getWeight().getType()).getDimSize(0) + out;
  } else if (auto u = dyn_cast<kiln::ActUpdateOp>(op)) {  // the halting dot product, then 3 flops per state entry
    c.flops = 5 * numel(u.getX(), sv);
  } else if (isa<kiln::ActInputOp>(op)) {
    c.flops = 2 * out;
  } else if (isa<kiln::GeluOp>(op)) {
    c.flops = 10 * out;
  } else if (isa<kiln::SoftmaxOp>(op)) {
    c.flops = 5 * out;
  } else if (isa<kiln::LayerNormOp>(op)) {
    c.flops = 8 * out;
  } else if (isa<kiln::AddOp, kiln::MulOp, kiln::ScaleOp, kiln::ReluOp>(op)) {
    c.flops = out;
  } else if (auto cw = dyn_cast<kiln::CacheWriteOp>(op)) {
    c.read = c.written = 4 * numel(cw.getValue(), sv);  // only the new rows move
  } else if (isa<kiln::EmbeddingOp, kiln::PositionEmbeddingOp>(op)) {
    c.read = 4 * out + (isa<kiln::EmbeddingOp>(op) ? 4 * numel(op->getOperand(1), sv) : 0);
  }
  return c;
}
std::string human(double v, const char *unit) {
  const char *pre[] = {"", "K", "M", "G", "T"};
  int i = 0;
  while (v >= 1000 && i < 4) v /= 1000, ++i;
  char buf[32];
  snprintf(buf, sizeof buf, "%.3g %s%s", v, pre[i], unit);
  return buf;
}
}  // namespace

static std::string opLocation(Operation *op) {
  std::string loc;
  llvm::raw_string_ostream ls(loc);
  if (auto fl = dyn_cast<FileLineColLoc>(op->getLoc()))
    ls << llvm::sys::path::filename(fl.getFilename().getValue()) << ":" << fl.getLine();
  else if (auto fu = dyn_cast<FusedLoc>(op->getLoc()))
    if (auto fl = dyn_cast<FileLineColLoc>(fu.getLocations().front()))
      ls << llvm::sys::path::filename(fl.getFilename().getValue()) << ":" << fl.getLine() << "+";
  return loc;
}

// The arena's size for one entry at the given lengths, placed by the runtime's own planner.
static int64_t arenaBytes(func::FuncOp f, ArrayRef<int64_t> sv) {
  std::vector<kiln_buffer_info> bufs;
  for (Attribute a : f->getAttrOfType<ArrayAttr>("kiln.arena")) {
    auto r = cast<DenseI64ArrayAttr>(a).asArrayRef();
    bufs.push_back({r[0], {(uint8_t)r[1], (uint8_t)r[2], (uint8_t)r[3], (uint8_t)r[4]}, (int32_t)r[5], (int32_t)r[6]});
  }
  std::vector<int64_t> offs(bufs.size());
  int64_t arena = 0;
  if (kilnrt_arena_plan(bufs.data(), (int32_t)bufs.size(), sv.data(), offs.data(), &arena) != KILNRT_OK) return INT64_MAX;
  return arena;
}

static double paramBytesOf(ModuleOp module) {
  double bytes = 0;
  llvm::StringSet<> seen;
  module.walk([&](kiln::ParamOp p) {
    if (seen.insert(p.getName()).second) bytes += 4 * cast<RankedTensorType>(p.getType()).getNumElements();
  });
  return bytes;
}

LogicalResult checkMemoryLimit(ModuleOp module, int64_t limit) {
  if (limit <= 0) return success();
  auto bounds = module->getAttrOfType<DenseI64ArrayAttr>("kiln.seq_bounds");
  SmallVector<int64_t> sv(bounds.asArrayRef());
  while (sv.size() < 4) sv.push_back(1);
  double params = paramBytesOf(module);
  for (auto f : module.getOps<func::FuncOp>()) {
    double io = 0;
    struct Buf {
      double bytes;
      std::string what;
    };
    std::vector<Buf> bufs;
    for (unsigned i = 0; i < f.getNumArguments(); ++i) {
      double b = 4 * numel(f.getArgument(i), sv);
      io += b;
      bufs.push_back({b, "input '" + f.getArgAttrOfType<StringAttr>(i, "kiln.name").str() + "'"});
    }
    f.walk([&](Operation *op) {
      if (!isKernelOp(op)) return;
      bufs.push_back({4 * numel(op->getResult(0), sv), op->getName().stripDialect().str() + " at " + opLocation(op)});
    });
    for (Value v : f.getBody().front().getTerminator()->getOperands()) io += 4 * numel(v, sv);
    double peak = params + io + (double)arenaBytes(f, sv);
    if (peak <= (double)limit) continue;
    std::sort(bufs.begin(), bufs.end(), [](const Buf &a, const Buf &b) { return a.bytes > b.bytes; });
    auto d = f.emitError() << "the buffer plan of entry '" << f.getSymName() << "' needs " << human(peak, "B")
                           << " at the sequence-length bounds, more than the memory limit of " << human((double)limit, "B")
                           << " (--max-memory); parameters " << human(params, "B") << "; largest buffers:";
    for (size_t i = 0; i < bufs.size() && i < 3; ++i) d << " " << bufs[i].what << " " << human(bufs[i].bytes, "B") << (i < 2 ? ";" : "");
    return failure();
  }
  return success();
}

std::string costReport(ModuleOp module) {
  std::ostringstream os;
  auto names = module->getAttrOfType<ArrayAttr>("kiln.seq_names");
  auto bounds = module->getAttrOfType<DenseI64ArrayAttr>("kiln.seq_bounds");
  SmallVector<int64_t> bnd(bounds.asArrayRef());
  double paramBytes = paramBytesOf(module);
  os << "kiln cost report: FLOPs, bytes read and written per op, and the buffer plan's peak\n";
  os << "(a loop body's ops are listed once, per step; totals count them at the loop's max_steps)\n";
  os << "parameters: " << human(paramBytes, "B") << "\n";
  for (int div : {1, 2, 4}) {
    SmallVector<int64_t> sv;
    std::string at;
    for (size_t s = 0; s < bnd.size(); ++s) {
      sv.push_back(std::max<int64_t>(1, bnd[s] / div));
      at += (s ? ", " : "") + cast<StringAttr>(names[s]).str() + " = " + std::to_string(sv.back());
    }
    while (sv.size() < 4) sv.push_back(1);
    for (auto f : module.getOps<func::FuncOp>()) {
      os << "\n== entry " << f.getSymName().str() << " at " << at << (div == 1 ? " (the bound)" : "") << "\n";
      if (div == 1) {
        char hdr[160];
        snprintf(hdr, sizeof hdr, "%-4s %-20s %-44s %12s %12s %12s\n", "#", "op", "location", "FLOPs", "read", "written");
        os << hdr;
      }
      Cost total;
      int k = 0;
      f.walk([&](Operation *op) {
        if (!isKernelOp(op)) return;
        Cost c = opCost(op, sv);
        // A loop body's kernels run up to max_steps times: the totals count every step.
        int64_t times = 1;
        for (auto loop = op->getParentOfType<kiln::LoopOp>(); loop; loop = loop->getParentOfType<kiln::LoopOp>())
          times *= (int64_t)loop.getMaxSteps();
        total.flops += times * c.flops, total.read += times * c.read, total.written += times * c.written;
        if (div == 1) {
          std::string loc = opLocation(op) + (times > 1 ? " (x" + std::to_string(times) + " steps)" : "");
          char line[200];
          snprintf(line, sizeof line, "%-4d %-20s %-44s %12s %12s %12s\n", k, op->getName().stripDialect().str().c_str(),
                   loc.c_str(), human(c.flops, "").c_str(), human(c.read, "B").c_str(), human(c.written, "B").c_str());
          os << line;
        }
        ++k;
      });
      int64_t arena = arenaBytes(f, sv);
      size_t nbufs = f->getAttrOfType<ArrayAttr>("kiln.arena").size();
      double io = 0;
      for (unsigned i = 0; i < f.getNumArguments(); ++i) io += 4 * numel(f.getArgument(i), sv);
      for (Value v : f.getBody().front().getTerminator()->getOperands()) io += 4 * numel(v, sv);
      os << "total: " << human(total.flops, "FLOP") << ", " << human(total.read, "B") << " read, "
         << human(total.written, "B") << " written; peak memory " << human(paramBytes + io + arena, "B")
         << " (arena " << human(arena, "B") << " in " << nbufs << " buffers, inputs+outputs " << human(io, "B")
         << ", parameters " << human(paramBytes, "B") << ")\n";
    }
  }
  return os.str();
}

std::string kernelScheduleText(const std::string &name, const std::string &spec, const std::string &halideSchedule) {
  std::ostringstream os;
  os << "kernel " << name << "\nspec   " << spec << "\n";
  auto k = KernelSpec::parse(spec);
  if (k) {
    os << "op     " << k->kind << "\n";
    for (auto &[key, v] : k->attrs)
      if (key.rfind("s.", 0) == 0) os << "  " << key.substr(2) << " = " << v << "\n";
  }
  if (!halideSchedule.empty()) os << "\nHalide loop nest:\n" << halideSchedule;
  return os.str();
}

std::string scheduleReport(ModuleOp module) {
  std::string s;
  for (auto &k : collectKernels(module)) s += kernelScheduleText(k.name, k.spec, "") + "\n";
  return s;
}

// ---------------------------------------------------------------- orchestration -> object
LogicalResult lowerToObject(ModuleOp module, const PipelineOptions &opt, int dumpIndex, const std::string &objPath,
                            const std::string &llPath) {
  g_dump = dumpIndex;
  {
    PassManager pm(module->getContext(), ModuleOp::getOperationName());
    pm.addPass(createLowerToLLVM(LowerToLLVMOptions{opt.symbol + "_entry_", opt.target.gpu, opt.target.gpu_resident}));
    if (failed(pm.run(module))) return failure();
    dumpModule(module, opt, "kiln-lower-to-llvm");
  }
  llvm::InitializeNativeTarget();
  llvm::InitializeNativeTargetAsmPrinter();
  llvm::LLVMContext llctx;
  auto llmod = translateModuleToLLVMIR(module, llctx, "kiln_orchestration");
  if (!llmod) return module.emitError("translation of the orchestration to LLVM IR failed");
  // The orchestration is scalar glue that runs before any kernel: generic x86-64 keeps the
  // executable's CPU check (made by the runtime) the first thing to run.
  llvm::Triple triple(llvm::sys::getDefaultTargetTriple());
  std::string err;
  const llvm::Target *target = llvm::TargetRegistry::lookupTarget(triple, err);
  if (!target) return module.emitError(err);
  std::unique_ptr<llvm::TargetMachine> tm(target->createTargetMachine(
      triple, "x86-64", "", llvm::TargetOptions(), llvm::Reloc::PIC_, std::nullopt, llvm::CodeGenOptLevel::Default));
  llmod->setTargetTriple(triple);
  llmod->setDataLayout(tm->createDataLayout());
  llvm::LoopAnalysisManager lam;
  llvm::FunctionAnalysisManager fam;
  llvm::CGSCCAnalysisManager cam;
  llvm::ModuleAnalysisManager mam;
  llvm::PassBuilder pb(tm.get());
  pb.registerModuleAnalyses(mam);
  pb.registerCGSCCAnalyses(cam);
  pb.registerFunctionAnalyses(fam);
  pb.registerLoopAnalyses(lam);
  pb.crossRegisterProxies(lam, fam, cam, mam);
  pb.buildPerModuleDefaultPipeline(llvm::OptimizationLevel::O2).run(*llmod, mam);
  std::error_code ec;
  if (!llPath.empty()) {
    llvm::raw_fd_ostream os(llPath, ec);
    if (ec) return module.emitError("cannot write ") << llPath << ": " << ec.message();
    llmod->print(os, nullptr);
  }
  if (objPath.empty()) return success();
  llvm::raw_fd_ostream out(objPath, ec, llvm::sys::fs::OF_None);
  if (ec) return module.emitError("cannot write ") << objPath << ": " << ec.message();
  llvm::legacy::PassManager cg;
  if (tm->addPassesToEmitFile(cg, out, nullptr, llvm::CodeGenFileType::ObjectFile))
    return module.emitError("the target cannot emit object files");
  cg.run(*llmod);
  return success();
}

}  // namespace kiln
