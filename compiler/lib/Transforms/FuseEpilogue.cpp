// kiln-fuse-epilogue: fold an activation into the linear that produces its only input.
//
// Algorithm:
//   1. Walk the kiln.relu and kiln.gelu ops.
//   2. If the operand is a kiln.linear with activation "none" and this is its only use,
//      set the linear's activation (relu, gelu_erf, gelu_tanh) and replace the activation op
//      by the linear's result.
#include "kiln/Transforms/Passes.h"
#include "kiln/Transforms/Utils.h"

namespace kiln {
#define GEN_PASS_DEF_FUSEEPILOGUE
#include "kiln/Transforms/Passes.h.inc"
}  // namespace kiln

using namespace mlir;

namespace {
struct FuseEpiloguePass : kiln::impl::FuseEpilogueBase<FuseEpiloguePass> {
  void runOnOperation() override {
    SmallVector<Operation *> acts;
    getOperation().walk([&](Operation *op) {
      if (isa<kiln::ReluOp, kiln::GeluOp>(op)) acts.push_back(op);
    });
    for (Operation *op : acts) {
      auto lin = op->getOperand(0).getDefiningOp<kiln::LinearOp>();
      if (!lin || lin.getActivation() != "none" || !lin.getResult().hasOneUse()) continue;
      std::string act = "relu";
      if (auto g = dyn_cast<kiln::GeluOp>(op)) act = g.getApproximate() == "tanh" ? "gelu_tanh" : "gelu_erf";
      lin.setActivation(act);
      // The fused op now stands for both lines of the model; keep the activation's location too.
      lin->setLoc(FusedLoc::get(op->getContext(), {lin->getLoc(), op->getLoc()}));
      op->getResult(0).replaceAllUsesWith(lin.getResult());
      op->erase();
    }
  }
};
}  // namespace
