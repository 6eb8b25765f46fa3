// VerifyUtils.h - what the ops' verifiers, hooks and gradient rules share (the <Family>Ops.cpp
// files of this folder).
// Verifier messages start with "expected"; dynamic dims (`?`) match anything.
#pragma once
#include <string>

#include "kiln/Dialect/KilnDialect.h"

namespace kiln::verify {

inline mlir::RankedTensorType ty(mlir::Value v) { return mlir::cast<mlir::RankedTensorType>(v.getType()); }
inline bool compatible(int64_t a, int64_t b) {
  return a == b || mlir::ShapedType::isDynamic(a) || mlir::ShapedType::isDynamic(b);
}
inline std::string d2s(int64_t d) { return mlir::ShapedType::isDynamic(d) ? "?" : std::to_string(d); }
inline double dimOf(mlir::Value v, int64_t d) { return (double)ty(v).getDimSize(d); }

inline mlir::LogicalResult expectDim(mlir::Operation *op, const char *a, int64_t da, const char *b, int64_t db) {
  if (compatible(da, db)) return mlir::success();
  return op->emitOpError() << "expected " << a << " (" << d2s(da) << ") to equal " << b << " (" << d2s(db) << ")";
}
inline mlir::LogicalResult expectRank(mlir::Operation *op, const char *role, mlir::Value v, int64_t rank) {
  if (ty(v).getRank() == rank) return mlir::success();
  return op->emitOpError() << "expected the " << role << " to have rank " << rank << ", got " << ty(v);
}

inline mlir::LogicalResult expectShape(mlir::Operation *op, const char *a, mlir::Value va, const char *b, mlir::Value vb) {
  auto at = ty(va), bt = ty(vb);
  bool same = at.getRank() == bt.getRank();
  for (int64_t d = 0; same && d < at.getRank(); ++d) same = compatible(at.getDimSize(d), bt.getDimSize(d));
  if (same) return mlir::success();
  return op->emitOpError() << "expected the " << a << " (" << at << ") and the " << b << " (" << bt << ") to have one shape";
}

// A `past` operand: [1] i32 (one position for every sequence), or [?] i32 (one per sequence of
// the op's batch, each sequence's call seeing its own: kiln-loop-sequences).
inline mlir::LogicalResult expectPast(mlir::Operation *op, mlir::Value past) {
  auto t = ty(past);
  if (t.getRank() == 1 && t.getElementType().isInteger(32) && (t.getDimSize(0) == 1 || mlir::ShapedType::isDynamic(t.getDimSize(0))))
    return mlir::success();
  return op->emitOpError() << "expected past to be a tensor<1xi32> or one position per sequence (tensor<?xi32>), got " << t;
}

// A result's lengths: `rank` static dims (the hooks then set the dynamic ones).
inline Syms lengths(int64_t rank) { return Syms(rank, -1); }

// Every operand read and the result written, `perElement` FLOPs per result element.
inline OpCost elementwiseCost(mlir::Operation *op, llvm::function_ref<double(mlir::Value)> numel, double perElement) {
  OpCost c = defaultCost(op, numel);
  c.flops = perElement * numel(op->getResult(0));
  return c;
}

// kiln.attention's and kiln.attention_grad's sparse pattern attributes and block schedule
// (AttentionOps.cpp); lq and lk the query and key lengths.
mlir::LogicalResult verifyAttentionPattern(mlir::Operation *op, int64_t lq, int64_t lk);
// The pattern's kernel attributes (one kernel key per pattern and block schedule).
void patternKernelAttrs(mlir::Operation *op, KernelAttrs &a);

}  // namespace kiln::verify
