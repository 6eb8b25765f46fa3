// kiln-tile-sparse-pattern: a block schedule for every attention with a sparse pattern.
//
// Algorithm:
//   1. Block size: a user layout's own block; otherwise the option, or the largest power of two
//      not above the pattern's size, between 16 and 64 (a window of 16 visits about 2 blocks of
//      16 per row, not 2 blocks of 64).
//   2. The parts of the pattern (kiln/Support/SparsePattern.h: one, or two for a union) with
//      their query order, key order and block rule become the `kiln.sparse` dictionary, one
//      readable string per part; the kernel generator derives the same parts from the pattern.
#include "kiln/Support/SparsePattern.h"
#include "kiln/Transforms/Passes.h"
#include "kiln/Transforms/Utils.h"

namespace kiln {
#define GEN_PASS_DEF_TILESPARSEPATTERN
#include "kiln/Transforms/Passes.h.inc"
}  // namespace kiln

using namespace mlir;

namespace {
const char *orderName(kiln::sparse::Order o) {
  switch (o) {
    case kiln::sparse::Order::Identity: return "sequence";
    case kiln::sparse::Order::StrideTranspose: return "stride_transpose";
    case kiln::sparse::Order::SummaryGather: return "summary_gather";
  }
  return "";
}
const char *ruleName(kiln::sparse::Rule r) {
  switch (r) {
    case kiln::sparse::Rule::Window: return "window_to_diagonal";
    case kiln::sparse::Rule::Group: return "residue_class_to_diagonal";
    case kiln::sparse::Rule::OwnBlock: return "own_block_to_diagonal";
    case kiln::sparse::Rule::Summary: return "summaries_before_last_row";
    case kiln::sparse::Rule::Table: return "layout_table";
  }
  return "";
}

struct TileSparsePatternPass : kiln::impl::TileSparsePatternBase<TileSparsePatternPass> {
  using TileSparsePatternBase::TileSparsePatternBase;
  void runOnOperation() override {
    getOperation().walk([&](kiln::AttentionOp op) {
      kiln::sparse::Pattern p = kiln::patternOf(op);
      if (p.kind.empty()) return;
      int64_t b = block;
      if (p.kind == "layout") {
        b = p.size;
      } else if (b <= 0) {
        b = 16;
        while (b < 64 && b * 2 <= p.size) b *= 2;
      }
      kiln::mergeSchedule(op, {{"block", b}});
      Builder bld(op.getContext());
      SmallVector<NamedAttribute> entries;
      std::vector<kiln::sparse::Part> parts = p.parts();
      for (size_t i = 0; i < parts.size(); ++i) {
        std::string text = std::string("queries: ") + orderName(parts[i].q) + ", keys: " + orderName(parts[i].k) +
                           ", blocks: " + ruleName(parts[i].rule) + (parts[i].exclude != kiln::sparse::Pred::None ? ", minus part0's keys" : "");
        entries.push_back(bld.getNamedAttr("part" + std::to_string(i), bld.getStringAttr(text)));
      }
      op->setAttr("kiln.sparse", bld.getDictionaryAttr(entries));
    });
  }
};
}  // namespace
