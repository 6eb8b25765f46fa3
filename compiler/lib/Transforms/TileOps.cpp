// kiln-tile-ops: choose tile sizes for every compute op.
//
// Algorithm:
//   1. linear / matmul / batch_matmul: a register tile of tile_m rows x tile_n columns, with
//      tile_n = 4 vectors (capped by the column count rounded up to a vector) and tile_m = 4
//      rows; 4 x 4 accumulator vectors fit the 32 AVX-512 (or 16 AVX2) registers with room for
//      the operands.
//   2. attention: a query block of 8 rows (the score strip is 8 x Lk per task).
//   3. row-wise ops (norms, softmax, elementwise, copies): rows_per_task = enough rows that one
//      task touches about 16 KiB.
#include "kiln/Transforms/Passes.h"
#include "kiln/Transforms/Utils.h"

namespace kiln {
#define GEN_PASS_DEF_TILEOPS
#include "kiln/Transforms/Passes.h.inc"

void mergeSchedule(mlir::Operation *op, llvm::ArrayRef<std::pair<llvm::StringRef, int64_t>> entries) {
  mlir::NamedAttrList list(scheduleOf(op));
  mlir::Builder b(op->getContext());
  for (auto &[k, v] : entries)
    if (!list.get(k)) list.set(k, b.getI64IntegerAttr(v));  // a decision already made (a user hint) stays
  op->setAttr("kiln.schedule", list.getDictionary(op->getContext()));
}
}  // namespace kiln

using namespace mlir;

namespace {
struct TileOpsPass : kiln::impl::TileOpsBase<TileOpsPass> {
  using TileOpsBase::TileOpsBase;
  void runOnOperation() override {
    int64_t vec = vectorWidth;
    getOperation().walk([&](Operation *op) {
      if (!kiln::isKernelOp(op)) return;
      auto rt = cast<RankedTensorType>(op->getResult(0).getType());
      int64_t cols = rt.getDimSize(rt.getRank() - 1);
      if (isa<kiln::LinearOp, kiln::MatMulOp, kiln::BatchMatMulOp, kiln::FfnOp>(op)) {
        int64_t tn = 4 * vec;
        if (!ShapedType::isDynamic(cols)) tn = std::min(tn, (cols + vec - 1) / vec * vec);
        kiln::mergeSchedule(op, {{"tile_m", 4}, {"tile_n", tn}});
      } else if (isa<kiln::AttentionOp>(op)) {
        kiln::mergeSchedule(op, {{"q_block", 8}});
      } else {
        int64_t width = ShapedType::isDynamic(cols) ? 64 : cols;
        int64_t rows = std::max<int64_t>(1, 4096 / std::max<int64_t>(1, width));
        kiln::mergeSchedule(op, {{"rows_per_task", rows}});
      }
    });
  }
};
}  // namespace
