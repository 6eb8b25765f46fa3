// ConvOps.cpp - the depthwise convolution over the sequence and its gradients: each op's verifier,
// the hooks it defines (KilnInterfaces.td) and its gradient rule, op after op. Verifier messages
// start with "expected"; dynamic dims (`?`) match anything.
#include "VerifyUtils.h"
#include "kiln/Dialect/KilnDialect.h"
#include "mlir/IR/Builders.h"

using namespace mlir;
using namespace kiln;
using namespace kiln::verify;

LogicalResult DepthwiseConvOp::verify() {
  if (failed(expectRank(*this, "input", getX(), 2)) || failed(expectRank(*this, "weight", getWeight(), 2)) ||
      failed(expectRank(*this, "bias", getBias(), 1)))
    return failure();
  int64_t k = ty(getWeight()).getDimSize(0);
  if (k % 2 == 0) return emitOpError("expected an odd kernel size (weight dim 0), got ") << k;
  if (getX().getType() != getResult().getType()) return emitOpError("expected the result to have the input's type");
  if (failed(expectDim(*this, "weight width", ty(getWeight()).getDimSize(1), "input width", ty(getX()).getDimSize(1))) ||
      failed(expectDim(*this, "bias length", ty(getBias()).getDimSize(0), "input width", ty(getX()).getDimSize(1))))
    return failure();
  return success();
}

void DepthwiseConvOp::getKernelAttrs(KernelAttrs &a) {
  if (getCausal()) a.set("causal", true);
}

OpCost DepthwiseConvOp::getCost(function_ref<double(Value)> numel) {
  OpCost c = defaultCost(*this, numel);
  double out = numel(getResult());
  c.flops = 2 * out * dimOf(getWeight(), 0) + out;
  return c;
}

LogicalResult DepthwiseConvOp::buildGradient(OpBuilder &b, ArrayRef<Value> g, SmallVectorImpl<Value> &out) {
  Location loc = getLoc();
  for (ConvGradWrt w : {ConvGradWrt::x, ConvGradWrt::weight})
    out.push_back(DepthwiseConvGradOp::create(b, loc, w == ConvGradWrt::x ? getX().getType() : getWeight().getType(), getX(),
                                              getWeight(), g[0], w, getCausal()));
  out.push_back(ReduceRowsOp::create(b, loc, getBias().getType(), g[0]));
  return success();
}

LogicalResult DepthwiseConvGradOp::verify() {
  if (failed(expectRank(*this, "input", getX(), 2)) || failed(expectRank(*this, "weight", getWeight(), 2)))
    return failure();
  if (ty(getWeight()).getDimSize(0) % 2 == 0)
    return emitOpError("expected an odd kernel size (weight dim 0), got ") << ty(getWeight()).getDimSize(0);
  if (getGrad().getType() != getX().getType()) return emitOpError("expected grad to have the input's type");
  if (failed(expectDim(*this, "weight width", ty(getWeight()).getDimSize(1), "input width", ty(getX()).getDimSize(1))))
    return failure();
  Type want = getWrt() == ConvGradWrt::x ? getX().getType() : getWeight().getType();
  if (getResult().getType() != want) return emitOpError("expected the result to be ") << want << ", got " << getType();
  return success();
}

void DepthwiseConvGradOp::getKernelAttrs(KernelAttrs &a) {
  a.set("wrt", stringifyConvGradWrt(getWrt()));
  if (getCausal()) a.set("causal", true);
}

Syms DepthwiseConvGradOp::inferSeqLengths(ArrayRef<Syms> in) {
  return getWrt() == ConvGradWrt::x ? in[0] : lengths(2);  // [L, d], or the weight's static [k, d]
}

OpCost DepthwiseConvGradOp::getCost(function_ref<double(Value)> numel) {
  OpCost c = defaultCost(*this, numel);
  c.flops = 2 * numel(getX()) * dimOf(getWeight(), 0);
  return c;
}
