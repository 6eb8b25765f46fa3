// GemmOps.cpp - the GEMMs: linear, matmul, batch_matmul, the chunked FFN, and a weight's gradient:
// each op's verifier, the hooks it defines (KilnInterfaces.td) and its gradient rule, op after op.
// Verifier messages start with "expected"; dynamic dims (`?`) match anything.
#include "VerifyUtils.h"
#include "kiln/Dialect/KilnDialect.h"
#include "mlir/IR/Builders.h"

using namespace mlir;
using namespace kiln;
using namespace kiln::verify;

// A GEMM weight's in- and out-features in its layout: out_in [out, in], in_out [in, out], or
// panels [ceil(out / w), in, w] (kiln-prepack-weights: the [in, out] matrix as panels of w
// columns, the last one padded). A panel weight does not carry its exact out-features: `out`
// is given (the op's result or bias says it) and must fit the panels.
static LogicalResult weightFeatures(Operation *op, const char *role, Value w, WeightLayoutKind layout,
                                    const char *outRole, int64_t &in, int64_t &out) {
  RankedTensorType t = ty(w);
  if (layout == WeightLayoutKind::panels) {
    if (t.getRank() != 3) return op->emitOpError() << "expected the " << role << " in panels to have rank 3, got " << t;
    int64_t p = t.getDimSize(0), width = t.getDimSize(2);
    in = t.getDimSize(1);
    if (!ShapedType::isDynamic(out) && (out <= (p - 1) * width || out > p * width))
      return op->emitOpError() << "expected the " << role << "'s " << p << " panels of " << width << " columns to hold its "
                               << out << " out-features";
    return success();
  }
  if (t.getRank() != 2) return op->emitOpError() << "expected the " << role << " to have rank 2, got " << t;
  bool oi = layout == WeightLayoutKind::out_in;
  in = t.getDimSize(oi ? 1 : 0);
  int64_t o = t.getDimSize(oi ? 0 : 1);
  if (failed(expectDim(op, outRole, out, (std::string(role) + " out-features").c_str(), o))) return failure();
  out = o;
  return success();
}

static LogicalResult verifyMatmul(Operation *op, Value a, Value b, Value r, bool tb, int batch) {
  int rank = 2 + batch;
  if (failed(expectRank(op, "lhs", a, rank)) || failed(expectRank(op, "rhs", b, rank))) return failure();
  auto at = ty(a), bt = ty(b), rt = ty(r);
  if (batch && failed(expectDim(op, "lhs batch", at.getDimSize(0), "rhs batch", bt.getDimSize(0)))) return failure();
  int64_t k = bt.getDimSize(batch + (tb ? 1 : 0)), n = bt.getDimSize(batch + (tb ? 0 : 1));
  if (failed(expectDim(op, "lhs columns", at.getDimSize(batch + 1), "rhs contraction dim", k))) return failure();
  return success(succeeded(expectDim(op, "result rows", rt.getDimSize(batch), "lhs rows", at.getDimSize(batch))) &&
                 succeeded(expectDim(op, "result columns", rt.getDimSize(batch + 1), "rhs columns", n)));
}

// 2 FLOPs per output element and contraction step.
static OpCost matmulCost(Operation *op, function_ref<double(Value)> numel) {
  OpCost c = defaultCost(op, numel);
  c.flops = 2 * numel(op->getResult(0)) * dimOf(op->getOperand(0), ty(op->getOperand(0)).getRank() - 1);
  return c;
}

LogicalResult LinearOp::verify() {
  auto xt = ty(getX()), rt = ty(getResult());
  if (xt.getRank() != rt.getRank()) return emitOpError("expected the result to have the input's rank");
  int64_t in, out = rt.getDimSize(rt.getRank() - 1);
  if (int bytes = quantBlockBytes(getWeightFormat())) {  // bytes [out, in / 32, block bytes]
    auto wt = ty(getWeight());
    if (getWeightLayout() != WeightLayoutKind::out_in || wt.getRank() != 3 || wt.getDimSize(2) != bytes ||
        !wt.getElementType().isInteger(8))
      return emitOpError("expected a ") << stringifyWeightFormat(getWeightFormat()) << " weight as bytes [out, in / 32, " << bytes
                                        << "] in layout out_in, got " << getWeight().getType();
    in = wt.getDimSize(1) * kQuantBlock;
    if (failed(expectDim(*this, "result features", out, "weight out-features", wt.getDimSize(0)))) return failure();
  } else if (failed(weightFeatures(*this, "weight", getWeight(), getWeightLayout(), "result features", in, out))) {
    return failure();
  }
  if (failed(expectDim(*this, "input features", xt.getDimSize(xt.getRank() - 1), "weight in-features", in))) return failure();
  if (getBias() && (ty(getBias()).getRank() != 1 || !compatible(ty(getBias()).getDimSize(0), out)))
    return emitOpError("expected a bias of shape [") << out << "], got " << ty(getBias());
  return success();
}

void LinearOp::getKernelAttrs(KernelAttrs &a) {
  a.set("layout", stringifyWeightLayoutKind(getWeightLayout()));
  a.set("act", stringifyActivationKind(getActivation()));
  if (getWeightFormat() != WeightFormat::f32) a.set("format", stringifyWeightFormat(getWeightFormat()));
}

Syms LinearOp::inferSeqLengths(ArrayRef<Syms> in) {
  Syms r = in[0];
  r.back() = -1;
  return r;
}

OpCost LinearOp::getCost(function_ref<double(Value)> numel) {
  OpCost c = defaultCost(*this, numel);
  double out = numel(getResult()), k = dimOf(getX(), ty(getX()).getRank() - 1);
  c.flops = 2 * out * k + (getBias() ? out : 0) + (getActivation() == ActivationKind::none ? 0 : 8 * out);
  return c;
}

// y = x·Wᵀ + b (out_in, W [out, in]) or x·W + b (in_out, W [in, out]):
// dx = dy·W or dy·Wᵀ, dW = dyᵀ·x or xᵀ·dy (kiln.weight_grad), db = the sum of dy's rows.
LogicalResult LinearOp::buildGradient(OpBuilder &b, ArrayRef<Value> g, SmallVectorImpl<Value> &out) {
  WeightLayoutKind layout = getWeightLayout();
  if (layout == WeightLayoutKind::panels) return emitOpError("gradient: a weight in panels (kiln-prepack-weights ran first)");
  if (getWeightFormat() != WeightFormat::f32) return emitOpError("gradient: a quantized weight (kiln trains f32 weights)");
  if (getActivation() != ActivationKind::none)
    return emitOpError("gradient: a fused activation (kiln-fuse-epilogue ran first)");
  if (ty(getX()).getRank() != 2) return emitOpError("gradient: only a 2-D input is differentiable, got ") << getX().getType();
  Location loc = getLoc();
  bool outIn = layout == WeightLayoutKind::out_in;
  out.push_back(MatMulOp::create(b, loc, getX().getType(), g[0], getWeight(), b.getBoolAttr(!outIn)));
  out.push_back(WeightGradOp::create(b, loc, getWeight().getType(), getX(), g[0], getWeightLayoutAttr()));
  if (getBias()) out.push_back(ReduceRowsOp::create(b, loc, getBias().getType(), g[0]));
  return success();
}

LogicalResult MatMulOp::verify() { return verifyMatmul(*this, getLhs(), getRhs(), getResult(), getTransposeB(), 0); }

void MatMulOp::getKernelAttrs(KernelAttrs &a) { a.setBool("transpose_b", getTransposeB()); }

Syms MatMulOp::inferSeqLengths(ArrayRef<Syms> in) { return {in[0][0], in[1][getTransposeB() ? 0 : 1]}; }

OpCost MatMulOp::getCost(function_ref<double(Value)> numel) { return matmulCost(*this, numel); }

// C = A·B: dA = dC·Bᵀ, dB = Aᵀ·dC; C = A·Bᵀ: dA = dC·B, dB = dCᵀ·A.
LogicalResult MatMulOp::buildGradient(OpBuilder &b, ArrayRef<Value> g, SmallVectorImpl<Value> &out) {
  Location loc = getLoc();
  bool tb = getTransposeB();
  out.push_back(MatMulOp::create(b, loc, getLhs().getType(), g[0], getRhs(), b.getBoolAttr(!tb)));
  out.push_back(WeightGradOp::create(b, loc, getRhs().getType(), getLhs(), g[0], WeightLayoutKindAttr::get(b.getContext(), tb ? WeightLayoutKind::out_in : WeightLayoutKind::in_out)));
  return success();
}

LogicalResult BatchMatMulOp::verify() {
  return verifyMatmul(*this, getLhs(), getRhs(), getResult(), getTransposeB(), 1);
}

void BatchMatMulOp::getKernelAttrs(KernelAttrs &a) { a.setBool("transpose_b", getTransposeB()); }

Syms BatchMatMulOp::inferSeqLengths(ArrayRef<Syms> in) { return {in[0][0], in[0][1], in[1][getTransposeB() ? 1 : 2]}; }

OpCost BatchMatMulOp::getCost(function_ref<double(Value)> numel) { return matmulCost(*this, numel); }

LogicalResult FfnOp::verify() {
  auto x = ty(getX()), r = ty(getResult());
  if (x.getRank() != 2 || r.getRank() != 2) return emitOpError("expected [rows, features] input and result");
  if (ty(getB1()).getRank() != 1 || ty(getB2()).getRank() != 1) return emitOpError("expected 1-D biases");
  // The out-features of a weight in panels come from its bias.
  int64_t in1, ff = ty(getB1()).getDimSize(0), ff2, out = ty(getB2()).getDimSize(0);
  if (failed(weightFeatures(*this, "W1", getW1(), getLayout1(), "b1 length", in1, ff)) ||
      failed(weightFeatures(*this, "W2", getW2(), getLayout2(), "b2 length", ff2, out)))
    return failure();
  if (failed(expectDim(*this, "input features", x.getDimSize(1), "W1 in-features", in1)) ||
      failed(expectDim(*this, "W1 out-features", ff, "W2 in-features", ff2)) ||
      failed(expectDim(*this, "result features", r.getDimSize(1), "W2 out-features", out)))
    return failure();
  if (getResidual() && getResidual().getType() != getResult().getType())
    return emitOpError("expected the residual to have the result's type");
  return success();
}

void FfnOp::getKernelAttrs(KernelAttrs &a) {
  a.set("layout1", stringifyWeightLayoutKind(getLayout1()));
  a.set("layout2", stringifyWeightLayoutKind(getLayout2()));
  a.set("act", stringifyActivationKind(getActivation()));
}

// Both GEMMs, the bias and the activation over the intermediate.
OpCost FfnOp::getCost(function_ref<double(Value)> numel) {
  OpCost c = defaultCost(*this, numel);
  double rows = numel(getX()) / dimOf(getX(), 1), d = dimOf(getX(), 1), dff = dimOf(getB1(), 0);
  c.flops = 2 * rows * d * dff * 2 + 10 * rows * dff;
  return c;
}

LogicalResult WeightGradOp::verify() {
  bool outIn = getWeightLayout() == WeightLayoutKind::out_in;
  if (getWeightLayout() == WeightLayoutKind::panels) return emitOpError("expected weight_layout out_in or in_out, got panels");
  if (failed(expectRank(*this, "x", getX(), 2)) || failed(expectRank(*this, "grad", getGrad(), 2)) ||
      failed(expectRank(*this, "result", getResult(), 2)))
    return failure();
  auto xt = ty(getX()), gt = ty(getGrad()), rt = ty(getResult());
  int64_t K = xt.getDimSize(1), N = gt.getDimSize(1);
  return success(succeeded(expectDim(*this, "grad rows", gt.getDimSize(0), "x rows", xt.getDimSize(0))) &&
                 succeeded(expectDim(*this, "result dim 0", rt.getDimSize(0), outIn ? "grad width" : "x width",
                                     outIn ? N : K)) &&
                 succeeded(expectDim(*this, "result dim 1", rt.getDimSize(1), outIn ? "x width" : "grad width",
                                     outIn ? K : N)));
}

void WeightGradOp::getKernelAttrs(KernelAttrs &a) { a.set("layout", stringifyWeightLayoutKind(getWeightLayout())); }

Syms WeightGradOp::inferSeqLengths(ArrayRef<Syms> in) {
  if (getWeightLayout() == WeightLayoutKind::out_in) return {in[1][1], in[0][1]};
  return {in[0][1], in[1][1]};
}

OpCost WeightGradOp::getCost(function_ref<double(Value)> numel) {
  OpCost c = defaultCost(*this, numel);
  c.flops = 2 * numel(getResult()) * (numel(getX()) / dimOf(getX(), 1));
  return c;
}
