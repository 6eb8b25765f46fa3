// ObjectEmitter.cpp - the orchestration to LLVM IR and an object file (see ObjectEmitter.h).
#include "kiln/Pipeline/ObjectEmitter.h"

#include "kiln/Transforms/Passes.h"
#include "llvm/IR/LegacyPassManager.h"
#include "llvm/IR/Module.h"
#include "llvm/MC/TargetRegistry.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/TargetSelect.h"
#include "llvm/Support/raw_ostream.h"
#include "llvm/Target/TargetMachine.h"
#include "llvm/Target/TargetOptions.h"
#include "llvm/TargetParser/Host.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Target/LLVMIR/Export.h"

using namespace mlir;

namespace kiln {

LogicalResult lowerToObject(ModuleOp module, const TargetInfo &target, const std::string &symbol, IRDumps &dumps,
                            const std::string &objPath, const std::string &llPath) {
  {
    PassManager pm(module->getContext(), ModuleOp::getOperationName());
    pm.addPass(createLowerToLLVM(LowerToLLVMOptions{symbol + "_entry_", gpuApiName(target.gpu), target.gpu_resident}));
    dumps.attach(pm);
    if (failed(pm.run(module))) return failure();
  }
  llvm::InitializeNativeTarget();
  llvm::InitializeNativeTargetAsmPrinter();
  llvm::LLVMContext llctx;
  auto llmod = translateModuleToLLVMIR(module, llctx, "kiln_orchestration");
  if (!llmod) return module.emitError("translation of the orchestration to LLVM IR failed");
  // The orchestration is scalar glue that runs before any kernel: generic x86-64 keeps the
  // executable's CPU check (made by the runtime) the first thing to run. It is compiled without
  // IR optimization and with LLVM's fast instruction selection: for GPT-2 small (3 entries, 25k
  // lines of IR) O2 and the default code generator took 0.36 s and 0.42 s of a 1.2 s warm
  // compile, against 0.04 s in all now; its functions take 0.02% of a decode run's samples
  // either way, and their stack frames stay about 1 KiB.
  llvm::Triple triple(llvm::sys::getDefaultTargetTriple());
  std::string err;
  const llvm::Target *llvmTarget = llvm::TargetRegistry::lookupTarget(triple, err);
  if (!llvmTarget) return module.emitError(err);
  std::unique_ptr<llvm::TargetMachine> tm(llvmTarget->createTargetMachine(
      triple, "x86-64", "", llvm::TargetOptions(), llvm::Reloc::PIC_, std::nullopt, llvm::CodeGenOptLevel::None));
  llmod->setTargetTriple(triple);
  llmod->setDataLayout(tm->createDataLayout());
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
