// Utils.h - helpers shared by kiln's passes.
#pragma once
#include "kiln/Dialect/KilnDialect.h"
#include "mlir/IR/BuiltinAttributes.h"

namespace kiln {
// Ops that become kernels: every kiln op except parameters, states and reshapes (views).
inline bool isKernelOp(mlir::Operation *op) {
  return op->getDialect() && op->getDialect()->getNamespace() == "kiln" && !mlir::isa<ParamOp, StateOp, ReshapeOp>(op);
}
// The schedule dictionary of an op (empty if none).
inline mlir::DictionaryAttr scheduleOf(mlir::Operation *op) {
  if (auto d = op->getAttrOfType<mlir::DictionaryAttr>("kiln.schedule")) return d;
  return mlir::DictionaryAttr::get(op->getContext(), {});
}
// Adds entries to the op's kiln.schedule; keys already present (a user's hint) are kept.
void mergeSchedule(mlir::Operation *op, llvm::ArrayRef<std::pair<llvm::StringRef, int64_t>> entries);
}  // namespace kiln
