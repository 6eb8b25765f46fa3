// ElementwiseOps.cpp - elementwise ops: add and mul (the right operand broadcast), scale, the
// activations and their gradient, fill: each op's verifier, the hooks it defines
// (KilnInterfaces.td) and its gradient rule, op after op. Verifier messages start with "expected";
// dynamic dims (`?`) match anything.
#include "VerifyUtils.h"
#include "kiln/Dialect/KilnDialect.h"
#include "mlir/IR/Builders.h"

using namespace mlir;
using namespace kiln;
using namespace kiln::verify;

static LogicalResult verifyBinary(Operation *op, Value a, Value b, Value r) {
  auto at = ty(a), bt = ty(b);
  if (bt.getRank() > at.getRank()) return op->emitOpError("expected the rhs rank to be at most the lhs rank");
  for (int64_t i = 1; i <= bt.getRank(); ++i)
    if (!compatible(at.getDimSize(at.getRank() - i), bt.getDimSize(bt.getRank() - i)))
      return op->emitOpError() << "expected broadcast-compatible operands, got " << at << " and " << bt;
  if (ty(r).getShape().size() != at.getShape().size()) return op->emitOpError("expected the result to have the lhs shape");
  return success();
}

// `g` summed down to `target`'s type where `target` was broadcast over g's leading dims (the
// right operand of add and mul): the sum over every dim but the last.
static FailureOr<Value> sumTo(Operation *op, OpBuilder &b, Value g, Value target) {
  auto gt = ty(g), tt = ty(target);
  if (gt.getRank() == tt.getRank()) return g;
  if (tt.getRank() != 1)
    return op->emitOpError() << "gradient: an operand " << tt << " broadcast to " << gt
                             << " (only a [d] operand broadcast over rows is differentiable)";
  return Value(ReduceRowsOp::create(b, op->getLoc(), tt, g));
}

LogicalResult AddOp::verify() { return verifyBinary(*this, getLhs(), getRhs(), getResult()); }

OpCost AddOp::getCost(function_ref<double(Value)> numel) { return elementwiseCost(*this, numel, 1); }

LogicalResult AddOp::buildGradient(OpBuilder &b, ArrayRef<Value> g, SmallVectorImpl<Value> &out) {
  FailureOr<Value> r = sumTo(*this, b, g[0], getRhs());
  if (failed(r)) return failure();
  out.push_back(g[0]);
  out.push_back(*r);
  return success();
}

LogicalResult MulOp::verify() { return verifyBinary(*this, getLhs(), getRhs(), getResult()); }

OpCost MulOp::getCost(function_ref<double(Value)> numel) { return elementwiseCost(*this, numel, 1); }

LogicalResult MulOp::buildGradient(OpBuilder &b, ArrayRef<Value> g, SmallVectorImpl<Value> &out) {
  Location loc = getLoc();
  out.push_back(MulOp::create(b, loc, getLhs().getType(), g[0], getRhs()));
  FailureOr<Value> r = sumTo(*this, b, MulOp::create(b, loc, g[0].getType(), g[0], getLhs()), getRhs());
  if (failed(r)) return failure();
  out.push_back(*r);
  return success();
}

void ScaleOp::getKernelAttrs(KernelAttrs &a) { a.setFloat("factor", getFactor().convertToFloat()); }

OpCost ScaleOp::getCost(function_ref<double(Value)> numel) { return elementwiseCost(*this, numel, 1); }

LogicalResult ScaleOp::buildGradient(OpBuilder &b, ArrayRef<Value> g, SmallVectorImpl<Value> &out) {
  out.push_back(ScaleOp::create(b, getLoc(), getType(), g[0], getFactorAttr()));
  return success();
}

void GeluOp::getKernelAttrs(KernelAttrs &a) { a.set("approx", stringifyGeluApproximation(getApproximate())); }

LogicalResult FillOp::verify() {
  if (!ty(getResult()).hasStaticShape()) return emitOpError("expected a static result shape, got ") << getType();
  return success();
}

void FillOp::getKernelAttrs(KernelAttrs &a) { a.setFloat("value", getValue().convertToFloat()); }

LogicalResult ActivationGradOp::verify() {
  if (failed(expectShape(*this, "x", getX(), "grad", getGrad()))) return failure();
  return expectShape(*this, "result", getResult(), "x", getX());
}

void ActivationGradOp::getKernelAttrs(KernelAttrs &a) { a.set("act", stringifyActivationKind(getActivation())); }

OpCost ActivationGradOp::getCost(function_ref<double(Value)> numel) {
  OpCost c = defaultCost(*this, numel);
  c.flops = 20 * numel(getResult());
  return c;
}
