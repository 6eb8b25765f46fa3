// kiln-tile-sparse-pattern: a block schedule for every attention with a sparse pattern, and for
// its gradients (kiln.attention_grad with the same pattern: the same block size and parts).
//
// Algorithm:
//   1. Block size: a user layout's own block; otherwise the option, or the largest power of two
//      not above the pattern's size, between 16 and 64 (a window of 16 visits about 2 blocks of
//      16 per row, not 2 blocks of 64). It goes to the schedule's `block`.
//   2. The parts of the pattern (kiln/Support/SparsePattern.h: one, or two for a union) with
//      their query order, key order, block rule and element masks become `kiln.sparse`, a
//      #kiln.sparse_schedule the kernel is generated from. A block or parts already in the IR
//      are kept: a schedule can be edited in a .mlir file and compiled as it stands.
//   3. The schedule's engine: block_sparse.
#include "kiln/Support/SparsePattern.h"
#include "kiln/Transforms/Passes.h"
#include "kiln/Transforms/Utils.h"

namespace kiln {
#define GEN_PASS_DEF_TILESPARSEPATTERN
#include "kiln/Transforms/Passes.h.inc"
}  // namespace kiln

using namespace mlir;

namespace {
struct TileSparsePatternPass : kiln::impl::TileSparsePatternBase<TileSparsePatternPass> {
  using TileSparsePatternBase::TileSparsePatternBase;
  void runOnOperation() override {
    getOperation().walk([&](Operation *op) {
      if (!isa<kiln::AttentionOp, kiln::AttentionGradOp>(op)) return;
      std::optional<kiln::sparse::Pattern> pattern = kiln::patternOf(op);
      if (!pattern) return;
      const kiln::sparse::Pattern &p = *pattern;
      int64_t b = block;
      if (p.kind == kiln::sparse::Kind::Layout) {
        b = p.size;
      } else if (b <= 0) {
        b = 16;
        while (b < 64 && b * 2 <= p.size) b *= 2;
      }
      kiln::ScheduleFields decided;
      decided.block = b;
      decided.engine = kiln::AttentionEngine::block_sparse;
      kiln::mergeSchedule(op, decided);
      if (op->getAttrOfType<kiln::SparseScheduleAttr>("kiln.sparse")) return;
      SmallVector<kiln::SparsePartAttr> parts;
      for (const kiln::sparse::Part &pt : p.patternParts()) parts.push_back(kiln::partAttr(op->getContext(), pt));
      op->setAttr("kiln.sparse", kiln::SparseScheduleAttr::get(op->getContext(), parts));
    });
  }
};
}  // namespace
