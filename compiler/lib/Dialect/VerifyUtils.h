// VerifyUtils.h - what the ops' verifiers and hooks share (KilnOps.cpp, KilnTrainingOps.cpp).
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

// kiln.attention's and kiln.attention_grad's sparse pattern attributes and block schedule
// (KilnOps.cpp); lq and lk the query and key lengths.
mlir::LogicalResult verifyAttentionPattern(mlir::Operation *op, int64_t lq, int64_t lk);
// The pattern's kernel attributes (one kernel key per pattern and block schedule).
void patternKernelAttrs(mlir::Operation *op, KernelAttrs &a);

}  // namespace kiln::verify
