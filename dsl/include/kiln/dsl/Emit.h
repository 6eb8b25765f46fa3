// kiln/dsl/Emit.h - turn a DSL Model into a kiln-dialect MLIR module.
#pragma once
#include "kiln/dsl/Model.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"

namespace kiln {
mlir::OwningOpRef<mlir::ModuleOp> emitModel(mlir::MLIRContext &ctx, const Model &m);
}
