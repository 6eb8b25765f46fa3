// ModelTable.h - the runtime table of a compiled model (kilnrt/model.h's kiln_model_info) as C
// source, from the module after the kernels phase: names, shapes, the buffer plan, the entries.
#pragma once
#include <string>

#include "kiln/Pipeline/Target.h"
#include "mlir/IR/BuiltinOps.h"

namespace kiln {

// `symbol` names the table; entry functions are <symbol>_entry_<entry>.
std::string modelInfoSource(mlir::ModuleOp module, const TargetInfo &target, const std::string &modelName,
                            const std::string &version, const std::string &hash, const std::string &symbol);

}  // namespace kiln
