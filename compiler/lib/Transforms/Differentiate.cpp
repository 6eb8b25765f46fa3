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
//      with kiln.add as they arrive.
//   4. Each parameter's gradient (kiln.fill 0 where the loss does not depend on it) becomes a
//      result "grad.<name>", in the order the parameters appear.
//   5. Gradients nothing reads (an input's: rules build one for every operand) are erased.
// An op on the way without a rule (or a case its rule does not support) is an error at the
// op's location, the model line that made it.
#include "kiln/Transforms/Passes.h"
#include "kiln/Transforms/Utils.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Transforms/RegionUtils.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "llvm/ADT/DenseSet.h"

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

LogicalResult differentiate(func::FuncOp f) {
  Block &body = f.getBody().front();
  auto ret = cast<func::ReturnOp>(body.getTerminator());
  // 1. The loss.
  int lossIndex = -1;
  for (unsigned i = 0; i < f.getNumResults(); ++i)
    if (auto n = f.getResultAttrOfType<StringAttr>(i, "kiln.name"); n && n.getValue() == "loss") lossIndex = (int)i;
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

  // 3. Reverse sweep.
  OpBuilder b(ret);
  DenseMap<Value, Value> grad;
  auto accumulate = [&](Value v, Value g) {
    auto it = grad.find(v);
    if (it == grad.end()) grad[v] = g;
    else it->second = kiln::AddOp::create(b, g.getLoc(), v.getType(), it->second, g);
  };
  auto seed = kiln::FillOp::create(b, f.getLoc(), lt, b.getF32FloatAttr(1.0f));
  seed->setAttr("kiln.grad_seed", b.getUnitAttr());  // the backward starts here (kiln-recompute-checkpoints)
  grad[loss] = seed;
  SmallVector<Operation *> order;
  for (Operation &op : body.without_terminator())
    if (needed.count(&op) && !isa<kiln::ParamOp>(op)) order.push_back(&op);
  for (Operation *op : llvm::reverse(order)) {
    SmallVector<Value> resultGrads;
    bool any = false;
    for (Value r : op->getResults()) {
      auto it = grad.find(r);
      resultGrads.push_back(it == grad.end() ? Value() : it->second);
      any |= it != grad.end();
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
  for (kiln::ParamOp p : params) {
    auto it = grad.find(p.getResult());
    results.push_back(it != grad.end() ? it->second
                                       : Value(kiln::FillOp::create(b, p.getLoc(), p.getType(), b.getF32FloatAttr(0.0f))));
    names.push_back(("grad." + p.getName()).str());
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
