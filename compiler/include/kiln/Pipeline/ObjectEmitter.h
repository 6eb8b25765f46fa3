// ObjectEmitter.h - the llvm phase: the orchestration (every entry lowered by
// kiln-lower-to-llvm to an LLVM function calling its kernels) translated to LLVM IR,
// optimized and written as an object file (or as .ll text).
#pragma once
#include <string>

#include "kiln/Pipeline/Phases.h"

namespace kiln {

// `symbol` names the model table: entries are <symbol>_entry_<name>. Empty paths: not written.
mlir::LogicalResult lowerToObject(mlir::ModuleOp module, const TargetInfo &target, const std::string &symbol,
                                  IRDumps &dumps, const std::string &objPath, const std::string &llPath);

}  // namespace kiln
