// kiln-differentiate: reverse-mode differentiation of an entry's loss on the kiln dialect.
//
// Algorithm, per func.func marked `kiln.differentiate`:
//   1. The loss: the result named "loss", a [1] f32 scalar.
//   2. Active values, forward: a parameter's result, and every result of an op with an active
//      operand. Needed ops, backward from the loss: the active ops the loss depends on.
//   3. Seed d loss / d loss = kiln.fill 1 (marked kiln.grad_seed: the backward's first op, every
//      op after it belongs to the backward). Visit the needed ops in reverse program order; each
//      builds the gradients of its operands from those of its results (buildGradient, the op's
//      hook), inserted before the return; gradients of a value used several times are summed
//      with kiln.add when the value's op reads them, or, where they are the slices of a split
//      (kiln.pad along one axis, tiling it), concatenated.
//   4. Each parameter's gradient (kiln.fill 0 where the loss does not depend on it) becomes a
//      result "grad.<name>", in the order the parameters appear.
//   5. Gradients nothing reads (an input's: rules build one for every operand) are erased.
// An op on the way without a rule (or a case its rule does not support) is an error at the
// op's location, the model line that made it.
#include "kiln/Transforms/Passes.h"
#include "kiln/Transforms/Utils.h"
#include "kilnrt/model.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Transforms/RegionUtils.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/MapVector.h"

namespace kiln {
#define GEN_PASS_DEF_DIFFERENTIATE
#include "kiln/Transforms/Passes.h.inc"
}  // namespace kiln

using namespace mlir;

namespace {
bool isFloatTensor(Value v) {
  auto t = dyn_cast<RankedTensorType>(v.getType());
  return t && t.getElementType().isF32();
}

// The contributions gs to v's gradient as one kiln.concat, when each is a kiln.pad of v's
// type along one axis (a slice's gradient) and their ranges tile that axis exactly; else null.
Value concatOfPads(OpBuilder &b, Value v, ArrayRef<Value> gs) {
  auto vt = cast<RankedTensorType>(v.getType());
  SmallVector<kiln::PadOp> pads;
  for (Value g : gs) {
    auto p = g.getDefiningOp<kiln::PadOp>();
    if (!p || p.getType() != vt || (!pads.empty() && p.getAxis() != pads.front().getAxis())) return Value();
    pads.push_back(p);
  }
  int64_t axis = pads.front().getAxis();
  if (axis < 0 || axis >= vt.getRank() || vt.isDynamicDim(axis)) return Value();
  llvm::sort(pads, [](kiln::PadOp a, kiln::PadOp c) { return a.getOffset() < c.getOffset(); });
  int64_t next = 0;
  SmallVector<Value> inputs;
  SmallVector<Location> locs;
  for (kiln::PadOp p : pads) {
    int64_t size = cast<RankedTensorType>(p.getInput().getType()).getDimSize(axis);
    if ((int64_t)p.getOffset() != next || ShapedType::isDynamic(size)) return Value();
    next += size;
    inputs.push_back(p.getInput());
    locs.push_back(p.getLoc());
  }
  if (next != vt.getDimSize(axis)) return Value();
  return kiln::ConcatOp::create(b, FusedLoc::get(b.getContext(), locs), vt, inputs, b.getI64IntegerAttr(axis));
}

LogicalResult differentiate(func::FuncOp f) {
  Block &body = f.getBody().front();
  auto ret = cast<func::ReturnOp>(body.getTerminator());
  // 1. The loss.
  int lossIndex = -1;
  for (unsigned i = 0; i < f.getNumResults(); ++i)
    if (auto n = f.getResultAttrOfType<StringAttr>(i, "kiln.name"); n && n.getValue() == KILN_OUTPUT_LOSS) lossIndex = (int)i;
  if (lossIndex < 0) return f.emitError("kiln-differentiate: entry '") << f.getName() << "' has no result named \"loss\"";
  Value loss = ret.getOperand(lossIndex);
  auto lt = cast<RankedTensorType>(loss.getType());
  if (lt.getShape() != ArrayRef<int64_t>{1} || !lt.getElementType().isF32())
    return f.emitError("kiln-differentiate: the loss must be a [1] f32 scalar, got ") << lt;

  // 2. Active values, and the ops the loss needs.
  llvm::DenseSet<Value> active;
  SmallVector<kiln::ParamOp> params;
  for (Operation &op : body.without_terminator()) {
    if (auto p = dyn_cast<kiln::ParamOp>(op)) {
      params.push_back(p);
      if (isFloatTensor(p.getResult())) active.insert(p.getResult());
      continue;
    }
    if (llvm::any_of(op.getOperands(), [&](Value v) { return active.count(v); }))
      for (Value r : op.getResults())
        if (isFloatTensor(r)) active.insert(r);
  }
  llvm::DenseSet<Operation *> needed;
  SmallVector<Value> stack{loss};
  while (!stack.empty()) {
    Value v = stack.pop_back_val();
    Operation *op = v.getDefiningOp();
    if (!op || !active.count(v) || !needed.insert(op).second) continue;
    for (Value o : op->getOperands()) stack.push_back(o);
  }

  // 3. Reverse sweep. A value's gradient contributions are kept until its defining op (or the
  // results) reads them, then summed: by kiln.add in arrival order, or, where they are the
  // padded gradients of slices that tile one axis (a split's parts), by one kiln.concat of
  // the parts, which writes each element once instead of zeros and sums; a table's scatter-add
  // (kiln.embedding_grad) goes into the sum of the others.
  OpBuilder b(ret);
  DenseMap<Value, SmallVector<Value, 2>> parts;
  auto accumulate = [&](Value v, Value g) { parts[v].push_back(g); };
  auto gradOf = [&](Value v) -> Value {
    auto it = parts.find(v);
    if (it == parts.end()) return Value();
    SmallVector<Value, 2> &gs = it->second;
    if (gs.size() == 1) return gs[0];
    Value sum = concatOfPads(b, v, gs);
    if (!sum) {
      // A table's rows scatter-added by kiln.embedding_grad (a tied embedding): added into the
      // sum of the other contributions (the head's weight gradient), not into zeros and then
      // summed with it.
      kiln::EmbeddingGradOp scatter;
      for (Value g : gs)
        if (auto e = g.getDefiningOp<kiln::EmbeddingGradOp>(); e && !e.getInto() && g.use_empty()) {
          scatter = e;
          break;
        }
      SmallVector<Value, 2> rest;
      for (Value g : gs)
        if (!scatter || g != scatter.getResult()) rest.push_back(g);
      for (Value g : rest) sum = sum ? kiln::AddOp::create(b, g.getLoc(), v.getType(), sum, g).getResult() : g;
      if (scatter) {
        sum = kiln::EmbeddingGradOp::create(b, scatter.getLoc(), v.getType(), scatter.getIds(), scatter.getGrad(), sum);
        scatter.erase();
      }
    }
    gs.assign(1, sum);  // read again (a parameter's gradient at the results): the same value
    return sum;
  };
  auto seed = kiln::FillOp::create(b, f.getLoc(), lt, b.getF32FloatAttr(1.0f));
  seed->setAttr("kiln.grad_seed", b.getUnitAttr());  // the backward starts here (kiln-recompute-checkpoints)
  accumulate(loss, seed);
  SmallVector<Operation *> order;
  for (Operation &op : body.without_terminator())
    if (needed.count(&op) && !isa<kiln::ParamOp>(op)) order.push_back(&op);
  for (Operation *op : llvm::reverse(order)) {
    SmallVector<Value> resultGrads;
    bool any = false;
    for (Value r : op->getResults()) {
      resultGrads.push_back(gradOf(r));
      any |= (bool)resultGrads.back();
    }
    if (!any) continue;
    auto iface = dyn_cast<kiln::KilnOpInterface>(op);
    SmallVector<Value> operandGrads;
    bool reported = false;
    LogicalResult ok = failure();
    if (iface) {
      ScopedDiagnosticHandler h(op->getContext(), [&](Diagnostic &d) {
        reported |= d.getSeverity() == DiagnosticSeverity::Error;
        return failure();  // not handled here: it reaches the user
      });
      b.setInsertionPoint(ret);
      ok = iface.buildGradient(b, resultGrads, operandGrads);
    }
    if (failed(ok)) {
      if (!reported)
        op->emitError("kiln-differentiate: '") << op->getName() << "' has no gradient rule, and the loss depends on it";
      return failure();
    }
    for (auto [i, v] : llvm::enumerate(op->getOperands()))
      if (i < operandGrads.size() && operandGrads[i] && active.count(v)) accumulate(v, operandGrads[i]);
  }

  // 4. The parameters' gradients as results.
  SmallVector<Value> results(ret.getOperands());
  SmallVector<std::string> names;
  for (unsigned i = 0; i < f.getNumResults(); ++i)
    if (auto n = f.getResultAttrOfType<StringAttr>(i, "kiln.name")) names.push_back(n.str());
    else names.push_back("");
  // A parameter read through several kiln.param ops (a step unrolled by kiln-unroll-act, say)
  // gets one gradient: the sum of theirs.
  llvm::MapVector<StringRef, SmallVector<kiln::ParamOp>> byName;
  for (kiln::ParamOp p : params) byName[p.getName()].push_back(p);
  for (auto &[name, ops] : byName) {
    for (kiln::ParamOp p : ops)
      if (p.getType() != ops.front().getType())
        return p.emitError("kiln-differentiate: parameter \"") << name << "\" is read as " << ops.front().getType()
                                                                   << " and as " << p.getType();
    Value sum;
    for (kiln::ParamOp p : ops)
      if (Value g = gradOf(p.getResult()))
        sum = sum ? kiln::AddOp::create(b, p.getLoc(), p.getType(), sum, g).getResult() : g;
    kiln::ParamOp p = ops.front();
    results.push_back(sum ? sum : Value(kiln::FillOp::create(b, p.getLoc(), p.getType(), b.getF32FloatAttr(0.0f))));
    names.push_back(("grad." + name).str());
  }
  kiln::setResults(f, results, names);
  f->removeAttr("kiln.differentiate");
  // 5. Rules build every operand's gradient; those nothing reads (an input's, a gradient that
  // only fed one) go.
  SmallVector<Operation *> all;
  for (Operation &op : body.without_terminator()) all.push_back(&op);
  for (Operation *op : llvm::reverse(all))
    if (isOpTriviallyDead(op)) op->erase();
  return success();
}

struct DifferentiatePass : kiln::impl::DifferentiateBase<DifferentiatePass> {
  void runOnOperation() override {
    for (auto f : getOperation().getOps<func::FuncOp>())
      if (f->hasAttr("kiln.differentiate") && failed(differentiate(f))) return signalPassFailure();
  }
};
}  // namespace
