// SequenceOps.cpp - parameters, states and the ops that move or generate data: embeddings,
// positions, reshape, transpose, concat, slice, cache writes, and their gradients' pad and position
// ids: each op's verifier, the hooks it defines (KilnInterfaces.td) and its gradient rule, op after
// op. Verifier messages start with "expected"; dynamic dims (`?`) match anything.
#include "VerifyUtils.h"
#include "kiln/Dialect/KilnDialect.h"
#include "mlir/IR/Builders.h"

using namespace mlir;
using namespace kiln;
using namespace kiln::verify;

LogicalResult ParamOp::verify() {
  auto t = getResult().getType();
  if (!cast<RankedTensorType>(t).hasStaticShape()) return emitOpError("expected a static shape for a parameter");
  auto rt = cast<RankedTensorType>(t);
  if (getTransposed() && rt.getRank() != 2 && !getPanelCols()) return emitOpError("expected a 2-D transposed parameter");
  if (getPanelCols()) {
    int64_t cols = (int64_t)*getPanelCols();
    if (rt.getRank() != 3) return emitOpError("expected a parameter in panels to have rank 3, got ") << t;
    int64_t p = rt.getDimSize(0), w = rt.getDimSize(2);
    if (cols <= 0 || (cols + w - 1) / w != p)
      return emitOpError("expected ") << p << " panels of " << w << " columns to hold panel_cols = " << cols << " columns";
  }
  if (int bytes = quantBlockBytes(getFormat())) {
    if (rt.getRank() != 3 || !rt.getElementType().isInteger(8) || rt.getDimSize(2) != bytes || getTransposed() || getPanelCols())
      return emitOpError("expected a parameter in format ") << stringifyWeightFormat(getFormat()) << " to be bytes [rows, blocks, "
                                                               << bytes << "] (i8), neither transposed nor in panels, got " << t;
  } else if (rt.getElementType().isInteger(8)) {
    return emitOpError("expected an i8 parameter to have a quantized format");
  }
  return success();
}

LogicalResult EmbeddingOp::verify() {
  bool panels = getTableLayout() == TableLayoutKind::panels;
  const int bytes = quantBlockBytes(getTableFormat());
  if (bytes && panels) return emitOpError("expected a quantized table in rows, not panels");
  if (failed(expectRank(*this, "table", getTable(), panels || bytes ? 3 : 2)) || failed(expectRank(*this, "ids", getIds(), 1)))
    return failure();
  if (!ty(getIds()).getElementType().isInteger(32)) return emitOpError("expected i32 token ids");
  if (bytes && (ty(getTable()).getDimSize(2) != bytes || !ty(getTable()).getElementType().isInteger(8)))
    return emitOpError("expected a ") << stringifyWeightFormat(getTableFormat()) << " table of " << bytes << "-byte blocks, got "
                                      << getTable().getType();
  const int64_t width = bytes ? ty(getTable()).getDimSize(1) * kQuantBlock : ty(getTable()).getDimSize(1);
  return success(succeeded(expectDim(*this, "result rows", ty(getResult()).getDimSize(0), "ids length",
                                     ty(getIds()).getDimSize(0))) &&
                 succeeded(expectDim(*this, "result width", ty(getResult()).getDimSize(1), "table width", width)));
}

void EmbeddingOp::getKernelAttrs(KernelAttrs &a) {
  if (getTableLayout() != TableLayoutKind::rows) a.set("layout", stringifyTableLayoutKind(getTableLayout()));
  if (getTableFormat() != WeightFormat::f32) a.set("format", stringifyWeightFormat(getTableFormat()));
}

Syms EmbeddingOp::inferSeqLengths(ArrayRef<Syms> in) {
  Syms r = lengths(2);
  r[0] = in[1][0];
  return r;
}

OpCost EmbeddingOp::getCost(function_ref<double(Value)> numel) {  // a row gathered per id
  OpCost c = defaultCost(*this, numel);
  // A quantized table's rows: the bytes of their blocks.
  const int bytes = quantBlockBytes(getTableFormat());
  c.read = (bytes ? (double)bytes / kQuantBlock : 4.0) * numel(getResult()) + 4 * numel(getIds());
  return c;
}

LogicalResult EmbeddingOp::buildGradient(OpBuilder &b, ArrayRef<Value> g, SmallVectorImpl<Value> &out) {
  if (getTableLayout() != TableLayoutKind::rows) return emitOpError("gradient: a table in panels (kiln-prepack-weights ran first)");
  out.push_back(EmbeddingGradOp::create(b, getLoc(), getTable().getType(), getIds(), g[0], Value()));
  out.push_back(Value());
  return success();
}

Syms PositionEmbeddingOp::inferSeqLengths(ArrayRef<Syms> in) {
  Syms r = lengths(2);
  r[0] = in[1][0];
  return r;
}

OpCost PositionEmbeddingOp::getCost(function_ref<double(Value)> numel) {
  OpCost c = defaultCost(*this, numel);
  c.read = 4 * numel(getResult());
  return c;
}

LogicalResult PositionEmbeddingOp::verify() {
  auto r = ty(getResult()), t = ty(getTable());
  if (r.getRank() != 2 || t.getRank() != 2 || r.getDimSize(1) != t.getDimSize(1))
    return emitOpError("expected a [L, d] result of a [P, d] table");
  if (getStart() && (ty(getStart()).getRank() != 1 || ty(getStart()).getDimSize(0) != 1 ||
                     !ty(getStart()).getElementType().isInteger(32)))
    return emitOpError("start must be a [1] i32 tensor (the first position)");
  return success();
}

// Rows [0, L) of the table: table row p gets the gradient of every row at position p (one
// per sequence; zeros past L), added in row order like an embedding's.
LogicalResult PositionEmbeddingOp::buildGradient(OpBuilder &b, ArrayRef<Value> g, SmallVectorImpl<Value> &out) {
  if (getStart()) return emitOpError("gradient: positions from a start (a chunk at a cache's past) are for inference");
  auto lt = cast<RankedTensorType>(getLike().getType());
  Value pos = PositionIdsOp::create(b, getLoc(), RankedTensorType::get(lt.getShape(), b.getI32Type()), getLike());
  out.push_back(EmbeddingGradOp::create(b, getLoc(), getTable().getType(), pos, g[0], Value()));
  out.push_back(Value());
  return success();
}

Syms SinusoidalPositionsOp::inferSeqLengths(ArrayRef<Syms> in) {
  Syms r = lengths(2);
  r[0] = in[0][0];
  return r;
}

LogicalResult SinusoidalPositionsOp::verify() {
  auto r = ty(getResult());
  if (r.getRank() != 2 || ShapedType::isDynamic(r.getDimSize(1)) || r.getDimSize(1) % 2)
    return emitOpError("expected a [L, d] result with a static even d");
  if (getStart() && (ty(getStart()).getRank() != 1 || ty(getStart()).getDimSize(0) != 1 ||
                     !ty(getStart()).getElementType().isInteger(32)))
    return emitOpError("expected start to be a tensor<1xi32>");
  return expectDim(*this, "result rows", r.getDimSize(0), "positions", ty(getLike()).getDimSize(0));
}

// Fixed signals: no gradient (`like` gives the shape only).
LogicalResult SinusoidalPositionsOp::buildGradient(OpBuilder &, ArrayRef<Value>, SmallVectorImpl<Value> &out) {
  out.append(getNumOperands(), Value());
  return success();
}

LogicalResult RopeOp::verify() {
  if (failed(expectRank(*this, "input", getInput(), 3))) return failure();
  int64_t d = ty(getInput()).getDimSize(2);
  if (ShapedType::isDynamic(d) || d % 2) return emitOpError("expected a static even head dim, got ") << d;
  if (ty(getResult()) != ty(getInput())) return emitOpError("expected the result type to be the input's");
  if (getPast() && failed(expectPast(*this, getPast()))) return failure();
  float theta = getTheta().convertToFloat(), scaling = getScaling().convertToFloat();
  if (!(theta > 1.0f) || !std::isfinite(theta)) return emitOpError("expected theta > 1, got ") << theta;
  if (!(scaling > 0.0f) || !std::isfinite(scaling)) return emitOpError("expected a positive scaling, got ") << scaling;
  int64_t original = getOriginalContext();
  float low = getLowFreqFactor().convertToFloat(), high = getHighFreqFactor().convertToFloat();
  if (original < 0) return emitOpError("expected original_context >= 0, got ") << original;
  if (original > 0 && !(low > 0.0f && high > low && std::isfinite(high)))
    return emitOpError("expected 0 < low_freq_factor < high_freq_factor with an original_context, got ") << low << " and " << high;
  return success();
}

void RopeOp::getKernelAttrs(KernelAttrs &a) {
  a.set("style", stringifyRopeStyleKind(getStyle()));
  a.setFloat("theta", getTheta().convertToFloat());
  a.setFloat("scaling", getScaling().convertToFloat());
  if (getOriginalContext() > 0) {
    a.set("original_context", std::to_string(getOriginalContext()));
    a.setFloat("low_freq_factor", getLowFreqFactor().convertToFloat());
    a.setFloat("high_freq_factor", getHighFreqFactor().convertToFloat());
  }
  if (getInverse()) a.set("inverse", "1");
  if (getPast()) a.set("past", "1");
}

Syms RopeOp::inferSeqLengths(ArrayRef<Syms> in) { return in[0]; }

// Per element: two products and a sum (the angles' sines and cosines once per position and pair).
OpCost RopeOp::getCost(function_ref<double(Value)> numel) { return elementwiseCost(*this, numel, 3); }

// A rotation's gradient is its transpose: the rotation by minus the angle.
LogicalResult RopeOp::buildGradient(OpBuilder &b, ArrayRef<Value> g, SmallVectorImpl<Value> &out) {
  out.push_back(RopeOp::create(b, getLoc(), getInput().getType(), g[0], getPast(), getThetaAttr(), getStyleAttr(), getScalingAttr(),
                               getInverse() ? UnitAttr() : b.getUnitAttr(), getOriginalContextAttr(), getLowFreqFactorAttr(),
                               getHighFreqFactorAttr()));
  if (getPast()) out.push_back(Value());
  return success();
}

LogicalResult ReshapeOp::verify() {
  auto it = ty(getInput()), rt = ty(getResult());
  int64_t a = 1, b = 1, da = 0, db = 0;
  for (int64_t d : it.getShape()) ShapedType::isDynamic(d) ? (void)++da : (void)(a *= d);
  for (int64_t d : rt.getShape()) ShapedType::isDynamic(d) ? (void)++db : (void)(b *= d);
  if (a != b || da != db)
    return emitOpError() << "expected the same number of elements, got " << it << " and " << rt;
  return success();
}

// A view: the dynamic dims keep their lengths, in order.
Syms ReshapeOp::inferSeqLengths(ArrayRef<Syms> in) {
  auto rt = ty(getResult());
  Syms r = lengths(rt.getRank()), dyn;
  for (int64_t s : in[0])
    if (s >= 0) dyn.push_back(s);
  size_t k = 0;
  for (int64_t d = 0; d < rt.getRank(); ++d)
    if (ShapedType::isDynamic(rt.getDimSize(d)) && k < dyn.size()) r[d] = dyn[k++];
  return r;
}

LogicalResult ReshapeOp::buildGradient(OpBuilder &b, ArrayRef<Value> g, SmallVectorImpl<Value> &out) {
  out.push_back(ReshapeOp::create(b, getLoc(), getInput().getType(), g[0]));
  return success();
}

LogicalResult TransposeOp::verify() {
  auto it = ty(getInput()), rt = ty(getResult());
  auto perm = getPermutation();
  if ((int64_t)perm.size() != it.getRank() || rt.getRank() != it.getRank())
    return emitOpError("expected a permutation with one entry per dim");
  std::vector<bool> seen(perm.size());
  for (size_t i = 0; i < perm.size(); ++i) {
    if (perm[i] < 0 || perm[i] >= it.getRank() || seen[perm[i]]) return emitOpError("expected a permutation");
    seen[perm[i]] = true;
    if (!compatible(rt.getDimSize(i), it.getDimSize(perm[i])))
      return emitOpError() << "expected result dim " << i << " to be input dim " << perm[i];
  }
  return success();
}

void TransposeOp::getKernelAttrs(KernelAttrs &a) {
  std::string p;
  for (int64_t v : getPermutation()) p += (p.empty() ? "" : "/") + std::to_string(v);
  a.set("perm", p);
}

Syms TransposeOp::inferSeqLengths(ArrayRef<Syms> in) {
  Syms r;
  for (int64_t p : getPermutation()) r.push_back(in[0][p]);
  return r;
}

LogicalResult TransposeOp::buildGradient(OpBuilder &b, ArrayRef<Value> g, SmallVectorImpl<Value> &out) {
  ArrayRef<int64_t> p = getPermutation();
  SmallVector<int64_t> inv(p.size());
  for (size_t i = 0; i < p.size(); ++i) inv[p[i]] = (int64_t)i;
  out.push_back(TransposeOp::create(b, getLoc(), getInput().getType(), g[0], b.getDenseI64ArrayAttr(inv)));
  return success();
}

LogicalResult ConcatOp::verify() {
  if (getInputs().empty()) return emitOpError("expected at least one input");
  int64_t axis = getAxis(), rank = ty(getResult()).getRank(), sum = 0;
  if (axis < 0 || axis >= rank) return emitOpError("expected an axis within the rank");
  for (Value v : getInputs()) {
    if (ty(v).getRank() != rank) return emitOpError("expected inputs of the result's rank");
    if (ShapedType::isDynamic(ty(v).getDimSize(axis))) return emitOpError("expected a static concat axis");
    sum += ty(v).getDimSize(axis);
  }
  return expectDim(*this, "result axis size", ty(getResult()).getDimSize(axis), "sum of input sizes", sum);
}

void ConcatOp::getKernelAttrs(KernelAttrs &a) { a.set("axis", (int64_t)getAxis()); }

// Each input's gradient is its range of the result's.
LogicalResult ConcatOp::buildGradient(OpBuilder &b, ArrayRef<Value> g, SmallVectorImpl<Value> &out) {
  int64_t axis = getAxis(), off = 0;
  for (Value x : getInputs()) {
    out.push_back(SliceOp::create(b, getLoc(), x.getType(), g[0], b.getI64IntegerAttr(axis), b.getI64IntegerAttr(off)));
    off += ty(x).getDimSize(axis);
  }
  return success();
}

LogicalResult SliceOp::verify() {
  auto it = ty(getInput()), rt = ty(getResult());
  int64_t axis = getAxis();
  if (axis < 0 || axis >= it.getRank() || rt.getRank() != it.getRank()) return emitOpError("expected an axis within the rank");
  int64_t off = (int64_t)getOffset();
  if (off < 0) {  // the last element, of any axis
    if (off != -1 || rt.getDimSize(axis) != 1) return emitOpError("expected offset -1 (the last element) to take size 1");
    return success();
  }
  if (ShapedType::isDynamic(it.getDimSize(axis))) return emitOpError("expected a static slice axis");
  if (off < 0 || off + rt.getDimSize(axis) > it.getDimSize(axis))
    return emitOpError() << "expected the slice [" << off << ", " << off + rt.getDimSize(axis)
                         << ") to lie within " << it.getDimSize(axis);
  return success();
}

Syms SliceOp::inferSeqLengths(ArrayRef<Syms> in) {
  Syms s = in[0];
  if ((int64_t)getAxis() < (int64_t)s.size()) s[getAxis()] = -1;  // the slice is static (the last element: 1)
  return s;
}

void SliceOp::getKernelAttrs(KernelAttrs &a) {
  a.set("axis", (int64_t)getAxis());
  a.set("offset", (int64_t)getOffset());
}

// The slice's gradient in zeros shaped like its input (the slices of one tensor add up).
LogicalResult SliceOp::buildGradient(OpBuilder &b, ArrayRef<Value> g, SmallVectorImpl<Value> &out) {
  out.push_back(PadOp::create(b, getLoc(), getInput().getType(), g[0], getInput(), getAxisAttr(), getOffsetAttr()));
  return success();
}

OpCost CacheWriteOp::getCost(function_ref<double(Value)> numel) {  // only the new rows move
  OpCost c;
  c.read = c.written = 4 * numel(getValue());
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
