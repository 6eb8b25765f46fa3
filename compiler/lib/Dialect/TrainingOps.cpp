// TrainingOps.cpp - the loss, the backward's generic reductions and the optimizer: cross_entropy,
// mean, reduce_rows, sum_squares, the step counter, the learning rate and loss weight schedules,
// AdamW, and the data-parallel all-reduce: each op's verifier, the hooks it defines
// (KilnInterfaces.td) and its gradient rule, op after op. Verifier messages start with "expected";
// dynamic dims (`?`) match anything.
#include <cmath>

#include "VerifyUtils.h"
#include "kiln/Dialect/KilnDialect.h"
#include "mlir/IR/Builders.h"

using namespace mlir;
using namespace kiln;
using namespace kiln::verify;

// logits [N, V] and targets i32 [N].
static LogicalResult verifyLogitsTargets(Operation *op, Value logits, Value targets) {
  if (failed(expectRank(op, "logits", logits, 2)) || failed(expectRank(op, "targets", targets, 1))) return failure();
  if (!ty(targets).getElementType().isInteger(32)) return op->emitOpError("expected i32 targets");
  return expectDim(op, "targets length", ty(targets).getDimSize(0), "logits rows", ty(logits).getDimSize(0));
}

static LogicalResult expectScalar(Operation *op, const char *role, Value v) {
  if (ty(v).getShape() == ArrayRef<int64_t>{1} && ty(v).getElementType().isF32()) return success();
  return op->emitOpError() << "expected the " << role << " to be a [1] f32 scalar, got " << v.getType();
}

LogicalResult CrossEntropyOp::verify() {
  if (failed(verifyLogitsTargets(*this, getLogits(), getTargets()))) return failure();
  if (ty(getResult()).getShape() != ArrayRef<int64_t>{1}) return emitOpError("expected a [1] result, got ") << getType();
  return success();
}

void CrossEntropyOp::getKernelAttrs(KernelAttrs &a) { a.set("ignore_index", (int64_t)getIgnoreIndex()); }

Syms CrossEntropyOp::inferSeqLengths(ArrayRef<Syms>) { return Syms{-1}; }

OpCost CrossEntropyOp::getCost(function_ref<double(Value)> numel) {  // max, exp and sum per logit
  OpCost c = defaultCost(*this, numel);
  c.flops = 4 * numel(getLogits());
  return c;
}

LogicalResult CrossEntropyOp::buildGradient(OpBuilder &b, ArrayRef<Value> g, SmallVectorImpl<Value> &out) {
  out.push_back(CrossEntropyGradOp::create(b, getLoc(), getLogits().getType(), getLogits(), getTargets(), g[0],
                                           getIgnoreIndexAttr()));
  out.push_back(Value());
  return success();
}

LogicalResult CrossEntropyGradOp::verify() {
  if (failed(verifyLogitsTargets(*this, getLogits(), getTargets()))) return failure();
  if (ty(getGrad()).getShape() != ArrayRef<int64_t>{1}) return emitOpError("expected a [1] grad, got ") << getGrad().getType();
  return expectShape(*this, "result", getResult(), "logits", getLogits());
}

void CrossEntropyGradOp::getKernelAttrs(KernelAttrs &a) { a.set("ignore_index", (int64_t)getIgnoreIndex()); }

OpCost CrossEntropyGradOp::getCost(function_ref<double(Value)> numel) {
  OpCost c = defaultCost(*this, numel);
  c.flops = 6 * numel(getLogits());
  return c;
}

LogicalResult ReduceRowsOp::verify() {
  if (failed(expectRank(*this, "result", getResult(), 1))) return failure();
  auto it = ty(getInput());
  return expectDim(*this, "result width", ty(getResult()).getDimSize(0), "input's last dim", it.getDimSize(it.getRank() - 1));
}

Syms ReduceRowsOp::inferSeqLengths(ArrayRef<Syms>) { return Syms{-1}; }

OpCost ReduceRowsOp::getCost(function_ref<double(Value)> numel) {
  OpCost c = defaultCost(*this, numel);
  c.flops = numel(getInput());
  return c;
}

LogicalResult MeanOp::verify() {
  if (!ty(getInput()).getElementType().isF32()) return emitOpError("expected an f32 input, got ") << getInput().getType();
  if (ty(getResult()).getShape() != ArrayRef<int64_t>{1}) return emitOpError("expected a [1] result, got ") << getType();
  return success();
}

Syms MeanOp::inferSeqLengths(ArrayRef<Syms>) { return Syms{-1}; }

OpCost MeanOp::getCost(function_ref<double(Value)> numel) {
  OpCost c = defaultCost(*this, numel);
  c.flops = numel(getInput());
  return c;
}

LogicalResult MeanOp::buildGradient(OpBuilder &b, ArrayRef<Value> g, SmallVectorImpl<Value> &out) {
  out.push_back(MeanGradOp::create(b, getLoc(), getInput().getType(), g[0], getInput()));
  return success();
}

LogicalResult MeanGradOp::verify() {
  if (ty(getGrad()).getShape() != ArrayRef<int64_t>{1}) return emitOpError("expected a [1] grad, got ") << getGrad().getType();
  if (getResult().getType() != getLike().getType()) return emitOpError("expected the result to have like's type ") << getLike().getType();
  return success();
}

Syms MeanGradOp::inferSeqLengths(ArrayRef<Syms> in) { return in[1]; }

LogicalResult SumSquaresOp::verify() { return expectScalar(*this, "result", getResult()); }

Syms SumSquaresOp::inferSeqLengths(ArrayRef<Syms>) { return Syms{-1}; }

LogicalResult AllReduceOp::verify() {
  if (getInput().getType() != getResult().getType())
    return emitOpError() << "expected the result to have the input's type " << getInput().getType() << ", got "
                         << getResult().getType();
  if (!ty(getInput()).getElementType().isF32()) return emitOpError() << "expected f32 values, got " << getInput().getType();
  return success();
}

LogicalResult AllReduceWaitOp::verify() {
  if (getPending().getType() != getResult().getType())
    return emitOpError() << "expected the result to have the operand's type " << getPending().getType() << ", got "
                         << getResult().getType();
  if (!getPending().getDefiningOp<AllReduceOp>()) return emitOpError("expected the result of a kiln.all_reduce");
  return success();
}

LogicalResult StepCountOp::verify() {
  if (failed(expectScalar(*this, "step", getStep()))) return failure();
  return expectScalar(*this, "result", getResult());
}

LogicalResult LearningRateOp::verify() {
  if (failed(expectScalar(*this, "step", getStep())) || failed(expectScalar(*this, "peak", getPeak())) ||
      failed(expectScalar(*this, "result", getResult())))
    return failure();
  if ((int64_t)getWarmup() < 0 || (int64_t)getDecaySteps() < 0) return emitOpError("expected non-negative warmup and decay_steps");
  return success();
}

void LearningRateOp::getKernelAttrs(KernelAttrs &a) {
  a.setFloat("lr", getLr().convertToFloat());
  a.set("warmup", (int64_t)getWarmup());
  a.set("decay_steps", (int64_t)getDecaySteps());
  a.setFloat("min_ratio", getMinRatio().convertToFloat());
}

LogicalResult LossWeightOp::verify() {
  if (failed(expectScalar(*this, "step", getStep())) || failed(expectScalar(*this, "total", getTotal())) ||
      failed(expectScalar(*this, "result", getResult())))
    return failure();
  float w = getWeight().convertToFloat(), u = getUntil().convertToFloat();
  if (!std::isfinite(w)) return emitOpError("expected a finite weight");
  if (!(u >= 0.0f && u <= 1.0f)) return emitOpError("expected until in [0, 1] (a fraction of the training steps), got ") << u;
  return success();
}

void LossWeightOp::getKernelAttrs(KernelAttrs &a) {
  a.setFloat("weight", getWeight().convertToFloat());
  a.setFloat("until", getUntil().convertToFloat());
}

LogicalResult AdamWStepOp::verify() {
  if (failed(expectShape(*this, "m", getM(), "param", getParam())) ||
      failed(expectShape(*this, "v", getV(), "param", getParam())) ||
      failed(expectShape(*this, "grad", getGrad(), "param", getParam())) ||
      failed(expectShape(*this, "result", getResult(), "param", getParam())))
    return failure();
  // The moments are written in place beside the result: only a state may be.
  if (!getM().getDefiningOp<StateOp>() || !getV().getDefiningOp<StateOp>())
    return emitOpError("expected the moments m and v to be kiln.state values (they are updated in place)");
  return success(succeeded(expectScalar(*this, "sumsq", getSumsq())) &&
                 succeeded(expectScalar(*this, "step", getStep())) && succeeded(expectScalar(*this, "lr", getLr())));
}

void AdamWStepOp::getKernelAttrs(KernelAttrs &a) {
  a.setFloat("beta1", getBeta1().convertToFloat());
  a.setFloat("beta2", getBeta2().convertToFloat());
  a.setFloat("eps", getEps().convertToFloat());
  a.setFloat("weight_decay", getWeightDecay().convertToFloat());
  a.setFloat("clip_norm", getClipNorm().convertToFloat());
}

OpCost AdamWStepOp::getCost(function_ref<double(Value)> numel) {
  OpCost c = defaultCost(*this, numel);
  c.written += 8 * numel(getResult());  // the two moments, in place beside the result
  c.flops = 16 * numel(getResult());
  return c;
}
