// kiln-recompute-checkpoints: gradient checkpointing on a differentiated entry.
//
// Algorithm, per func.func that kiln-differentiate differentiated (its seed, the kiln.fill
// marked kiln.grad_seed, splits the body: the forward before it, the backward from it on):
//   1. Per checkpointed block (forward ops marked kiln.checkpoint = id; parameters and states
//      are references, not computation, and stay): the values it defines that the backward
//      reads and that no forward op outside the block reads (a block's output read by the next
//      block is that block's input, kept anyway).
//   2. The block's ops those values depend on inside the block, cloned in order just before the
//      backward's first read of any of them (marked kiln.recomputed = id); the backward reads
//      the clones. The originals die in the forward, so kiln-plan-buffers frees them there;
//      during the backward only one block's recomputed activations are alive at a time.
//   3. The entry records what its backward costs (with reversible layers' reconstructions) at the sequence bounds (kiln.backward:
//      saved_bytes, the forward values the backward reads; recomputed_flops and
//      recomputed_ops), which the cost report prints.
// A block that writes a state in place (a KV cache) cannot be run twice: an error at its op.
#include "kiln/Dialect/SeqLengths.h"
#include "kiln/Transforms/Passes.h"
#include "kiln/Transforms/Utils.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/SetVector.h"
#include "mlir/IR/IRMapping.h"

namespace kiln {
#define GEN_PASS_DEF_RECOMPUTECHECKPOINTS
#include "kiln/Transforms/Passes.h.inc"
}  // namespace kiln

using namespace mlir;

namespace {
bool isReference(Operation *op) { return isa<kiln::ParamOp, kiln::StateOp>(op); }

LogicalResult recompute(func::FuncOp f, Operation *seed, ArrayRef<int64_t> bounds) {
  Block &body = f.getBody().front();
  // The op of the body that holds `user` (a loop body's op counts as its loop).
  auto top = [&](Operation *user) { return body.findAncestorOpInBlock(*user); };
  auto isBackward = [&](Operation *op) { return op == seed || seed->isBeforeInBlock(op); };

  // 1. The blocks, in program order.
  llvm::MapVector<int64_t, SmallVector<Operation *>> blocks;
  for (Operation &op : body) {
    if (&op == seed) break;
    if (auto id = op.getAttrOfType<IntegerAttr>("kiln.checkpoint"); id && !isReference(&op))
      blocks[id.getInt()].push_back(&op);
  }
  SmallVector<Operation *> clones;
  for (auto &[id, ops] : blocks) {
    llvm::SmallPtrSet<Operation *, 32> inBlock(ops.begin(), ops.end());
    llvm::SetVector<Value> targets;
    llvm::DenseSet<Value> kept;  // read by the forward outside the block: alive anyway
    Operation *first = nullptr;  // the backward's first read of a target
    for (Operation *op : ops)
      for (Value r : op->getResults()) {
        bool readBack = false;
        Operation *firstHere = nullptr;
        for (Operation *user : r.getUsers()) {
          Operation *t = top(user);
          if (!t || inBlock.count(t)) continue;
          if (!isBackward(t)) {
            kept.insert(r);
          } else {
            readBack = true;
            if (!firstHere || t->isBeforeInBlock(firstHere)) firstHere = t;
          }
        }
        if (!readBack || kept.count(r)) continue;
        targets.insert(r);
        if (!first || firstHere->isBeforeInBlock(first)) first = firstHere;
      }
    if (targets.empty()) continue;
    // 2. The ops the targets need inside the block, down to its inputs and the kept values.
    llvm::SmallPtrSet<Operation *, 32> need;
    SmallVector<Value> stack(targets.begin(), targets.end());
    while (!stack.empty()) {
      Operation *d = stack.pop_back_val().getDefiningOp();
      if (!d || !inBlock.count(d) || !need.insert(d).second) continue;
      for (Value o : d->getOperands())
        if (!kept.count(o)) stack.push_back(o);
    }
    for (Operation *op : ops)
      if (need.count(op) && kiln::writesInPlace(op))
        return op->emitError("kiln-recompute-checkpoints: a checkpointed block cannot write a state in place (")
               << op->getName() << "): its forward runs again in the backward";
    OpBuilder b(first);
    IRMapping map;
    SmallVector<Operation *> mine;
    for (Operation *op : ops) {
      if (!need.count(op)) continue;
      Operation *c = b.clone(*op, map);
      c->removeAttr("kiln.checkpoint");
      c->setAttr("kiln.recomputed", b.getI64IntegerAttr(id));
      mine.push_back(c);
    }
    llvm::SmallPtrSet<Operation *, 32> isClone(mine.begin(), mine.end());
    for (Value r : targets)
      r.replaceUsesWithIf(map.lookup(r), [&](OpOperand &u) {
        Operation *t = top(u.getOwner());
        return t && !isClone.count(t) && isBackward(t);
      });
    clones.append(mine);
  }

  // 3. What the backward costs at the bounds (known from the model: kilnc and the DSL set them).
  // Reversible layers' reconstructions (kiln-reverse-layers) count as recomputed too.
  for (Operation &op : body)
    if (op.hasAttr("kiln.reconstructed")) clones.push_back(&op);
  Builder b(f.getContext());
  auto opsAttr = b.getNamedAttr("recomputed_ops", b.getI64IntegerAttr((int64_t)clones.size()));
  if (bounds.empty()) {
    f->setAttr("kiln.backward", b.getDictionaryAttr({opsAttr}));
    return success();
  }
  FailureOr<kiln::SeqLengths> lengths = kiln::SeqLengths::infer(f);
  if (failed(lengths)) return failure();
  SmallVector<int64_t> at(bounds);
  auto numel = [&](Value v) { return lengths->numel(v, at); };
  double saved = 0, flops = 0;
  for (Operation &op : body) {
    if (&op == seed) break;
    if (isReference(&op)) continue;
    for (Value r : op.getResults())
      if (llvm::any_of(r.getUsers(), [&](Operation *u) {
            Operation *t = top(u);
            return t && isBackward(t) && !t->hasTrait<OpTrait::IsTerminator>();  // a result is no saved activation
          }))
        saved += numel(r) * (double)cast<RankedTensorType>(r.getType()).getElementTypeBitWidth() / 8;
  }
  for (Operation *c : clones)
    if (kiln::isKernelOp(c)) flops += cast<kiln::KilnOpInterface>(c).getCost(numel).flops;
  f->setAttr("kiln.backward", b.getDictionaryAttr({b.getNamedAttr("saved_bytes", b.getI64IntegerAttr((int64_t)saved)),
                                                   b.getNamedAttr("recomputed_flops", b.getF64FloatAttr(flops)), opsAttr}));
  return success();
}

struct RecomputeCheckpointsPass : kiln::impl::RecomputeCheckpointsBase<RecomputeCheckpointsPass> {
  void runOnOperation() override {
    ModuleOp m = getOperation();
    SmallVector<int64_t> bounds;
    if (auto bnd = m->getAttrOfType<DenseI64ArrayAttr>("kiln.seq_bounds"))
      bounds.assign(bnd.asArrayRef().begin(), bnd.asArrayRef().end());
    for (auto f : m.getOps<func::FuncOp>()) {
      Operation *seed = nullptr;
      for (Operation &op : f.getBody().front())
        if (op.hasAttr("kiln.grad_seed")) seed = &op;
      if (seed && failed(recompute(f, seed, bounds))) return signalPassFailure();
    }
  }
};
}  // namespace
