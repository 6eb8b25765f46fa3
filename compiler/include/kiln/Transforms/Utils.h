// Utils.h - helpers shared by kiln's passes.
#pragma once
#include "kiln/Support/SparsePattern.h"
#include "kiln/Dialect/KilnDialect.h"
#include "mlir/IR/BuiltinAttributes.h"

namespace kiln {
// Ops that become kernels: every kiln op except parameters, states, reshapes (views) and the
// structure (recurrent, loop, yield).
inline bool isKernelOp(mlir::Operation *op) {
  return op->getDialect() && op->getDialect()->getNamespace() == "kiln" &&
         !mlir::isa<ParamOp, StateOp, ReshapeOp, RecurrentOp, LoopOp, YieldOp>(op);
}
// The schedule dictionary of an op (empty if none).
inline mlir::DictionaryAttr scheduleOf(mlir::Operation *op) {
  if (auto d = op->getAttrOfType<mlir::DictionaryAttr>("kiln.schedule")) return d;
  return mlir::DictionaryAttr::get(op->getContext(), {});
}
// Adds entries to the op's kiln.schedule; keys already present (a user's hint) are kept.
void mergeSchedule(mlir::Operation *op, llvm::ArrayRef<std::pair<llvm::StringRef, int64_t>> entries);
// The sparse pattern an attention states (kind empty when it has none), with the block size of
// its schedule (64 until kiln-tile-sparse-pattern chose one).
inline sparse::Pattern patternOf(AttentionOp op) {
  sparse::Pattern p;
  if (!op.getPatternSize()) return p;
  p.kind = op.getMask().str();
  p.part = op.getPart() ? op.getPart()->str() : "union";
  p.size = *op.getPatternSize();
  p.summary = op.getSummary() ? *op.getSummary() : 0;
  p.causal = !op.getNoncausal();
  if (auto rows = op.getLayout())
    for (mlir::Attribute r : *rows) p.layout.push_back(mlir::cast<mlir::StringAttr>(r).getValue().str());
  if (auto b = scheduleOf(op).getAs<mlir::IntegerAttr>("block")) p.block = b.getInt();
  return p;
}
}  // namespace kiln
