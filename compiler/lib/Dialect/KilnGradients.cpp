// KilnGradients.cpp - each differentiable kiln op's vector-Jacobian product (its buildGradient
// hook, KilnInterfaces.td), one op after another in KilnOps.td's order. A rule builds, at the
// builder's insertion point, the gradient of each operand from the gradients of the results,
// in kiln ops that the later passes fuse, tile and schedule like the forward's. Operands
// without a gradient (token ids, a position count) get null. An unsupported case is an error
// at the op's model line.
#include "VerifyUtils.h"
#include "kiln/Dialect/KilnDialect.h"
#include "mlir/IR/Builders.h"

using namespace mlir;
using namespace kiln;

using kiln::verify::ty;

namespace {
// `g` summed down to `target`'s type where `target` was broadcast over g's leading dims (the
// right operand of add and mul): the sum over every dim but the last.
FailureOr<Value> sumTo(Operation *op, OpBuilder &b, Value g, Value target) {
  auto gt = ty(g), tt = ty(target);
  if (gt.getRank() == tt.getRank()) return g;
  if (tt.getRank() != 1)
    return op->emitOpError() << "gradient: an operand " << tt << " broadcast to " << gt
                             << " (only a [d] operand broadcast over rows is differentiable)";
  return Value(ReduceRowsOp::create(b, op->getLoc(), tt, g));
}
}  // namespace

LogicalResult EmbeddingOp::buildGradient(OpBuilder &b, ArrayRef<Value> g, SmallVectorImpl<Value> &out) {
  if (getTableLayout() != "rows") return emitOpError("gradient: a table in panels (kiln-prepack-weights ran first)");
  out.push_back(EmbeddingGradOp::create(b, getLoc(), getTable().getType(), getIds(), g[0], Value()));
  out.push_back(Value());
  return success();
}

// Rows [0, L) of the table: table row p gets the gradient of every row at position p (one
// per sequence; zeros past L), added in row order like an embedding's.
LogicalResult PositionEmbeddingOp::buildGradient(OpBuilder &b, ArrayRef<Value> g, SmallVectorImpl<Value> &out) {
  auto lt = cast<RankedTensorType>(getLike().getType());
  Value pos = PositionIdsOp::create(b, getLoc(), RankedTensorType::get(lt.getShape(), b.getI32Type()), getLike());
  out.push_back(EmbeddingGradOp::create(b, getLoc(), getTable().getType(), pos, g[0], Value()));
  out.push_back(Value());
  return success();
}

// Fixed signals: no gradient (`like` gives the shape only).
LogicalResult SinusoidalPositionsOp::buildGradient(OpBuilder &, ArrayRef<Value>, SmallVectorImpl<Value> &out) {
  out.append(getNumOperands(), Value());
  return success();
}

// y = x·Wᵀ + b (out_in, W [out, in]) or x·W + b (in_out, W [in, out]):
// dx = dy·W or dy·Wᵀ, dW = dyᵀ·x or xᵀ·dy (kiln.weight_grad), db = the sum of dy's rows.
LogicalResult LinearOp::buildGradient(OpBuilder &b, ArrayRef<Value> g, SmallVectorImpl<Value> &out) {
  StringRef layout = getWeightLayout();
  if (layout == "panels") return emitOpError("gradient: a weight in panels (kiln-prepack-weights ran first)");
  if (getActivation() != ActivationKind::none)
    return emitOpError("gradient: a fused activation (kiln-fuse-epilogue ran first)");
  if (ty(getX()).getRank() != 2) return emitOpError("gradient: only a 2-D input is differentiable, got ") << getX().getType();
  Location loc = getLoc();
  bool outIn = layout == "out_in";
  out.push_back(MatMulOp::create(b, loc, getX().getType(), g[0], getWeight(), b.getBoolAttr(!outIn)));
  out.push_back(WeightGradOp::create(b, loc, getWeight().getType(), getX(), g[0], b.getStringAttr(layout)));
  if (getBias()) out.push_back(ReduceRowsOp::create(b, loc, getBias().getType(), g[0]));
  return success();
}

// C = A·B: dA = dC·Bᵀ, dB = Aᵀ·dC; C = A·Bᵀ: dA = dC·B, dB = dCᵀ·A.
LogicalResult MatMulOp::buildGradient(OpBuilder &b, ArrayRef<Value> g, SmallVectorImpl<Value> &out) {
  Location loc = getLoc();
  bool tb = getTransposeB();
  out.push_back(MatMulOp::create(b, loc, getLhs().getType(), g[0], getRhs(), b.getBoolAttr(!tb)));
  out.push_back(WeightGradOp::create(b, loc, getRhs().getType(), getLhs(), g[0], b.getStringAttr(tb ? "out_in" : "in_out")));
  return success();
}

LogicalResult AddOp::buildGradient(OpBuilder &b, ArrayRef<Value> g, SmallVectorImpl<Value> &out) {
  FailureOr<Value> r = sumTo(*this, b, g[0], getRhs());
  if (failed(r)) return failure();
  out.push_back(g[0]);
  out.push_back(*r);
  return success();
}

LogicalResult MulOp::buildGradient(OpBuilder &b, ArrayRef<Value> g, SmallVectorImpl<Value> &out) {
  Location loc = getLoc();
  out.push_back(MulOp::create(b, loc, getLhs().getType(), g[0], getRhs()));
  FailureOr<Value> r = sumTo(*this, b, MulOp::create(b, loc, g[0].getType(), g[0], getLhs()), getRhs());
  if (failed(r)) return failure();
  out.push_back(*r);
  return success();
}

LogicalResult ScaleOp::buildGradient(OpBuilder &b, ArrayRef<Value> g, SmallVectorImpl<Value> &out) {
  out.push_back(ScaleOp::create(b, getLoc(), getType(), g[0], getFactorAttr()));
  return success();
}

LogicalResult SoftmaxOp::buildGradient(OpBuilder &b, ArrayRef<Value> g, SmallVectorImpl<Value> &out) {
  out.push_back(SoftmaxGradOp::create(b, getLoc(), getType(), getResult(), g[0]));
  return success();
}

// dx from the saved input (the row statistics are recomputed); dgamma = sum over rows of
// dy·x̂; dbeta = sum over rows of dy.
LogicalResult LayerNormOp::buildGradient(OpBuilder &b, ArrayRef<Value> g, SmallVectorImpl<Value> &out) {
  Location loc = getLoc();
  out.push_back(LayerNormGradOp::create(b, loc, getInput().getType(), getInput(), getGamma(), g[0], getEpsilonAttr(),
                                        b.getStringAttr("input")));
  out.push_back(LayerNormGradOp::create(b, loc, getGamma().getType(), getInput(), getGamma(), g[0], getEpsilonAttr(),
                                        b.getStringAttr("gamma")));
  out.push_back(ReduceRowsOp::create(b, loc, getBeta().getType(), g[0]));
  return success();
}

LogicalResult ReshapeOp::buildGradient(OpBuilder &b, ArrayRef<Value> g, SmallVectorImpl<Value> &out) {
  out.push_back(ReshapeOp::create(b, getLoc(), getInput().getType(), g[0]));
  return success();
}

LogicalResult TransposeOp::buildGradient(OpBuilder &b, ArrayRef<Value> g, SmallVectorImpl<Value> &out) {
  ArrayRef<int64_t> p = getPermutation();
  SmallVector<int64_t> inv(p.size());
  for (size_t i = 0; i < p.size(); ++i) inv[p[i]] = (int64_t)i;
  out.push_back(TransposeOp::create(b, getLoc(), getInput().getType(), g[0], b.getDenseI64ArrayAttr(inv)));
  return success();
}

// Each input's gradient is its range of the result's.
LogicalResult ConcatOp::buildGradient(OpBuilder &b, ArrayRef<Value> g, SmallVectorImpl<Value> &out) {
  int64_t axis = getAxis(), off = 0;
  for (Value x : getInputs()) {
    out.push_back(SliceOp::create(b, getLoc(), x.getType(), g[0], b.getI64IntegerAttr(axis), b.getI64IntegerAttr(off)));
    off += ty(x).getDimSize(axis);
  }
  return success();
}

// The slice's gradient in zeros shaped like its input (the slices of one tensor add up).
LogicalResult SliceOp::buildGradient(OpBuilder &b, ArrayRef<Value> g, SmallVectorImpl<Value> &out) {
  out.push_back(PadOp::create(b, getLoc(), getInput().getType(), g[0], getInput(), getAxisAttr(), getOffsetAttr()));
  return success();
}

LogicalResult AttentionOp::buildGradient(OpBuilder &b, ArrayRef<Value> g, SmallVectorImpl<Value> &out) {
  if (getPast()) return emitOpError("gradient: attention over a cache (past or key_count) is not differentiable");
  if (g.size() > 1 && g[1]) return emitOpError("gradient: the loss may not depend on an attention's lse result");
  // Every query row's log-sum-exp, for the three gradients: the forward attention writes it
  // as its lse result, from the running max and sum it keeps anyway. Without one yet, this op
  // is rebuilt with it just after itself and its uses move there; the original, unused, goes
  // with the other dead ops at the end of kiln-differentiate.
  Value o = getResult(), lse = getLse();
  if (!lse) {
    auto q = cast<RankedTensorType>(getQuery().getType());
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointAfter(*this);
    OperationState st(getLoc(), getOperationName());
    st.addOperands(getOperation()->getOperands());
    st.addTypes({o.getType(), RankedTensorType::get({q.getDimSize(0), q.getDimSize(1)}, q.getElementType())});
    st.addAttributes(getOperation()->getAttrs());
    Operation *with = b.create(st);
    o.replaceAllUsesWith(with->getResult(0));
    o = with->getResult(0), lse = with->getResult(1);
  }
  for (StringRef w : {"query", "key", "value"}) {
    Value of = w == "query" ? getQuery() : w == "key" ? getKey() : getValue();
    // A sparse pattern's gradients state it as the attention does (kiln-tile-sparse-pattern
    // gives them its block schedule).
    out.push_back(AttentionGradOp::create(b, getLoc(), of.getType(), getQuery(), getKey(), getValue(), o, g[0], lse,
                                          getMaskAttr(), getScaleAttr(), b.getStringAttr(w), getPatternSizeAttr(),
                                          getSummaryAttr(), getPartAttr(), getLayoutAttr(), getNoncausalAttr()));
    if (Attribute sp = (*this)->getAttr("kiln.sparse")) out.back().getDefiningOp()->setAttr("kiln.sparse", sp);
  }
  return success();
}

LogicalResult CrossEntropyOp::buildGradient(OpBuilder &b, ArrayRef<Value> g, SmallVectorImpl<Value> &out) {
  out.push_back(CrossEntropyGradOp::create(b, getLoc(), getLogits().getType(), getLogits(), getTargets(), g[0],
                                           getIgnoreIndexAttr()));
  out.push_back(Value());
  return success();
}

// The buckets are constants (argmax has no gradient) and the backward must see the forward's:
// the forward is lowered here, as kiln-lower-lsh-attention would, into lsh_hash, lsh_sort and
// lsh_chunk_attention (with this op's kiln.* marks: a reversible layer's F reuses the hash and
// order when it runs again), and both gradients read that hash and order. The rotations are
// fixed: no gradient.
LogicalResult LshAttentionOp::buildGradient(OpBuilder &b, ArrayRef<Value> g, SmallVectorImpl<Value> &out) {
  Location loc = getLoc();
  Value buckets, sorted, o;
  {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointAfter(*this);
    auto qt = cast<RankedTensorType>(getQk().getType());
    int64_t H = qt.getDimSize(0), L = qt.getDimSize(1), R = (int64_t)getHashes();
    auto i32 = b.getI32Type();
    Operation *hash = LshHashOp::create(b, loc, RankedTensorType::get({H, R, L}, i32), getQk(), getRotations());
    buckets = hash->getResult(0);
    Operation *sort = LshSortOp::create(b, loc, RankedTensorType::get({H, R, 2, L}, i32), buckets);
    sorted = sort->getResult(0);
    Operation *attn = LshChunkAttentionOp::create(b, loc, getType(), getQk(), getValue(), buckets, sorted, getChunkAttr(),
                                                  getCausalAttr(), getScaleAttr());
    o = attn->getResult(0);
    for (NamedAttribute a : (*this)->getDiscardableAttrs())
      if (a.getName().getValue().starts_with("kiln."))
        for (Operation *op : {hash, sort, attn}) op->setAttr(a.getName(), a.getValue());
    getResult().replaceAllUsesWith(o);
  }
  for (StringRef w : {"qk", "value"})
    out.push_back(LshChunkAttentionGradOp::create(b, loc, w == "qk" ? getQk().getType() : getValue().getType(), getQk(),
                                                  getValue(), buckets, sorted, o, g[0], getChunkAttr(), getCausalAttr(),
                                                  getScaleAttr(), b.getStringAttr(w)));
  out.push_back(Value());
  return success();
}

// ACT (kiln-unroll-act unrolls a differentiated entry's kiln.recurrent into these). The carry
// [L, 2d+3] holds the state, the weighted output, h, r and n: the first state is columns [0, d)
// of act_init's result, a step's input reads them, hidden and ponder (n + r) are columns.
LogicalResult ActInitOp::buildGradient(OpBuilder &b, ArrayRef<Value> g, SmallVectorImpl<Value> &out) {
  out.push_back(SliceOp::create(b, getLoc(), getX().getType(), g[0], b.getI64IntegerAttr(1), b.getI64IntegerAttr(0)));
  return success();
}

LogicalResult ActInputOp::buildGradient(OpBuilder &b, ArrayRef<Value> g, SmallVectorImpl<Value> &out) {
  out.push_back(PadOp::create(b, getLoc(), getCarry().getType(), g[0], getCarry(), b.getI64IntegerAttr(1), b.getI64IntegerAttr(0)));
  out.push_back(Value());  // the position signal: fixed
  out.push_back(Value());  // the step
  return success();
}

// The update count n and each step's halting decision are constants (Graves 2016): gradients
// flow through the halting probabilities and the remainder only. kiln.act_update_grad reads
// the decisions from the carry and the result.
LogicalResult ActUpdateOp::buildGradient(OpBuilder &b, ArrayRef<Value> g, SmallVectorImpl<Value> &out) {
  Location loc = getLoc();
  for (StringRef w : {"carry", "x", "y", "halt_weight", "halt_bias"}) {
    Type t = w == "carry" ? getCarry().getType() : w == "x" ? getX().getType() : w == "y" ? getY().getType()
             : w == "halt_weight" ? getHaltWeight().getType() : getHaltBias().getType();
    out.push_back(ActUpdateGradOp::create(b, loc, t, getCarry(), getResult(), getX(), getY(), getHaltWeight(),
                                          getHaltBias(), g[0], b.getStringAttr(w)));
  }
  out.push_back(Value());  // the step
  return success();
}

LogicalResult ActOutputOp::buildGradient(OpBuilder &b, ArrayRef<Value> g, SmallVectorImpl<Value> &out) {
  StringRef f = getField();
  if (f == "steps") return emitOpError("gradient: the step counts are integers");
  Location loc = getLoc();
  auto ct = cast<RankedTensorType>(getCarry().getType());
  int64_t d = (ct.getDimSize(1) - 3) / 2;
  Value col = g[0];
  if (f == "ponder")  // n + r: the remainder's column; n is a constant
    col = ReshapeOp::create(b, loc, RankedTensorType::get({ct.getDimSize(0), 1}, ct.getElementType()), g[0]);
  out.push_back(PadOp::create(b, loc, ct, col, getCarry(), b.getI64IntegerAttr(1),
                              b.getI64IntegerAttr(f == "hidden" ? d : 2 * d + 1)));
  return success();
}

LogicalResult DepthwiseConvOp::buildGradient(OpBuilder &b, ArrayRef<Value> g, SmallVectorImpl<Value> &out) {
  Location loc = getLoc();
  for (StringRef w : {"x", "weight"})
    out.push_back(DepthwiseConvGradOp::create(b, loc, w == "x" ? getX().getType() : getWeight().getType(), getX(),
                                              getWeight(), g[0], b.getStringAttr(w), getCausal()));
  out.push_back(ReduceRowsOp::create(b, loc, getBias().getType(), g[0]));
  return success();
}

LogicalResult MeanOp::buildGradient(OpBuilder &b, ArrayRef<Value> g, SmallVectorImpl<Value> &out) {
  out.push_back(MeanGradOp::create(b, getLoc(), getInput().getType(), g[0], getInput()));
  return success();
}
