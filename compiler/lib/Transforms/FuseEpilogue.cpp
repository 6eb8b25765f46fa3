// kiln-fuse-epilogue: fold an activation into the linear that produces its only input.
//
// Algorithm:
//   1. Walk the activation ops (those with KilnActivationOpInterface).
//   2. If the operand is a kiln.linear with activation none and this is its only use, set the
//      linear's activation to the op's and replace the activation op by the linear's result.
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
    SmallVector<kiln::KilnActivationOpInterface> acts;
    getOperation().walk([&](kiln::KilnActivationOpInterface op) { acts.push_back(op); });
    for (kiln::KilnActivationOpInterface act : acts) {
      Operation *op = act.getOperation();
      auto lin = op->getOperand(0).getDefiningOp<kiln::LinearOp>();
      if (!lin || lin.getActivation() != kiln::ActivationKind::none || !lin.getResult().hasOneUse()) continue;
      lin.setActivation(act.getActivation());
      // The fused op now stands for both lines of the model; keep the activation's location too.
      lin->setLoc(FusedLoc::get(op->getContext(), {lin->getLoc(), op->getLoc()}));
      op->getResult(0).replaceAllUsesWith(lin.getResult());
      op->erase();
    }
  }
};
}  // namespace
