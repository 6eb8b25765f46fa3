// NormOps.cpp - the ops reducing over each row's last dim: layer_norm, rms_norm and softmax, and
// their gradients: each op's verifier, the hooks it defines (KilnInterfaces.td) and its gradient rule, op
// after op. Verifier messages start with "expected"; dynamic dims (`?`) match anything.
#include "VerifyUtils.h"
#include "kiln/Dialect/KilnDialect.h"
#include "mlir/IR/Builders.h"

using namespace mlir;
using namespace kiln;
using namespace kiln::verify;

// A norm's gradient with respect to its input (`result` the input's shape) or its gain (`result`
// the gain's [d]): x, the gain and grad of one width, x and grad of one shape.
static LogicalResult verifyNormGrad(Operation *op, Value input, Value gain, Value grad, Value result, bool wrtInput) {
  if (failed(expectShape(op, "input", input, "grad", grad)) || failed(expectRank(op, "gamma", gain, 1))) return failure();
  auto it = ty(input);
  if (failed(expectDim(op, "gamma width", ty(gain).getDimSize(0), "input width", it.getDimSize(it.getRank() - 1))))
    return failure();
  return wrtInput ? expectShape(op, "result", result, "input", input) : expectShape(op, "result", result, "gamma", gain);
}

OpCost SoftmaxOp::getCost(function_ref<double(Value)> numel) { return elementwiseCost(*this, numel, 5); }

LogicalResult SoftmaxOp::buildGradient(OpBuilder &b, ArrayRef<Value> g, SmallVectorImpl<Value> &out) {
  out.push_back(SoftmaxGradOp::create(b, getLoc(), getType(), getResult(), g[0]));
  return success();
}

LogicalResult LayerNormOp::verify() {
  auto xt = ty(getInput());
  int64_t d = xt.getDimSize(xt.getRank() - 1);
  if (failed(expectRank(*this, "gamma", getGamma(), 1)) || failed(expectRank(*this, "beta", getBeta(), 1))) return failure();
  if (failed(expectDim(*this, "gamma length", ty(getGamma()).getDimSize(0), "input width", d)) ||
      failed(expectDim(*this, "beta length", ty(getBeta()).getDimSize(0), "input width", d)))
    return failure();
  if (!(getEpsilon().convertToFloat() > 0)) return emitOpError("expected a positive epsilon");
  return success();
}

void LayerNormOp::getKernelAttrs(KernelAttrs &a) { a.setFloat("eps", getEpsilon().convertToFloat()); }

OpCost LayerNormOp::getCost(function_ref<double(Value)> numel) { return elementwiseCost(*this, numel, 8); }

// dx from the saved input (the row statistics are recomputed); dgamma = sum over rows of
// dy·x̂; dbeta = sum over rows of dy.
LogicalResult LayerNormOp::buildGradient(OpBuilder &b, ArrayRef<Value> g, SmallVectorImpl<Value> &out) {
  Location loc = getLoc();
  out.push_back(LayerNormGradOp::create(b, loc, getInput().getType(), getInput(), getGamma(), g[0], getEpsilonAttr()));
  out.push_back(LayerNormGammaGradOp::create(b, loc, getGamma().getType(), getInput(), getGamma(), g[0], getEpsilonAttr()));
  out.push_back(ReduceRowsOp::create(b, loc, getBeta().getType(), g[0]));
  return success();
}

LogicalResult LayerNormGradOp::verify() {
  return verifyNormGrad(*this, getInput(), getGamma(), getGrad(), getResult(), /*wrtInput=*/true);
}

void LayerNormGradOp::getKernelAttrs(KernelAttrs &a) { a.setFloat("eps", getEpsilon().convertToFloat()); }

Syms LayerNormGradOp::inferSeqLengths(ArrayRef<Syms> in) { return in[0]; }

OpCost LayerNormGradOp::getCost(function_ref<double(Value)> numel) {
  OpCost c = defaultCost(*this, numel);
  c.flops = 10 * numel(getInput());
  return c;
}

LogicalResult LayerNormGammaGradOp::verify() {
  return verifyNormGrad(*this, getInput(), getGamma(), getGrad(), getResult(), /*wrtInput=*/false);
}

void LayerNormGammaGradOp::getKernelAttrs(KernelAttrs &a) { a.setFloat("eps", getEpsilon().convertToFloat()); }

Syms LayerNormGammaGradOp::inferSeqLengths(ArrayRef<Syms>) { return Syms{-1}; }

OpCost LayerNormGammaGradOp::getCost(function_ref<double(Value)> numel) {
  OpCost c = defaultCost(*this, numel);
  c.flops = 10 * numel(getInput());
  return c;
}

OpCost SoftmaxGradOp::getCost(function_ref<double(Value)> numel) {
  OpCost c = defaultCost(*this, numel);
  c.flops = 4 * numel(getResult());
  return c;
}

LogicalResult RmsNormOp::verify() {
  auto xt = ty(getInput());
  if (failed(expectRank(*this, "weight", getWeight(), 1)) ||
      failed(expectDim(*this, "weight length", ty(getWeight()).getDimSize(0), "input width", xt.getDimSize(xt.getRank() - 1))))
    return failure();
  if (getResult().getType() != getInput().getType()) return emitOpError("expected the result to have the input's type");
  if (!(getEpsilon().convertToFloat() > 0)) return emitOpError("expected a positive epsilon");
  return success();
}

void RmsNormOp::getKernelAttrs(KernelAttrs &a) { a.setFloat("eps", getEpsilon().convertToFloat()); }

// A square and a sum per element, then the scale and the gain.
OpCost RmsNormOp::getCost(function_ref<double(Value)> numel) { return elementwiseCost(*this, numel, 4); }

// dx from the saved input (each row's scale recomputed); d weight = the sum over rows of dy · x̂,
// x̂ = rms_norm(x) with a unit weight: a second pass over x, in ops that exist (no kernel of
// its own for a [d] column reduction).
LogicalResult RmsNormOp::buildGradient(OpBuilder &b, ArrayRef<Value> g, SmallVectorImpl<Value> &out) {
  Location loc = getLoc();
  Type wt = getWeight().getType();
  out.push_back(RmsNormGradOp::create(b, loc, getInput().getType(), getInput(), getWeight(), g[0], getEpsilonAttr()));
  Value ones = FillOp::create(b, loc, wt, b.getF32FloatAttr(1.0f));
  Value xhat = RmsNormOp::create(b, loc, getInput().getType(), getInput(), ones, getEpsilonAttr());
  out.push_back(ReduceRowsOp::create(b, loc, wt, MulOp::create(b, loc, g[0].getType(), g[0], xhat)));
  return success();
}

LogicalResult RmsNormGradOp::verify() {
  return verifyNormGrad(*this, getInput(), getWeight(), getGrad(), getResult(), /*wrtInput=*/true);
}

void RmsNormGradOp::getKernelAttrs(KernelAttrs &a) { a.setFloat("eps", getEpsilon().convertToFloat()); }

OpCost RmsNormGradOp::getCost(function_ref<double(Value)> numel) {
  OpCost c = defaultCost(*this, numel);
  c.flops = 8 * numel(getInput());
  return c;
}

LogicalResult L2NormalizeOp::verify() {
  if (getResult().getType() != getInput().getType()) return emitOpError("expected the result to have the input's type");
  if (!ty(getInput()).getElementType().isF32()) return emitOpError("expected an f32 input, got ") << getInput().getType();
  if (!(getEpsilon().convertToFloat() > 0)) return emitOpError("expected a positive epsilon");
  return success();
}

void L2NormalizeOp::getKernelAttrs(KernelAttrs &a) { a.setFloat("eps", getEpsilon().convertToFloat()); }

// A square and a sum per element, then the division.
OpCost L2NormalizeOp::getCost(function_ref<double(Value)> numel) { return elementwiseCost(*this, numel, 3); }

LogicalResult MeanPoolOp::verify() {
  auto x = ty(getInput()), r = ty(getResult());
  if (failed(expectRank(*this, "input", getInput(), 2)) || failed(expectRank(*this, "result", getResult(), 2)) ||
      failed(expectDim(*this, "result width", r.getDimSize(1), "input width", x.getDimSize(1))))
    return failure();
  if (!x.getElementType().isF32()) return emitOpError("expected an f32 input, got ") << getInput().getType();
  const int64_t batch = (int64_t)getBatch();  // -1: one sequence
  if (batch < 0 && r.getDimSize(0) != 1) return emitOpError("expected one result row without a batch, got ") << r;
  if (batch >= 0 && !ShapedType::isDynamic(r.getDimSize(0)))
    return emitOpError("expected a row per sequence of batch ") << batch << ", got " << r;
  if (Value m = getMask()) {
    if (ty(m).getRank() != 1 || !ty(m).getElementType().isInteger(32))
      return emitOpError("expected the mask to be a 1-D i32 tensor, got ") << m.getType();
    if (failed(expectDim(*this, "mask length", ty(m).getDimSize(0), "input rows", x.getDimSize(0)))) return failure();
  }
  return success();
}

Syms MeanPoolOp::inferSeqLengths(ArrayRef<Syms>) { return Syms{std::max<int64_t>(-1, (int64_t)getBatch()), -1}; }

// A sum per element of the input.
OpCost MeanPoolOp::getCost(function_ref<double(Value)> numel) {
  OpCost c = defaultCost(*this, numel);
  c.flops = numel(getInput());
  return c;
}
