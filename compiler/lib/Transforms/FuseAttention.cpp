// kiln-fuse-attention: fold a softmax(q·kᵀ·scale + mask)·v chain of separate ops into one
// kiln.attention, whose kernel never materializes the score matrix.
//
// Algorithm, for each kiln.softmax %p:
//   1. Walk up from the softmax operand: an optional kiln.add of a kiln.mask (the mask kind),
//      then any number of kiln.scale (their product is the scale), then a kiln.matmul or
//      kiln.batch_matmul with transpose_b = true: its operands are q and k.
//   2. The softmax must have exactly one user, a matmul of the same rank with transpose_b =
//      false whose left operand is %p: its right operand is v.
//   3. Every intermediate (scores, scaled, masked) must have no other user, or it would still
//      have to be computed: then the chain is left alone.
//   4. Build kiln.attention(q, k, v) (2-D chains through [1, L, d] reshapes, which are views),
//      replace the second matmul, and erase the chain.
#include "kiln/Transforms/Passes.h"
#include "kiln/Transforms/Utils.h"
#include "mlir/IR/Builders.h"

namespace kiln {
#define GEN_PASS_DEF_FUSEATTENTION
#include "kiln/Transforms/Passes.h.inc"
}  // namespace kiln

using namespace mlir;

namespace {

// The q·kᵀ matmul, if `v` is one (either rank), with its operands.
bool matchScores(Value v, Value &q, Value &k) {
  if (auto mm = v.getDefiningOp<kiln::MatMulOp>()) {
    if (!mm.getTransposeB()) return false;
    q = mm.getLhs(), k = mm.getRhs();
    return true;
  }
  if (auto bm = v.getDefiningOp<kiln::BatchMatMulOp>()) {
    if (!bm.getTransposeB()) return false;
    q = bm.getLhs(), k = bm.getRhs();
    return true;
  }
  return false;
}

Value to3d(OpBuilder &b, Location loc, Value v) {
  auto t = cast<RankedTensorType>(v.getType());
  if (t.getRank() == 3) return v;
  auto t3 = RankedTensorType::get({1, t.getDimSize(0), t.getDimSize(1)}, t.getElementType());
  return kiln::ReshapeOp::create(b, loc, t3, v);
}

struct FuseAttentionPass : kiln::impl::FuseAttentionBase<FuseAttentionPass> {
  void runOnOperation() override {
    SmallVector<kiln::SoftmaxOp> softmaxes;
    getOperation().walk([&](kiln::SoftmaxOp s) { softmaxes.push_back(s); });
    for (kiln::SoftmaxOp sm : softmaxes) {
      SmallVector<Operation *> chain;  // ops to erase once fused, consumer first
      Value cur = sm.getInput();
      kiln::MaskKind mask = kiln::MaskKind::none;
      if (auto add = cur.getDefiningOp<kiln::AddOp>()) {
        auto m = add.getRhs().getDefiningOp<kiln::MaskOp>();
        if (!m || add.getRhs().getType() != add.getLhs().getType()) continue;
        mask = m.getKind();
        chain.push_back(add);
        cur = add.getLhs();
      }
      double scale = 1.0;
      while (auto s = cur.getDefiningOp<kiln::ScaleOp>()) {
        scale *= s.getFactor().convertToDouble();
        chain.push_back(s);
        cur = s.getInput();
      }
      Value q, k;
      if (!matchScores(cur, q, k)) continue;
      chain.push_back(cur.getDefiningOp());
      // 2. The consumer: p·v.
      if (!sm.getResult().hasOneUse()) continue;
      Operation *user = *sm.getResult().getUsers().begin();
      Value v;
      if (auto mm = dyn_cast<kiln::MatMulOp>(user)) {
        if (mm.getTransposeB() || mm.getLhs() != sm.getResult()) continue;
        v = mm.getRhs();
      } else if (auto bm = dyn_cast<kiln::BatchMatMulOp>(user)) {
        if (bm.getTransposeB() || bm.getLhs() != sm.getResult()) continue;
        v = bm.getRhs();
      } else {
        continue;
      }
      // 3. Nothing else may read the intermediates (the mask op reads the scores only for their
      //    shape, and goes away with the chain).
      bool shared = false;
      llvm::SmallPtrSet<Operation *, 8> inChain(chain.begin(), chain.end());
      for (Operation *op : chain) {
        int others = 0;
        for (Operation *u : op->getResult(0).getUsers()) {
          if (auto m = dyn_cast<kiln::MaskOp>(u))
            shared |= !m.getResult().hasOneUse() || !inChain.count(*m.getResult().getUsers().begin());
          else
            ++others;
        }
        shared |= others != 1;
      }
      if (shared) continue;
      // 4. Fuse.
      OpBuilder b(user);
      Location loc = FusedLoc::get(&getContext(), {chain.back()->getLoc(), sm.getLoc(), user->getLoc()});
      Value q3 = to3d(b, loc, q), k3 = to3d(b, loc, k), v3 = to3d(b, loc, v);
      auto qt = cast<RankedTensorType>(q3.getType());
      auto vt = cast<RankedTensorType>(v3.getType());
      auto rt = RankedTensorType::get({qt.getDimSize(0), qt.getDimSize(1), vt.getDimSize(2)}, qt.getElementType());
      Value att = kiln::AttentionOp::create(b, loc, rt, Type(), q3, k3, v3, Value(), kiln::MaskKindAttr::get(&getContext(), mask),
                                            b.getF32FloatAttr((float)scale), UnitAttr(), IntegerAttr(), IntegerAttr(),
                                            kiln::PatternPartAttr(), ArrayAttr(), UnitAttr(), UnitAttr())
                      .getResult();
      Value result = att;
      if (user->getResult(0).getType() != rt)
        result = kiln::ReshapeOp::create(b, loc, user->getResult(0).getType(), att);
      user->getResult(0).replaceAllUsesWith(result);
      user->erase();
      sm.erase();
      for (Operation *op : chain) {
        Value maskOperand;
        if (auto add = dyn_cast<kiln::AddOp>(op)) maskOperand = add.getRhs();
        op->erase();
        if (maskOperand && maskOperand.use_empty()) maskOperand.getDefiningOp()->erase();
      }
    }
  }
};
}  // namespace
