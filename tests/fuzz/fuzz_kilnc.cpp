// libFuzzer target for kilnc's input: a kiln-dialect module, from parsing through the kernels
// phase and what reads its result (the kernel specs, the cost and schedule reports, the memory
// limit, the runtime table), without Halide. The module is verified after parsing and after
// every pass (the pass manager's verifier); a malformed module must end in a diagnostic, never
// a crash, an ASan report or undefined behaviour. Each input gets a fresh context.
#include <cstdint>
#include <string>

#include "kiln/Pipeline/CostReport.h"
#include "kiln/Pipeline/MemoryLimit.h"
#include "kiln/Pipeline/ModelTable.h"
#include "kiln/Pipeline/Phases.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"

// MLIR's uniquer allocates attribute storage from LLVM bump allocators shared between this
// instrumented binary and the uninstrumented libMLIR: the allocator's inline code compiled here
// poisons a fresh slab, libMLIR's copy hands out pieces of it without unpoisoning them, and ASan
// reports a use-after-poison that is not one. Manual poisoning is switched off; heap, stack and
// global checks stay on.
extern "C" const char *__asan_default_options() { return "allow_user_poisoning=0"; }

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  mlir::DialectRegistry registry;
  kiln::registerKilnDialects(registry);
  mlir::MLIRContext ctx(registry, mlir::MLIRContext::Threading::DISABLED);
  ctx.loadAllAvailableDialects();
  // Diagnostics are the expected outcome of most inputs: counted, not printed.
  int diagnostics = 0;
  mlir::ScopedDiagnosticHandler quiet(&ctx, [&](mlir::Diagnostic &) {
    ++diagnostics;
    return mlir::success();
  });
  std::string text((const char *)data, size);
  mlir::OwningOpRef<mlir::ModuleOp> module = mlir::parseSourceString<mlir::ModuleOp>(text, &ctx);
  if (!module || mlir::failed(mlir::verify(*module)) || mlir::failed(kiln::verifyInterface(*module))) return 0;
  kiln::PhaseOptions opt;
  opt.target = *kiln::resolveTarget("x86-64-avx512");
  for (kiln::Phase p : {kiln::Phase::Fused, kiln::Phase::Tiled, kiln::Phase::Scheduled, kiln::Phase::Kernels}) {
    mlir::PassManager pm(&ctx, mlir::ModuleOp::getOperationName());
    pm.enableVerifier(true);
    kiln::buildPhasePipeline(pm, p, opt);
    if (mlir::failed(pm.run(*module))) return 0;
  }
  // What the driver does with the kernels phase's module before generating any kernel.
  (void)kiln::checkMemoryLimit(*module, int64_t(1) << 40);
  std::string report = kiln::costReport(*module) + kiln::scheduleReport(*module);
  std::string table = kiln::modelInfoSource(*module, opt.target, "fuzz", "0", "0", "kiln_model");
  return (int)(report.size() + table.size()) < 0;
}
