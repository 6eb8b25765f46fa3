// kiln-checkpoint-ffn: the backward recomputes each FFN's intermediate instead of keeping it.
//
// Algorithm, per func.func that kiln-differentiate differentiated (the kiln.fill marked
// kiln.grad_seed splits its body: the forward before it, the backward from it on):
//   1. Each activation op %h of the forward (outside loops and checkpointed blocks) whose
//      operand %p is a kiln.linear with a bias and no activation, read in the forward by %h
//      alone, and whose result is read in the forward by one kiln.linear with a bias and no
//      activation, as its input: an FFN, the chain kiln-chunk-ffn fuses.
//   2. If the backward reads %p or %h, the three ops get kiln.checkpoint = a new id, after
//      every id the DSL's blocks use (the second linear too: a value the forward reads outside
//      its block is kept, not recomputed). kiln-recompute-checkpoints, next, clones what the
//      backward reads (the first linear and the activation; the second linear's result is
//      read by no gradient) into the backward and leaves the forward's copies one reader each,
//      which kiln-fuse-epilogue and kiln-chunk-ffn turn into kiln.ffn.
//      activation-only: if the backward reads %h, only the activation and the second linear
//      are marked; %p, the block's input now, is kept and %h recomputed from it.
#include "kiln/Transforms/Passes.h"
#include "kiln/Transforms/Utils.h"

namespace kiln {
#define GEN_PASS_DEF_CHECKPOINTFFN
#include "kiln/Transforms/Passes.h.inc"
}  // namespace kiln

using namespace mlir;

namespace {
void markFfns(func::FuncOp f, Operation *seed, bool activationOnly) {
  Block &body = f.getBody().front();
  auto isForward = [&](Operation *user) {
    Operation *t = body.findAncestorOpInBlock(*user);
    return t && t->isBeforeInBlock(seed);
  };
  auto forwardUsers = [&](Value v) {
    SmallVector<Operation *> users;
    for (Operation *u : v.getUsers())
      if (isForward(u)) users.push_back(u);
    return users;
  };
  auto readBack = [&](Value v) { return llvm::any_of(v.getUsers(), [&](Operation *u) { return !isForward(u); }); };

  int64_t next = 0;
  for (Operation &op : body)
    if (auto id = op.getAttrOfType<IntegerAttr>("kiln.checkpoint")) next = std::max(next, id.getInt() + 1);
  for (Operation &op : body) {
    if (&op == seed) break;
    auto act = dyn_cast<kiln::KilnActivationOpInterface>(&op);
    if (!act || op.hasAttr("kiln.checkpoint")) continue;
    auto first = op.getOperand(0).getDefiningOp<kiln::LinearOp>();
    if (!first || first->getBlock() != &body || first->hasAttr("kiln.checkpoint") || !first.getBias() ||
        first.getActivation() != kiln::ActivationKind::none)
      continue;
    SmallVector<Operation *> pUsers = forwardUsers(first.getResult()), hUsers = forwardUsers(op.getResult(0));
    if (pUsers.size() != 1 || hUsers.size() != 1) continue;
    auto second = dyn_cast<kiln::LinearOp>(hUsers.front());
    if (!second || second->hasAttr("kiln.checkpoint") || second.getX() != op.getResult(0) ||
        second.getWeight() == op.getResult(0) || !second.getBias() || second.getActivation() != kiln::ActivationKind::none)
      continue;
    if (activationOnly ? !readBack(op.getResult(0)) : !readBack(first.getResult()) && !readBack(op.getResult(0))) continue;
    auto id = IntegerAttr::get(IntegerType::get(f.getContext(), 64), next++);
    if (!activationOnly) first->setAttr("kiln.checkpoint", id);
    op.setAttr("kiln.checkpoint", id);
    second->setAttr("kiln.checkpoint", id);  // so %h counts as read inside the block, not kept for the forward
  }
}

struct CheckpointFfnPass : kiln::impl::CheckpointFfnBase<CheckpointFfnPass> {
  using CheckpointFfnBase::CheckpointFfnBase;
  void runOnOperation() override {
    for (auto f : getOperation().getOps<func::FuncOp>()) {
      Operation *seed = nullptr;
      for (Operation &op : f.getBody().front())
        if (op.hasAttr("kiln.grad_seed")) seed = &op;
      if (seed) markFfns(f, seed, activationOnly);
    }
  }
};
}  // namespace
