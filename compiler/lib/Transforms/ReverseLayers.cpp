// kiln-reverse-layers: the backward of a reversible stack reconstructs each layer's input from
// its output instead of keeping the layer's activations (RevNet; the Reformer's reversible
// layers, as trax's reverse_and_grad does it).
//
// A reversible layer (the DSL's reversible(x, F, G): ops marked kiln.reversible = [layer, part],
// part 0 the glue, 1 F, 2 G) is, in the forward:
//   x1 = slice x [0, c)   x2 = slice x [c, 2c)   y1 = x1 + F(x2)   y2 = x2 + G(y1)   y = concat y1, y2
// Algorithm, per entry kiln-differentiate differentiated (its kiln.grad_seed splits the body):
//   1. The layers, in program order, each checked to have that form.
//   2. From the last layer to the first: at the backward's first read of any of the layer's
//      values, from the layer's output as the backward has it (the last layer's y, kept; else
//      the halves the next layer reconstructed as its input, which is this layer's output):
//        y1' y2' = the halves   G' = G(y1') cloned   x2' = y2' - G'   F' = F(x2') cloned   x1' = y1' - F'
//      (marked kiln.reconstructed = layer). The backward reads the clones and x1', x2', y1',
//      y2' in place of the forward's values, and [x1', x2'] in place of the layer's input x.
//      G and F run once more in the backward, on the inputs they had in the forward up to
//      rounding: the same ops give the activations their backward reads (one recomputation
//      serves both), as trax and Hugging Face's ReformerLayer.backward_pass do. LSH attention's
//      buckets and their order (lsh_hash, lsh_sort) are not recomputed: the clones read the
//      forward's, kept (a few int32 per position and round), so rounding cannot move a position
//      to another bucket.
//   3. Nothing of a layer is then read by the backward but the stack's final output: the
//      forward's activations die in the forward (kiln-plan-buffers frees them there) and the
//      backward holds one layer's reconstruction at a time, so the activation memory of a
//      reversible stack does not grow with its depth.
// Only the ops at an entry's top level count (a reversible layer inside a recurrent step is
// differentiated as stored). F or G writing a state in place cannot run twice: an error.
#include "kiln/Transforms/Passes.h"
#include "kiln/Transforms/Utils.h"
#include "llvm/ADT/MapVector.h"
#include "mlir/IR/IRMapping.h"

namespace kiln {
#define GEN_PASS_DEF_REVERSELAYERS
#include "kiln/Transforms/Passes.h.inc"
}  // namespace kiln

using namespace mlir;

namespace {
struct Layer {
  int64_t id = 0;
  SmallVector<Operation *> ops, F, G;  // program order; parameters (references) left out
  Value x, x1, x2, f, g, y1, y2, y;
  int64_t axis = 0, half = 0;
};

// The layer's glue as the DSL builds it, or an error at its first op.
LogicalResult parse(Layer &l) {
  auto fail = [&](const Twine &why) {
    return l.ops.front()->emitError("kiln-reverse-layers: reversible layer ") << l.id << " " << why;
  };
  SmallVector<Operation *> glue;
  for (Operation *op : l.ops) {
    int64_t part = op->getAttrOfType<DenseI64ArrayAttr>("kiln.reversible")[1];
    (part == 0 ? glue : part == 1 ? l.F : l.G).push_back(op);
    if (kiln::writesInPlace(op))
      return op->emitError("kiln-reverse-layers: a reversible layer cannot write a state in place (")
             << op->getName() << "): its F and G run again in the backward";
  }
  kiln::ConcatOp cat;
  for (Operation *op : glue)
    if (auto c = dyn_cast<kiln::ConcatOp>(op)) cat = c;
  if (!cat || cat.getInputs().size() != 2) return fail("has no concat of its two halves");
  l.y = cat.getResult(), l.y1 = cat.getInputs()[0], l.y2 = cat.getInputs()[1], l.axis = cat.getAxis();
  auto a1 = l.y1.getDefiningOp<kiln::AddOp>(), a2 = l.y2.getDefiningOp<kiln::AddOp>();
  if (!a1 || !a2) return fail("does not sum its halves (y1 = x1 + F(x2), y2 = x2 + G(y1))");
  auto s1 = a1.getLhs().getDefiningOp<kiln::SliceOp>(), s2 = a2.getLhs().getDefiningOp<kiln::SliceOp>();
  if (!s1 || !s2 || s1.getInput() != s2.getInput() || (int64_t)s1.getAxis() != l.axis || (int64_t)s2.getAxis() != l.axis ||
      s1.getOffset() != 0)
    return fail("does not split its input into two halves along the concat's axis");
  l.x = s1.getInput(), l.x1 = s1.getResult(), l.x2 = s2.getResult(), l.f = a1.getRhs(), l.g = a2.getRhs();
  l.half = (int64_t)s2.getOffset();
  for (Value v : {l.x1, l.x2, l.y1, l.y2, l.f, l.g})
    if (v.getType() != l.x1.getType()) return fail("has halves of different types");
  return success();
}

LogicalResult reverse(func::FuncOp f, Operation *seed) {
  Block &body = f.getBody().front();
  auto top = [&](Operation *user) { return body.findAncestorOpInBlock(*user); };
  auto isBackward = [&](Operation *op) { return op == seed || seed->isBeforeInBlock(op); };

  // 1. The layers.
  llvm::MapVector<int64_t, Layer> layers;
  for (Operation &op : body) {
    if (&op == seed) break;
    auto mark = op.getAttrOfType<DenseI64ArrayAttr>("kiln.reversible");
    if (!mark || isa<kiln::ParamOp, kiln::StateOp>(op)) continue;
    Layer &l = layers[mark[0]];
    l.id = mark[0];
    l.ops.push_back(&op);
  }
  for (auto &[id, l] : layers)
    if (failed(parse(l))) return failure();

  // 2. From the last layer to the first. `next`: the layer after this one when its input is
  // this layer's output, and the halves it reconstructed.
  Layer *next = nullptr;
  Value nextX1, nextX2;
  Operation *nextAt = nullptr;
  for (auto &[id, l] : llvm::reverse(layers)) {
    llvm::SmallPtrSet<Operation *, 32> mine(l.ops.begin(), l.ops.end());
    Operation *first = nullptr;
    for (Operation *op : l.ops)
      for (Value r : op->getResults())
        for (Operation *u : r.getUsers())
          if (Operation *t = top(u); t && isBackward(t) && (!first || t->isBeforeInBlock(first))) first = t;
    bool chained = next && next->x == l.y;
    if (!first) {  // the backward reads nothing of it: nothing to reconstruct
      next = nullptr;
      continue;
    }
    if (chained && first->isBeforeInBlock(nextAt))
      return l.ops.front()->emitError("kiln-reverse-layers: the backward reads reversible layer ")
             << id << " before it reads layer " << next->id << " (which reconstructs its output)";
    OpBuilder b(first);
    Location loc = l.y.getLoc();
    auto mark = [&](Operation *op) { op->setAttr("kiln.reconstructed", b.getI64IntegerAttr(id)); };
    SmallVector<Operation *> made;
    auto make = [&](Operation *op) {
      mark(op);
      made.push_back(op);
      return op->getResult(0);
    };
    Value y1r = chained ? nextX1 : make(kiln::SliceOp::create(b, loc, l.y1.getType(), l.y, b.getI64IntegerAttr(l.axis), b.getI64IntegerAttr(0)));
    Value y2r = chained ? nextX2 : make(kiln::SliceOp::create(b, loc, l.y2.getType(), l.y, b.getI64IntegerAttr(l.axis), b.getI64IntegerAttr(l.half)));
    IRMapping map;
    map.map(l.y1, y1r);
    auto cloneAll = [&](ArrayRef<Operation *> ops) {
      for (Operation *op : ops) {
        if (isa<kiln::LshHashOp, kiln::LshSortOp>(op)) continue;  // the forward's buckets, reused
        Operation *c = b.clone(*op, map);
        c->removeAttr("kiln.reversible");
        c->removeAttr("kiln.checkpoint");
        mark(c);
        made.push_back(c);
      }
    };
    auto minus = [&](Value a, Value v) {  // a - v
      Value neg = make(kiln::ScaleOp::create(b, loc, v.getType(), v, b.getF32FloatAttr(-1.0f)));
      return make(kiln::AddOp::create(b, loc, a.getType(), a, neg));
    };
    cloneAll(l.G);
    Value x2r = minus(y2r, map.lookupOrDefault(l.g));
    map.map(l.x2, x2r);
    cloneAll(l.F);
    Value x1r = minus(y1r, map.lookupOrDefault(l.f));
    map.map(l.x1, x1r);
    map.map(l.y2, y2r);  // y itself: kept when last (else the next layer replaced its reads)

    // The backward reads the reconstruction.
    llvm::SmallPtrSet<Operation *, 32> isMade(made.begin(), made.end());
    auto backwardRead = [&](OpOperand &u) {
      Operation *t = top(u.getOwner());
      return t && !isMade.count(t) && isBackward(t);
    };
    for (Operation *op : l.ops)
      for (Value r : op->getResults())
        if (Value to = map.lookupOrNull(r); to && to != r) r.replaceUsesWithIf(to, backwardRead);
    if (llvm::any_of(l.x.getUses(), backwardRead)) {
      Value xr = make(kiln::ConcatOp::create(b, loc, l.x.getType(), ValueRange{x1r, x2r}, b.getI64IntegerAttr(l.axis)));
      isMade.insert(xr.getDefiningOp());
      l.x.replaceUsesWithIf(xr, backwardRead);
    }
    next = &l, nextX1 = x1r, nextX2 = x2r, nextAt = first;
  }
  // What nothing reads goes: the first layer's x1' when the backward needs no input of the
  // stack (an embedding's gradient reads none), and the subtraction that made it.
  SmallVector<Operation *> made;
  for (Operation &op : body)
    if (op.hasAttr("kiln.reconstructed")) made.push_back(&op);
  for (Operation *op : llvm::reverse(made))
    if (op->use_empty()) op->erase();
  return success();
}

struct ReverseLayersPass : kiln::impl::ReverseLayersBase<ReverseLayersPass> {
  void runOnOperation() override {
    for (auto f : getOperation().getOps<func::FuncOp>()) {
      Operation *seed = nullptr;
      for (Operation &op : f.getBody().front())
        if (op.hasAttr("kiln.grad_seed")) seed = &op;
      if (seed && failed(reverse(f, seed))) return signalPassFailure();
    }
  }
};
}  // namespace
