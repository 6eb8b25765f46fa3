// kiln-prepack-weights: GEMM weights kept in the layout their kernels read, laid out once by the
// runtime: [out, in] weights transposed to [in, out], then (CPU targets) in panels.
//
// Algorithm:
//   1. For every parameter name, collect the uses of all its kiln.param ops (a name appears in
//      every entry and region that uses it). A use qualifies for the transpose when it is the
//      weight of a kiln.linear with weight_layout "out_in", or W1 / W2 of a kiln.ffn with that
//      layout.
//   2. If every use of a 2-D parameter qualifies: each of its kiln.param ops gets the transposed
//      type and the `transposed` attribute, and each user's layout becomes "in_out".
//   3. CPU targets: if every use of a 2-D parameter reads it "in_out" as a linear's weight or
//      an FFN's W1 / W2, its kiln.param ops get the panel type [ceil(N / w), K, w] (w =
//      gemmTileN of N, the register block kiln-tile-ops gives a GEMM of N columns) and
//      `panel_cols = N`, and each user's layout becomes "panels".
//   4. CPU targets: a table read by embeddings and by GEMMs as an [out, in] weight (an output
//      head tied to the input embedding, [vocab, d]) is kept as the head's [d, vocab] weight in
//      panels: `transposed`, `panel_cols = vocab`, the GEMMs' layouts "panels" and the
//      embeddings' table_layout "panels" (a row is then read every w-th element: a few hundred
//      cache lines per token, against repacking the whole table for every forward pass).
#include "kiln/Transforms/Passes.h"
#include "kiln/Transforms/Utils.h"
#include "llvm/ADT/MapVector.h"

namespace kiln {
#define GEN_PASS_DEF_PREPACKWEIGHTS
#include "kiln/Transforms/Passes.h.inc"
}  // namespace kiln

using namespace mlir;

namespace {
using kiln::WeightLayoutKind;

// Whether `use` reads a GEMM weight in `layout`, and the name of the attribute that says so.
bool weightLayout(OpOperand &use, WeightLayoutKind layout, StringRef &attrName) {
  Operation *user = use.getOwner();
  if (auto l = dyn_cast<kiln::LinearOp>(user)) {
    attrName = "weight_layout";
    return use.getOperandNumber() == 1 && l.getWeightLayout() == layout;
  }
  if (auto f = dyn_cast<kiln::FfnOp>(user)) {
    attrName = use.getOperandNumber() == 1 ? "layout1" : "layout2";
    return (use.getOperandNumber() == 1 && f.getLayout1() == layout) || (use.getOperandNumber() == 3 && f.getLayout2() == layout);
  }
  return false;
}

// If every use of the parameter's ops reads it as a GEMM weight in layout `from`: each user
// reads it in layout `to`, and each op gets type `type`. Returns whether it did.
bool relayout(ArrayRef<kiln::ParamOp> ops, WeightLayoutKind from, WeightLayoutKind to, RankedTensorType type) {
  bool all = true, any = false;
  for (kiln::ParamOp p : ops)
    for (OpOperand &use : p->getUses()) {
      StringRef name;
      all &= weightLayout(use, from, name);
      any = true;
    }
  if (!all || !any) return false;
  for (kiln::ParamOp p : ops) {
    for (OpOperand &use : p->getUses()) {
      StringRef name;
      weightLayout(use, from, name);
      use.getOwner()->setAttr(name, kiln::WeightLayoutKindAttr::get(type.getContext(), to));
    }
    p.getResult().setType(type);
  }
  return true;
}

// Whether every use of the parameter's ops is the table of an embedding (rows) or the [out, in]
// weight of a GEMM, with at least one of each.
bool tiedTable(ArrayRef<kiln::ParamOp> ops) {
  bool table = false, gemm = false;
  for (kiln::ParamOp p : ops)
    for (OpOperand &use : p->getUses()) {
      StringRef name;
      auto e = dyn_cast<kiln::EmbeddingOp>(use.getOwner());
      if (e && use.getOperandNumber() == 0 && e.getTableLayout() == kiln::TableLayoutKind::rows) table = true;
      else if (weightLayout(use, WeightLayoutKind::out_in, name)) gemm = true;
      else return false;
    }
  return table && gemm;
}

struct PrepackWeightsPass : kiln::impl::PrepackWeightsBase<PrepackWeightsPass> {
  using PrepackWeightsBase::PrepackWeightsBase;
  void runOnOperation() override {
    llvm::MapVector<StringRef, SmallVector<kiln::ParamOp>> byName;
    getOperation().walk([&](kiln::ParamOp p) { byName[p.getName()].push_back(p); });
    for (auto &[name, ops] : byName) {
      auto t = cast<RankedTensorType>(ops.front().getType());
      if (t.getRank() != 2 || ops.front().getTransposed() || ops.front().getPanelCols()) continue;
      // 1-2. [out, in] -> [in, out].
      auto tt = RankedTensorType::get({t.getDimSize(1), t.getDimSize(0)}, t.getElementType());
      if (relayout(ops, WeightLayoutKind::out_in, WeightLayoutKind::in_out, tt)) {
        for (kiln::ParamOp p : ops) p.setTransposed(true);
        t = tt;
      }
      // 3. [K, N] -> panels [ceil(N / w), K, w].
      if (gpu) continue;
      int64_t K = t.getDimSize(0), N = t.getDimSize(1), w = kiln::gemmTileN(vectorWidth, N);
      auto pt = RankedTensorType::get({(N + w - 1) / w, K, w}, t.getElementType());
      if (relayout(ops, WeightLayoutKind::in_out, WeightLayoutKind::panels, pt)) {
        for (kiln::ParamOp p : ops) p.setPanelCols(N);
        continue;
      }
      // 4. A table tied to an output head: [vocab, d] -> panels of the [d, vocab] head.
      if (!ops.front().getTransposed() && tiedTable(ops)) {
        int64_t V = t.getDimSize(0), d = t.getDimSize(1), wv = kiln::gemmTileN(vectorWidth, V);
        auto vt = RankedTensorType::get({(V + wv - 1) / wv, d, wv}, t.getElementType());
        for (kiln::ParamOp p : ops) {
          for (OpOperand &use : p->getUses()) {
            StringRef name;
            if (weightLayout(use, WeightLayoutKind::out_in, name))
              use.getOwner()->setAttr(name, kiln::WeightLayoutKindAttr::get(&getContext(), WeightLayoutKind::panels));
            else
              use.getOwner()->setAttr("table_layout", kiln::TableLayoutKindAttr::get(&getContext(), kiln::TableLayoutKind::panels));
          }
          p.getResult().setType(vt);
          p.setTransposed(true);
          p.setPanelCols(V);
        }
      }
    }
  }
};
}  // namespace
