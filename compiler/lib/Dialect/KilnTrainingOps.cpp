// KilnTrainingOps.cpp - the training ops (KilnOps.td's last section): the loss, constants and
// the backward's kernels. Each op's verifier and its hooks, in KilnOps.td's order. Verifier
// messages start with "expected"; dynamic dims (`?`) match anything.
#include <cmath>

#include "VerifyUtils.h"
#include "kiln/Dialect/KilnDialect.h"
#include "mlir/IR/Builders.h"

using namespace mlir;
using namespace kiln;

using namespace kiln::verify;

namespace {
LogicalResult expectShape(Operation *op, const char *a, Value va, const char *b, Value vb) {
  auto at = ty(va), bt = ty(vb);
  bool same = at.getRank() == bt.getRank();
  for (int64_t d = 0; same && d < at.getRank(); ++d) same = compatible(at.getDimSize(d), bt.getDimSize(d));
  if (same) return success();
  return op->emitOpError() << "expected the " << a << " (" << at << ") and the " << b << " (" << bt << ") to have one shape";
}
// logits [N, V] and targets i32 [N].
LogicalResult verifyLogitsTargets(Operation *op, Value logits, Value targets) {
  if (failed(expectRank(op, "logits", logits, 2)) || failed(expectRank(op, "targets", targets, 1))) return failure();
  if (!ty(targets).getElementType().isInteger(32)) return op->emitOpError("expected i32 targets");
  return expectDim(op, "targets length", ty(targets).getDimSize(0), "logits rows", ty(logits).getDimSize(0));
}
}  // namespace

LogicalResult FillOp::verify() {
  if (!ty(getResult()).hasStaticShape()) return emitOpError("expected a static result shape, got ") << getType();
  return success();
}
void FillOp::getKernelAttrs(KernelAttrs &a) { a.setFloat("value", getValue().convertToFloat()); }

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

LogicalResult MeanGradOp::verify() {
  if (ty(getGrad()).getShape() != ArrayRef<int64_t>{1}) return emitOpError("expected a [1] grad, got ") << getGrad().getType();
  if (getResult().getType() != getLike().getType()) return emitOpError("expected the result to have like's type ") << getLike().getType();
  return success();
}
Syms MeanGradOp::inferSeqLengths(ArrayRef<Syms> in) { return in[1]; }

LogicalResult WeightGradOp::verify() {
  bool outIn = getWeightLayout() == "out_in";
  if (!outIn && getWeightLayout() != "in_out")
    return emitOpError("expected weight_layout \"out_in\" or \"in_out\", got \"") << getWeightLayout() << "\"";
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
void WeightGradOp::getKernelAttrs(KernelAttrs &a) { a.set("layout", getWeightLayout()); }
Syms WeightGradOp::inferSeqLengths(ArrayRef<Syms> in) {
  if (getWeightLayout() == "out_in") return {in[1][1], in[0][1]};
  return {in[0][1], in[1][1]};
}
OpCost WeightGradOp::getCost(function_ref<double(Value)> numel) {
  OpCost c = defaultCost(*this, numel);
  c.flops = 2 * numel(getResult()) * (numel(getX()) / dimOf(getX(), 1));
  return c;
}

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

LogicalResult LayerNormGradOp::verify() {
  bool input = getWrt() == "input";
  if (!input && getWrt() != "gamma") return emitOpError("expected wrt \"input\" or \"gamma\", got \"") << getWrt() << "\"";
  if (failed(expectShape(*this, "input", getInput(), "grad", getGrad())) ||
      failed(expectRank(*this, "gamma", getGamma(), 1)))
    return failure();
  auto it = ty(getInput());
  if (failed(expectDim(*this, "gamma width", ty(getGamma()).getDimSize(0), "input width", it.getDimSize(it.getRank() - 1))))
    return failure();
  return input ? expectShape(*this, "result", getResult(), "input", getInput())
               : expectShape(*this, "result", getResult(), "gamma", getGamma());
}
void LayerNormGradOp::getKernelAttrs(KernelAttrs &a) {
  a.setFloat("eps", getEpsilon().convertToFloat());
  a.set("wrt", getWrt());
  patternKernelAttrs(*this, a);
}
Syms LayerNormGradOp::inferSeqLengths(ArrayRef<Syms> in) { return getWrt() == "input" ? in[0] : Syms{-1}; }
OpCost LayerNormGradOp::getCost(function_ref<double(Value)> numel) {
  OpCost c = defaultCost(*this, numel);
  c.flops = 10 * numel(getInput());
  return c;
}

OpCost SoftmaxGradOp::getCost(function_ref<double(Value)> numel) {
  OpCost c = defaultCost(*this, numel);
  c.flops = 4 * numel(getResult());
  return c;
}

LogicalResult EmbeddingGradOp::verify() {
  if (failed(expectRank(*this, "ids", getIds(), 1)) || failed(expectRank(*this, "grad", getGrad(), 2)) ||
      failed(expectRank(*this, "result", getResult(), 2)))
    return failure();
  if (!ty(getIds()).getElementType().isInteger(32)) return emitOpError("expected i32 token ids");
  if (!ty(getResult()).hasStaticShape()) return emitOpError("expected a static table shape, got ") << getType();
  if (getInto() && ty(getInto()) != ty(getResult()))
    return emitOpError("expected `into` of the result's type ") << getType() << ", got " << getInto().getType();
  return success(
      succeeded(expectDim(*this, "grad rows", ty(getGrad()).getDimSize(0), "ids length", ty(getIds()).getDimSize(0))) &&
      succeeded(expectDim(*this, "table width", ty(getResult()).getDimSize(1), "grad width", ty(getGrad()).getDimSize(1))));
}
Syms EmbeddingGradOp::inferSeqLengths(ArrayRef<Syms>) { return Syms{-1, -1}; }
OpCost EmbeddingGradOp::getCost(function_ref<double(Value)> numel) {
  OpCost c = defaultCost(*this, numel);
  c.flops = numel(getGrad());
  return c;
}

LogicalResult PositionIdsOp::verify() {
  if (failed(expectRank(*this, "like", getLike(), 1)) || failed(expectRank(*this, "result", getResult(), 1)))
    return failure();
  if (!ty(getResult()).getElementType().isInteger(32)) return emitOpError("expected i32 position ids");
  return expectDim(*this, "result length", ty(getResult()).getDimSize(0), "like length", ty(getLike()).getDimSize(0));
}
Syms PositionIdsOp::inferSeqLengths(ArrayRef<Syms> in) { return in[0]; }

LogicalResult PadOp::verify() {
  auto it = ty(getInput()), lt = ty(getLike());
  if (failed(expectShape(*this, "result", getResult(), "like", getLike()))) return failure();
  int64_t axis = getAxis(), off = getOffset();
  if (it.getRank() != lt.getRank()) return emitOpError("expected the input and like of one rank");
  if (axis < 0 || axis >= lt.getRank()) return emitOpError("expected an axis within the rank");
  for (int64_t d = 0; d < lt.getRank(); ++d)
    if (d != axis && failed(expectDim(*this, "input dim", it.getDimSize(d), "like dim", lt.getDimSize(d))))
      return failure();
  int64_t n = it.getDimSize(axis), m = lt.getDimSize(axis);
  if (off < -1 || (off == -1 && n != 1)) return emitOpError("expected offset >= 0, or -1 (the last) for a size-1 input");
  if (off >= 0 && !ShapedType::isDynamic(n) && !ShapedType::isDynamic(m) && off + n > m)
    return emitOpError() << "expected the input's " << n << " rows at offset " << off << " to fit in " << m;
  return success();
}
void PadOp::getKernelAttrs(KernelAttrs &a) {
  a.set("axis", (int64_t)getAxis());
  a.set("offset", (int64_t)getOffset());
}
Syms PadOp::inferSeqLengths(ArrayRef<Syms> in) { return in[1]; }
LogicalResult PadOp::buildGradient(OpBuilder &, ArrayRef<Value>, SmallVectorImpl<Value> &) {
  return emitOpError("has no gradient rule (a gradient of a gradient)");
}

LogicalResult AttentionGradOp::verify() {
  StringRef w = getWrt();
  if (w != "query" && w != "key" && w != "value")
    return emitOpError("expected wrt \"query\", \"key\" or \"value\", got \"") << w << "\"";
  for (auto [role, v] : {std::pair<const char *, Value>{"query", getQuery()}, {"key", getKey()}, {"value", getValue()},
                         {"out", getOut()}, {"grad", getGrad()}})
    if (failed(expectRank(*this, role, v, 3))) return failure();
  auto q = ty(getQuery()), k = ty(getKey()), v = ty(getValue());
  if (failed(verifyAttentionPattern(*this, q.getDimSize(1), k.getDimSize(1)))) return failure();
  if (failed(expectShape(*this, "out", getOut(), "grad", getGrad())) ||
      failed(expectDim(*this, "key heads", k.getDimSize(0), "query heads", q.getDimSize(0))) ||
      failed(expectDim(*this, "key width", k.getDimSize(2), "query width", q.getDimSize(2))) ||
      failed(expectDim(*this, "value rows", v.getDimSize(1), "key rows", k.getDimSize(1))) ||
      failed(expectDim(*this, "out rows", ty(getOut()).getDimSize(1), "query rows", q.getDimSize(1))) ||
      failed(expectDim(*this, "out width", ty(getOut()).getDimSize(2), "value width", v.getDimSize(2))))
    return failure();
  Value lse = getLse();
  if (failed(expectRank(*this, "lse", lse, 2)) ||
      failed(expectDim(*this, "lse heads", ty(lse).getDimSize(0), "query heads", q.getDimSize(0))) ||
      failed(expectDim(*this, "lse rows", ty(lse).getDimSize(1), "query rows", q.getDimSize(1))))
    return failure();
  Value of = w == "query" ? getQuery() : w == "key" ? getKey() : getValue();
  return expectShape(*this, "result", getResult(), w.str() == "query" ? "query" : w == "key" ? "key" : "value", of);
}
void AttentionGradOp::getKernelAttrs(KernelAttrs &a) {
  a.set("mask", getMask());
  a.setFloat("scale", getScale().convertToFloat());
  a.set("wrt", getWrt());
  patternKernelAttrs(*this, a);
}
Syms AttentionGradOp::inferSeqLengths(ArrayRef<Syms> in) {
  return getWrt() == "query" ? in[0] : getWrt() == "key" ? in[1] : in[2];
}
// The scores once more, then dP and the product wanted.
OpCost AttentionGradOp::getCost(function_ref<double(Value)> numel) {
  OpCost c = defaultCost(*this, numel);
  double lk = numel(getKey()) / dimOf(getKey(), 2) / dimOf(getKey(), 0);
  double lqh = numel(getQuery()) / dimOf(getQuery(), 2);
  double d = dimOf(getQuery(), 2), dv = dimOf(getValue(), 2);
  double pairs = lqh * lk * (getMask() == "causal" ? 0.5 : 1.0);
  sparse::Pattern p = patternOf(*this);  // the blocks the schedule visits
  if (!p.kind.empty()) pairs = dimOf(getQuery(), 0) * sparse::countWork(p, (int64_t)lk).visited;
  c.flops = pairs * (2 * d + 4 * dv + 8);
  return c;
}

LogicalResult LshChunkAttentionGradOp::verify() {
  StringRef w = getWrt();
  if (w != "qk" && w != "value") return emitOpError("expected wrt \"qk\" or \"value\", got \"") << w << "\"";
  if (getChunk() < 1) return emitOpError("expected a positive chunk");
  for (auto [role, v] : {std::pair<const char *, Value>{"qk", getQk()}, {"value", getValue()}, {"buckets", getBuckets()},
                         {"out", getOut()}, {"grad", getGrad()}})
    if (failed(expectRank(*this, role, v, 3))) return failure();
  if (failed(expectRank(*this, "sorted", getSorted(), 4)) || failed(expectShape(*this, "out", getOut(), "grad", getGrad())) ||
      failed(expectDim(*this, "sorted rounds", ty(getSorted()).getDimSize(1), "bucket rounds", ty(getBuckets()).getDimSize(1))) ||
      failed(expectDim(*this, "value rows", ty(getValue()).getDimSize(1), "qk rows", ty(getQk()).getDimSize(1))) ||
      failed(expectDim(*this, "out width", ty(getOut()).getDimSize(2), "value width", ty(getValue()).getDimSize(2))))
    return failure();
  return expectShape(*this, "result", getResult(), w == "qk" ? "qk" : "value", w == "qk" ? getQk() : getValue());
}
void LshChunkAttentionGradOp::getKernelAttrs(KernelAttrs &a) {
  a.set("chunk", (int64_t)getChunk());
  a.setFloat("scale", getScale().convertToFloat());
  if (getCausal()) a.set("causal", "1");
  a.set("wrt", getWrt());
  patternKernelAttrs(*this, a);
}
Syms LshChunkAttentionGradOp::inferSeqLengths(ArrayRef<Syms> in) { return getWrt() == "qk" ? in[0] : in[1]; }
// Per query and round, two chunks of keys: the scores and dP once more, and the sums wanted
// (the qk gradient: the scores and dS twice, as query and as key).
OpCost LshChunkAttentionGradOp::getCost(function_ref<double(Value)> numel) {
  OpCost c = defaultCost(*this, numel);
  double d = dimOf(getQk(), 2), dv = dimOf(getValue(), 2), rounds = dimOf(getBuckets(), 1);
  double pairs = numel(getQk()) / d * rounds * 2.0 * (double)getChunk();
  c.flops = getWrt() == "qk" ? pairs * (3 * (2 * d + 2 * dv + 8) + 4 * d) : pairs * (2 * (2 * d + 4) + 2 * dv + 2 * dv);
  return c;
}

namespace {
LogicalResult expectScalar(Operation *op, const char *role, Value v) {
  if (ty(v).getShape() == ArrayRef<int64_t>{1} && ty(v).getElementType().isF32()) return success();
  return op->emitOpError() << "expected the " << role << " to be a [1] f32 scalar, got " << v.getType();
}
}  // namespace

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
  if (getWarmup() < 0 || getDecaySteps() < 0) return emitOpError("expected non-negative warmup and decay_steps");
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
