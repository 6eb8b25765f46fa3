// SeqLengths.h - which sequence length each dynamic dim of each value is: inferred once from
// an entry's arguments (`kiln.syms`) through every op's inferSeqLengths hook. The buffer plan,
// the LLVM lowering (view extents), the cost report and the schedule's work estimate share it.
#pragma once
#include "kiln/Dialect/KilnDialect.h"
#include "llvm/ADT/DenseMap.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"

namespace kiln {

class SeqLengths {
 public:
  // A loop's carried argument has its initial value's lengths, its step number none. Fails, with
  // an error at the op, where a dynamic dim gets no length or a static dim gets one.
  static mlir::FailureOr<SeqLengths> infer(mlir::func::FuncOp f);
  // The lengths of v (every dim static for a value the function does not define).
  const Syms &of(mlir::Value v) const;
  // v's element count with each length at `values[s]`.
  double numel(mlir::Value v, llvm::ArrayRef<int64_t> values) const;

 private:
  llvm::DenseMap<mlir::Value, Syms> syms_;
  Syms none_;
};

// Whether symbol `sym` is a batch: the first factor of some batch's rows in the module's
// kiln.seq_factors (per symbol, its batch and length, or -1, -1).
inline bool isBatchSymbol(llvm::ArrayRef<int64_t> factors, int64_t sym) {
  for (size_t i = 0; sym >= 0 && 2 * i < factors.size(); ++i)
    if (factors[2 * i] == sym) return true;
  return false;
}

}  // namespace kiln
