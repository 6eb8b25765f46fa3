// Compile.cpp - the driver's decisions from its flags, the phases up to the kernels, the
// reports (--emit=mlir, cost, schedule) and the kernels (generated or reused from the cache).
#include <cstdio>
#include <fstream>
#include <sstream>

#include "DriverImpl.h"
#include "kiln/Codegen/KernelCache.h"
#include "kiln/Pipeline/CostReport.h"
#include "kiln/Pipeline/MemoryLimit.h"
#include "llvm/Support/raw_ostream.h"

namespace fs = std::filesystem;

namespace kiln {

static std::string slurp(const std::string &path) {
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// What to produce and how far to compile, from --emit, --compile-to and the target flags.
void Driver::Impl::decide() {
  auto t = resolveTarget(target);
  if (!t) throw UserError{"unknown --target '" + target + "' (host, x86-64-avx512, x86-64-avx512bf16, x86-64-avx2, x86-64-sse41, cuda, opencl)"};
  tgt = *t;
  emit = *parseEmit(emitFlag);
  if (emit == Emit::Ptx && tgt.gpu != GpuApi::Cuda) throw UserError{"--emit=ptx needs --target=cuda"};
  if (gpuBuffers == GpuBuffers::device && !tgt.isGpu()) throw UserError{"--gpu-buffers=device needs --target=cuda or opencl"};
  tgt.gpu_resident = gpuBuffers == GpuBuffers::device;
  if (emit == Emit::Ptx && output.empty()) throw UserError{"-o DIR is required for --emit=ptx (one <kernel>.ptx per kernel)"};
  upto = *parsePhase(compileTo);
  // An executable asked for with an earlier --compile-to: what that phase produces.
  if (emit == Emit::Exe && upto != Phase::Exe) emit = upto <= Phase::Kernels ? Emit::Mlir : Emit::Llvm;
  switch (emit) {
    case Emit::Mlir: upto = std::min(upto, Phase::Kernels); break;
    case Emit::Cost:
    case Emit::Schedule: upto = std::max(upto, Phase::Kernels); break;
    case Emit::Llvm:
    case Emit::Obj: upto = std::max(upto, Phase::LLVM); break;
    case Emit::HalideStmt:
    case Emit::Ptx:
    case Emit::Lib:
    case Emit::Exe: upto = Phase::Exe; break;
  }
  if ((emit == Emit::Exe || emit == Emit::Lib || emit == Emit::Obj) && output.empty())
    throw UserError{std::string("-o PATH is required for --emit=") + emitName(emit)};
  if (symbol != "kiln_model" && emit != Emit::Lib) throw UserError{"--lib-symbol applies to --emit=lib only"};
  phases.target = tgt;
  phases.ffn_chunk = ffnChunk;
  phases.recompute_ffn = recomputeFfn;
  phases.ffn_grad_chunk = ffnGradChunk;
  phases.reversible = reversibleBackward;
  phases.precision = precision;
}

int Driver::Impl::compile(mlir::MLIRContext &ctx, mlir::ModuleOp module) {
  (void)ctx;
  decide();
  progress("compiling " + name + " for " + tgt.name);
  if (!dumpDir.empty()) {
    std::error_code ec;
    fs::create_directories(dumpDir, ec);
    if (ec) throw UserError{"cannot create --dump-dir '" + dumpDir + "': " + ec.message()};
    for (auto &e : fs::directory_iterator(dumpDir)) {  // stale dumps would mislead
      auto ext = e.path().extension();
      if (ext == ".mlir" || ext == ".stmt" || ext == ".txt" || ext == ".ll" || ext == ".ptx") fs::remove(e.path());
    }
  }
  IRDumps dumps(dumpDir, printIR);
  if (mlir::failed(runPhases(module, phases, std::min(upto, Phase::Kernels), dumps, [this](const std::string &s) { progress(s); })))
    throw UserError{"compilation of '" + name + "' failed (see the errors above)"};
  if (upto >= Phase::Kernels && mlir::failed(checkMemoryLimit(module, memoryLimit())))
    throw UserError{"'" + name + "' does not fit the memory limit (see above)"};
  if (emit == Emit::Mlir) {
    std::string s;
    llvm::raw_string_ostream os(s);
    module->print(os);
    writeText(output, s);
    return 0;
  }
  std::string cost = costReport(module);
  if (!dumpDir.empty()) writeText(dumpDir + "/cost.txt", cost);
  if (emit == Emit::Cost) {
    writeText(output, cost);
    return 0;
  }
  if (emit == Emit::Schedule) {
    writeText(output, scheduleReport(module));
    return 0;
  }
  Kernels kernels = buildKernels(module);
  if (emit == Emit::HalideStmt || emit == Emit::Ptx) return 0;
  return link(module, kernels, dumps);
}

// One Halide kernel per distinct spec, reused from the cache when present; their schedules and
// statements into the dump folder; --emit=halide-stmt and --emit=ptx written here.
Driver::Impl::Kernels Driver::Impl::buildKernels(mlir::ModuleOp module) {
  std::vector<KernelRef> refs = collectKernels(module);
  Kernels out;
  std::string cache = cacheDir.empty() ? defaultCache() : cacheDir;
  std::error_code ec;
  fs::create_directories(cache, ec);
  if (ec) throw UserError{"cannot create the kernel cache '" + cache + "': " + ec.message()};
  auto k0 = std::chrono::steady_clock::now();
  int reused = 0;
  std::string stmts;
  for (size_t i = 0; i < refs.size(); ++i) {
    const KernelRef &k = refs[i];
    // A kernel with AVX-512 BF16 dot products: the executable checks for them at start-up.
    if (k.spec.schedule.precision == OperandPrecision::bf16_dot && tgt.cpu_features.find("avx512bf16") == std::string::npos)
      tgt.cpu_features += ",avx512bf16";
    KernelArtifacts art;
    std::string err;
    if (!buildKernel(k.name, k.spec, tgt, cache, &art, &err)) throw InternalError{err};
    reused += art.cached;
    if (!art.cached) progress("kernel " + std::to_string(i + 1) + "/" + std::to_string(refs.size()) + " " + k.name);
    out.objects.push_back(art.object);
    bool hasPtx = !art.ptx.empty() && fs::file_size(art.ptx) > 0;  // a kernel without one runs on the host
    if (!dumpDir.empty()) {
      writeText(dumpDir + "/" + k.name + ".schedule.txt", kernelScheduleText(k.name, k.spec, art.schedule));
      fs::copy_file(art.stmt, dumpDir + "/" + k.name + ".stmt", fs::copy_options::overwrite_existing);
      if (hasPtx) fs::copy_file(art.ptx, dumpDir + "/" + k.name + ".ptx", fs::copy_options::overwrite_existing);
    }
    if (emit == Emit::Ptx && hasPtx) {
      fs::create_directories(output, ec);
      fs::copy_file(art.ptx, output + "/" + k.name + ".ptx", fs::copy_options::overwrite_existing);
    }
    if (emit == Emit::HalideStmt) stmts += "// ---- " + k.name + "\n" + slurp(art.stmt) + "\n";
  }
  std::string err;
  if (!buildHalideRuntime(tgt.halide, cache, &out.runtime, &err)) throw InternalError{err};
  char line[160];
  snprintf(line, sizeof line, "phase kernels: %zu kernels (%d from the cache) in %.2f s", refs.size(), reused,
           std::chrono::duration<double>(std::chrono::steady_clock::now() - k0).count());
  progress(line);
  if (emit == Emit::HalideStmt) writeText(output, stmts);
  if (emit == Emit::Ptx) progress("wrote the kernels' PTX to " + output);
  return out;
}

}  // namespace kiln
