// kiln-prepack-weights: [out, in] weights kept as [in, out], transposed once by the runtime.
//
// Algorithm:
//   1. For every parameter name, collect the uses of all its kiln.param ops (a name appears in
//      every entry and region that uses it). A use qualifies when it is the weight of a
//      kiln.linear with weight_layout "out_in", or W1 / W2 of a kiln.ffn with that layout.
//   2. If every use of a 2-D parameter qualifies: each of its kiln.param ops gets the transposed
//      type and the `transposed` attribute, and each user's layout becomes "in_out".
#include "kiln/Transforms/Passes.h"
#include "kiln/Transforms/Utils.h"

namespace kiln {
#define GEN_PASS_DEF_PREPACKWEIGHTS
#include "kiln/Transforms/Passes.h.inc"
}  // namespace kiln

using namespace mlir;

namespace {
// The layout attribute through which `use` reads an [out, in] weight, or null.
StringAttr outInLayout(OpOperand &use, StringRef &attrName) {
  Operation *user = use.getOwner();
  if (auto l = dyn_cast<kiln::LinearOp>(user)) {
    attrName = "weight_layout";
    return use.getOperandNumber() == 1 && l.getWeightLayout() == "out_in" ? l.getWeightLayoutAttr() : StringAttr();
  }
  if (auto f = dyn_cast<kiln::FfnOp>(user)) {
    if (use.get() == f.getW1() && use.getOperandNumber() == 1 && f.getLayout1() == "out_in") {
      attrName = "layout1";
      return f.getLayout1Attr();
    }
    if (use.get() == f.getW2() && use.getOperandNumber() == 3 && f.getLayout2() == "out_in") {
      attrName = "layout2";
      return f.getLayout2Attr();
    }
  }
  return StringAttr();
}

struct PrepackWeightsPass : kiln::impl::PrepackWeightsBase<PrepackWeightsPass> {
  using PrepackWeightsBase::PrepackWeightsBase;
  void runOnOperation() override {
    llvm::StringMap<SmallVector<kiln::ParamOp>> byName;
    getOperation().walk([&](kiln::ParamOp p) { byName[p.getName()].push_back(p); });
    MLIRContext *ctx = &getContext();
    for (auto &entry : byName) {
      auto t = cast<RankedTensorType>(entry.second.front().getType());
      if (t.getRank() != 2 || entry.second.front().getTransposed()) continue;
      bool all = true, any = false;
      for (kiln::ParamOp p : entry.second)
        for (OpOperand &use : p->getUses()) {
          StringRef name;
          all &= (bool)outInLayout(use, name);
          any = true;
        }
      if (!all || !any) continue;
      auto tt = RankedTensorType::get({t.getDimSize(1), t.getDimSize(0)}, t.getElementType());
      for (kiln::ParamOp p : entry.second) {
        for (OpOperand &use : p->getUses()) {
          StringRef name;
          outInLayout(use, name);
          use.getOwner()->setAttr(name, StringAttr::get(ctx, "in_out"));
        }
        p.getResult().setType(tt);
        p.setTransposed(true);
      }
    }
  }
};
}  // namespace
