// DslEmitter.h - a DSL Model (dsl/) as a kiln-dialect module: one func.func per entry point,
// one op per node, each located at the user's file:line.
#pragma once
#include "kiln/dsl/Model.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"

namespace kiln {
mlir::OwningOpRef<mlir::ModuleOp> emitModel(mlir::MLIRContext &ctx, const Model &m);
}
