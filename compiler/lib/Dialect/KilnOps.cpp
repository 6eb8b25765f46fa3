// KilnOps.cpp - the kiln ops: each op's verifier and the hooks it defines itself (the kernel
// key's attributes, sequence-length inference, cost), one op after another in KilnOps.td's
// order. Verifier messages start with "expected"; dynamic dims (`?`) match anything.
#include <cstdio>
#include <cstring>

#include "VerifyUtils.h"
#include "kiln/Dialect/KilnDialect.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/OpImplementation.h"

using namespace mlir;
using namespace kiln;

#define GET_OP_CLASSES
#include "kiln/Dialect/KilnOps.cpp.inc"

using namespace kiln::verify;

// A result's lengths: `rank` static dims, then the given entries.
static Syms lengths(int64_t rank) { return Syms(rank, -1); }

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
  if (getInit() != "normal" && getInit() != "ones" && getInit() != "zeros")
    return emitOpError("expected init to be \"normal\", \"ones\" or \"zeros\", got \"") << getInit() << "\"";
  return success();
}

LogicalResult EmbeddingOp::verify() {
  bool panels = getTableLayout() == "panels";
  if (!panels && getTableLayout() != "rows")
    return emitOpError("expected table_layout \"rows\" or \"panels\", got \"") << getTableLayout() << "\"";
  if (failed(expectRank(*this, "table", getTable(), panels ? 3 : 2)) || failed(expectRank(*this, "ids", getIds(), 1)))
    return failure();
  if (!ty(getIds()).getElementType().isInteger(32)) return emitOpError("expected i32 token ids");
  return success(succeeded(expectDim(*this, "result rows", ty(getResult()).getDimSize(0), "ids length",
                                     ty(getIds()).getDimSize(0))) &&
                 succeeded(expectDim(*this, "result width", ty(getResult()).getDimSize(1), "table width",
                                     ty(getTable()).getDimSize(1))));
}
void EmbeddingOp::getKernelAttrs(KernelAttrs &a) {
  if (getTableLayout() != "rows") a.set("layout", getTableLayout());
}

Syms EmbeddingOp::inferSeqLengths(ArrayRef<Syms> in) {
  Syms r = lengths(2);
  r[0] = in[1][0];
  return r;
}
OpCost EmbeddingOp::getCost(function_ref<double(Value)> numel) {  // a row gathered per id
  OpCost c = defaultCost(*this, numel);
  c.read = 4 * numel(getResult()) + 4 * numel(getIds());
  return c;
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

Syms SinusoidalPositionsOp::inferSeqLengths(ArrayRef<Syms> in) {
  Syms r = lengths(2);
  r[0] = in[0][0];
  return r;
}

// A GEMM weight's in- and out-features in its layout: out_in [out, in], in_out [in, out], or
// panels [ceil(out / w), in, w] (kiln-prepack-weights: the [in, out] matrix as panels of w
// columns, the last one padded). A panel weight does not carry its exact out-features: `out`
// is given (the op's result or bias says it) and must fit the panels.
static LogicalResult weightFeatures(Operation *op, const char *role, Value w, StringRef layout, const char *outRole,
                                    int64_t &in, int64_t &out) {
  RankedTensorType t = ty(w);
  if (layout == "panels") {
    if (t.getRank() != 3) return op->emitOpError() << "expected the " << role << " in panels to have rank 3, got " << t;
    int64_t p = t.getDimSize(0), width = t.getDimSize(2);
    in = t.getDimSize(1);
    if (!ShapedType::isDynamic(out) && (out <= (p - 1) * width || out > p * width))
      return op->emitOpError() << "expected the " << role << "'s " << p << " panels of " << width << " columns to hold its "
                               << out << " out-features";
    return success();
  }
  if (layout != "out_in" && layout != "in_out")
    return op->emitOpError() << "expected " << (strcmp(role, "weight") ? std::string(role) + " layout" : "weight_layout")
                             << " \"out_in\", \"in_out\" or \"panels\", got \"" << layout << "\"";
  if (t.getRank() != 2) return op->emitOpError() << "expected the " << role << " to have rank 2, got " << t;
  bool oi = layout == "out_in";
  in = t.getDimSize(oi ? 1 : 0);
  int64_t o = t.getDimSize(oi ? 0 : 1);
  if (failed(expectDim(op, outRole, out, (std::string(role) + " out-features").c_str(), o))) return failure();
  out = o;
  return success();
}

LogicalResult LinearOp::verify() {
  auto xt = ty(getX()), rt = ty(getResult());
  if (xt.getRank() != rt.getRank()) return emitOpError("expected the result to have the input's rank");
  int64_t in, out = rt.getDimSize(rt.getRank() - 1);
  if (failed(weightFeatures(*this, "weight", getWeight(), getWeightLayout(), "result features", in, out))) return failure();
  if (failed(expectDim(*this, "input features", xt.getDimSize(xt.getRank() - 1), "weight in-features", in))) return failure();
  if (getBias() && (ty(getBias()).getRank() != 1 || !compatible(ty(getBias()).getDimSize(0), out)))
    return emitOpError("expected a bias of shape [") << out << "], got " << ty(getBias());
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
LogicalResult MatMulOp::verify() { return verifyMatmul(*this, getLhs(), getRhs(), getResult(), getTransposeB(), 0); }
LogicalResult BatchMatMulOp::verify() {
  return verifyMatmul(*this, getLhs(), getRhs(), getResult(), getTransposeB(), 1);
}
void LinearOp::getKernelAttrs(KernelAttrs &a) {
  a.set("layout", getWeightLayout());
  a.set("act", stringifyActivationKind(getActivation()));
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

// 2 FLOPs per output element and contraction step.
static OpCost matmulCost(Operation *op, function_ref<double(Value)> numel) {
  OpCost c = defaultCost(op, numel);
  c.flops = 2 * numel(op->getResult(0)) * dimOf(op->getOperand(0), ty(op->getOperand(0)).getRank() - 1);
  return c;
}
void MatMulOp::getKernelAttrs(KernelAttrs &a) { a.setBool("transpose_b", getTransposeB()); }
Syms MatMulOp::inferSeqLengths(ArrayRef<Syms> in) { return {in[0][0], in[1][getTransposeB() ? 0 : 1]}; }
OpCost MatMulOp::getCost(function_ref<double(Value)> numel) { return matmulCost(*this, numel); }
void BatchMatMulOp::getKernelAttrs(KernelAttrs &a) { a.setBool("transpose_b", getTransposeB()); }
Syms BatchMatMulOp::inferSeqLengths(ArrayRef<Syms> in) { return {in[0][0], in[0][1], in[1][getTransposeB() ? 1 : 2]}; }
OpCost BatchMatMulOp::getCost(function_ref<double(Value)> numel) { return matmulCost(*this, numel); }

static LogicalResult verifyBinary(Operation *op, Value a, Value b, Value r) {
  auto at = ty(a), bt = ty(b);
  if (bt.getRank() > at.getRank()) return op->emitOpError("expected the rhs rank to be at most the lhs rank");
  for (int64_t i = 1; i <= bt.getRank(); ++i)
    if (!compatible(at.getDimSize(at.getRank() - i), bt.getDimSize(bt.getRank() - i)))
      return op->emitOpError() << "expected broadcast-compatible operands, got " << at << " and " << bt;
  if (ty(r).getShape().size() != at.getShape().size()) return op->emitOpError("expected the result to have the lhs shape");
  return success();
}
LogicalResult AddOp::verify() { return verifyBinary(*this, getLhs(), getRhs(), getResult()); }
LogicalResult MulOp::verify() { return verifyBinary(*this, getLhs(), getRhs(), getResult()); }
// One FLOP per output element.
static OpCost elementwiseCost(Operation *op, function_ref<double(Value)> numel, double perElement) {
  OpCost c = defaultCost(op, numel);
  c.flops = perElement * numel(op->getResult(0));
  return c;
}
OpCost AddOp::getCost(function_ref<double(Value)> numel) { return elementwiseCost(*this, numel, 1); }
OpCost MulOp::getCost(function_ref<double(Value)> numel) { return elementwiseCost(*this, numel, 1); }

void ScaleOp::getKernelAttrs(KernelAttrs &a) { a.setFloat("factor", getFactor().convertToFloat()); }
OpCost ScaleOp::getCost(function_ref<double(Value)> numel) { return elementwiseCost(*this, numel, 1); }
OpCost SoftmaxOp::getCost(function_ref<double(Value)> numel) { return elementwiseCost(*this, numel, 5); }
void GeluOp::getKernelAttrs(KernelAttrs &a) { a.set("approx", getApproximate()); }

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

// The sparse pattern attributes kiln.attention and kiln.attention_grad share (the mask,
// pattern_size, summary, part, layout, noncausal) and a block schedule (kiln.sparse).
LogicalResult kiln::verify::verifyAttentionPattern(Operation *op, int64_t lq, int64_t lk) {
  auto str = [&](StringRef n) { auto a = op->getAttrOfType<StringAttr>(n); return a ? a.getValue() : StringRef(); };
  auto num = [&](StringRef n) -> std::optional<int64_t> {
    if (auto a = op->getAttrOfType<IntegerAttr>(n)) return a.getInt();
    return std::nullopt;
  };
  StringRef mk = op->getAttr("mask") ? str("mask") : StringRef("none");
  if (!llvm::is_contained({"none", "causal", "window", "strided", "fixed", "layout"}, mk))
    return op->emitOpError("expected mask \"none\", \"causal\", \"window\", \"strided\", \"fixed\" or \"layout\", got \"")
           << mk << "\"";
  bool pattern = mk != "none" && mk != "causal";
  std::optional<int64_t> size = num("pattern_size"), summary = num("summary");
  if (pattern) {
    if (!size || *size < 1) return op->emitOpError("expected a positive pattern_size with mask \"") << mk << "\"";
    if (failed(expectDim(op, "query length", lq, "key length", lk))) return failure();
  } else if (size || summary || op->getAttr("part") || op->getAttr("layout")) {
    return op->emitOpError("expected pattern_size, summary, part and layout only with a sparse mask");
  }
  StringRef part = str("part");
  if ((mk == "strided" || mk == "fixed") && !llvm::is_contained({"union", "local", "global"}, part))
    return op->emitOpError("expected part \"union\", \"local\" or \"global\" with mask \"") << mk << "\"";
  if (mk == "fixed" && (!summary || *summary < 1 || *summary > *size))
    return op->emitOpError("expected summary in [1, pattern_size] with mask \"fixed\"");
  if (mk == "layout") {
    auto rows = op->getAttrOfType<ArrayAttr>("layout");
    if (!rows || rows.empty()) return op->emitOpError("expected a layout (one string per query block) with mask \"layout\"");
    for (Attribute r : rows) {
      auto sa = dyn_cast<StringAttr>(r);
      StringRef s = sa ? sa.getValue() : StringRef();
      if (!sa || (int64_t)s.size() != (int64_t)rows.size() || s.find_first_not_of("#.") != StringRef::npos)
        return op->emitOpError("expected every layout row to have ") << rows.size() << " characters '#' or '.', got \"" << s << "\"";
    }
  }
  if (op->getAttr("noncausal") && mk != "layout") return op->emitOpError("expected noncausal only with mask \"layout\"");
  // A block schedule (kiln-tile-sparse-pattern's, or edited by hand): one or two parts, the
  // layout's table and mask only with a layout.
  if (auto sp = op->getAttrOfType<SparseScheduleAttr>("kiln.sparse")) {
    if (!pattern) return op->emitOpError("expected kiln.sparse only on an attention with a sparse pattern");
    if (sp.getParts().empty() || sp.getParts().size() > 2) return op->emitOpError("expected a sparse schedule of one or two parts");
    for (SparsePartAttr part : sp.getParts()) {
      bool table = part.getBlocks() == SparseRule::layout_table;
      bool layoutMask = part.getMask() == SparseMask::layout || part.getExclude() == SparseMask::layout;
      if ((table || layoutMask) != (mk == "layout") || (mk == "layout" && !table))
        return op->emitOpError("expected the layout_table rule and the layout mask exactly with mask \"layout\"");
      if (part.getMask() == SparseMask::none) return op->emitOpError("expected every sparse part to have an element mask");
      if (part.getQueries() == SparseOrder::summary_gather)
        return op->emitOpError("expected queries in sequence or stride_transpose order (summary_gather orders keys only)");
    }
  }
  return success();
}

LogicalResult AttentionOp::verify() {
  for (auto [role, v] : {std::pair<const char *, Value>{"query", getQuery()}, {"key", getKey()}, {"value", getValue()}})
    if (failed(expectRank(*this, role, v, 3))) return failure();
  auto q = ty(getQuery()), k = ty(getKey()), v = ty(getValue());
  if (failed(expectDim(*this, "query heads", q.getDimSize(0), "key heads", k.getDimSize(0))) ||
      failed(expectDim(*this, "query head dim", q.getDimSize(2), "key head dim", k.getDimSize(2))) ||
      failed(expectDim(*this, "key length", k.getDimSize(1), "value length", v.getDimSize(1))))
    return failure();
  StringRef mk = getMask();
  if (failed(verifyAttentionPattern(*this, q.getDimSize(1), k.getDimSize(1)))) return failure();
  bool pattern = mk != "none" && mk != "causal";
  if (pattern && getPast()) return emitOpError("expected no past or key count with a sparse pattern");
  if (getPast() && (ty(getPast()).getRank() != 1 || ty(getPast()).getDimSize(0) != 1 ||
                    !ty(getPast()).getElementType().isInteger(32)))
    return emitOpError("expected past to be a tensor<1xi32>");
  if (getKeyCount() && !getPast()) return emitOpError("expected a key count operand with key_count");
  if (Value lse = getLse()) {  // each query row's log-sum-exp, beside the output
    if (getPast()) return emitOpError("expected an lse result only without a cache");
    if (failed(expectRank(*this, "lse", lse, 2)) ||
        failed(expectDim(*this, "lse heads", ty(lse).getDimSize(0), "query heads", q.getDimSize(0))) ||
        failed(expectDim(*this, "lse rows", ty(lse).getDimSize(1), "query rows", q.getDimSize(1))))
      return failure();
  }
  return success();
}

void kiln::verify::patternKernelAttrs(Operation *op, KernelAttrs &a) {
  if (auto v = op->getAttrOfType<IntegerAttr>("pattern_size")) a.set("pattern_size", v.getInt());
  if (auto v = op->getAttrOfType<IntegerAttr>("summary")) a.set("summary", v.getInt());
  if (auto v = op->getAttrOfType<StringAttr>("part")) a.set("part", v.getValue());
  if (auto rows = op->getAttrOfType<ArrayAttr>("layout")) {
    std::string s;
    for (Attribute r : rows) s += (s.empty() ? "" : "/") + cast<StringAttr>(r).getValue().str();
    a.set("layout", s);
  }
  if (op->getAttr("noncausal")) a.set("noncausal", "1");
  // The block schedule the kernel is generated from (an edited one differs from the pattern's).
  if (auto sp = op->getAttrOfType<SparseScheduleAttr>("kiln.sparse")) {
    std::string parts;
    for (SparsePartAttr p : sp.getParts())
      parts += (parts.empty() ? "" : "+") + stringifySparseOrder(p.getQueries()).str() + "/" +
               stringifySparseOrder(p.getKeys()).str() + "/" + stringifySparseRule(p.getBlocks()).str() + "/" +
               stringifySparseMask(p.getMask()).str() + "/" + stringifySparseMask(p.getExclude()).str();
    a.set("sparse", parts);
  }
}

void AttentionOp::getKernelAttrs(KernelAttrs &a) {
  a.set("mask", getMask());
  a.setFloat("scale", getScale().convertToFloat());
  if (getPast()) a.set("valid", getKeyCount() ? "key_count" : "past");
  patternKernelAttrs(*this, a);
}
Syms AttentionOp::inferSeqLengths(ArrayRef<Syms> in) { return {in[0][0], in[0][1], in[2][2]}; }
// 2d + 2dv + 4 FLOPs per (query, key) pair computed: all of them, half when causal, or what a
// sparse pattern's block schedule visits (padding and block rounding included).
OpCost AttentionOp::getCost(function_ref<double(Value)> numel) {
  OpCost c = defaultCost(*this, numel);
  double lk = numel(getKey()) / dimOf(getKey(), 2) / dimOf(getKey(), 0);
  double lqh = numel(getQuery()) / dimOf(getQuery(), 2);  // H * Lq
  double d = dimOf(getQuery(), 2), dv = dimOf(getValue(), 2);
  double pairs = lqh * lk * (getMask() == "causal" ? 0.5 : 1.0);
  sparse::Pattern p = patternOf(*this);
  if (!p.kind.empty()) pairs = dimOf(getQuery(), 0) * sparse::countWork(p, (int64_t)lk).visited;
  c.flops = pairs * (2 * d + 2 * dv + 4);
  return c;
}

sparse::Pattern kiln::patternOf(Operation *op) {
  sparse::Pattern p;
  auto size = op->getAttrOfType<IntegerAttr>("pattern_size");
  if (!size) return p;
  auto str = [&](StringRef n, StringRef dflt) { auto a = op->getAttrOfType<StringAttr>(n); return (a ? a.getValue() : dflt).str(); };
  p.kind = str("mask", "none");
  p.part = str("part", "union");
  p.size = size.getInt();
  if (auto t = op->getAttrOfType<IntegerAttr>("summary")) p.summary = t.getInt();
  p.causal = !op->getAttr("noncausal");
  if (auto rows = op->getAttrOfType<ArrayAttr>("layout"))
    for (Attribute r : rows) p.layout.push_back(cast<StringAttr>(r).getValue().str());
  if (auto s = op->getAttrOfType<ScheduleAttr>("kiln.schedule"))
    if (auto b = s.getBlock()) p.block = *b;
  if (auto sp = op->getAttrOfType<SparseScheduleAttr>("kiln.sparse"))
    for (SparsePartAttr part : sp.getParts()) p.schedule.push_back(partOf(part));
  return p;
}

LogicalResult LshAttentionOp::verify() {
  if (failed(expectRank(*this, "qk", getQk(), 3)) || failed(expectRank(*this, "value", getValue(), 3)) ||
      failed(expectRank(*this, "rotations", getRotations(), 3)))
    return failure();
  auto q = ty(getQk()), v = ty(getValue()), r = ty(getRotations());
  int64_t nb = (int64_t)getBuckets(), nh = (int64_t)getHashes();
  if (nb < 2 || nb % 2) return emitOpError("expected an even number of buckets, at least 2, got ") << nb;
  if (nh < 1 || getChunk() < 1) return emitOpError("expected at least one hash round and a positive chunk");
  if (failed(expectDim(*this, "qk heads", q.getDimSize(0), "value heads", v.getDimSize(0))) ||
      failed(expectDim(*this, "qk length", q.getDimSize(1), "value length", v.getDimSize(1))) ||
      failed(expectDim(*this, "rotation rounds", r.getDimSize(0), "hashes", nh)) ||
      failed(expectDim(*this, "rotation rows", r.getDimSize(1), "qk head dim", q.getDimSize(2))) ||
      failed(expectDim(*this, "rotation columns", r.getDimSize(2), "buckets / 2", nb / 2)))
    return failure();
  return success();
}

Syms LshAttentionOp::inferSeqLengths(ArrayRef<Syms> in) { return {in[0][0], in[0][1], in[1][2]}; }

LogicalResult LshHashOp::verify() {
  if (failed(expectRank(*this, "qk", getQk(), 3)) || failed(expectRank(*this, "rotations", getRotations(), 3)) ||
      failed(expectRank(*this, "result", getResult(), 3)))
    return failure();
  auto q = ty(getQk()), r = ty(getRotations()), o = ty(getResult());
  if (!o.getElementType().isInteger(32)) return emitOpError("expected i32 buckets");
  if (failed(expectDim(*this, "rotation rows", r.getDimSize(1), "qk head dim", q.getDimSize(2))) ||
      failed(expectDim(*this, "result rounds", o.getDimSize(1), "rotation rounds", r.getDimSize(0))) ||
      failed(expectDim(*this, "result length", o.getDimSize(2), "qk length", q.getDimSize(1))))
    return failure();
  return success();
}

Syms LshHashOp::inferSeqLengths(ArrayRef<Syms> in) { return {-1, -1, in[0][1]}; }
// x·R for every round, then an argmax.
OpCost LshHashOp::getCost(function_ref<double(Value)> numel) {
  OpCost c = defaultCost(*this, numel);
  c.flops = numel(getResult()) * (2.0 * dimOf(getRotations(), 1) * dimOf(getRotations(), 2) + 2.0 * dimOf(getRotations(), 2));
  return c;
}

LogicalResult LshSortOp::verify() {
  if (failed(expectRank(*this, "buckets", getBuckets(), 3)) || failed(expectRank(*this, "result", getResult(), 4)))
    return failure();
  auto b = ty(getBuckets()), o = ty(getResult());
  if (!b.getElementType().isInteger(32) || !o.getElementType().isInteger(32)) return emitOpError("expected i32 tensors");
  if (o.getDimSize(2) != 2) return emitOpError("expected the result's dim 2 to be 2 (order and inverse)");
  return expectDim(*this, "result length", o.getDimSize(3), "buckets length", b.getDimSize(2));
}

Syms LshSortOp::inferSeqLengths(ArrayRef<Syms> in) { return {-1, -1, -1, in[0][2]}; }

LogicalResult LshChunkAttentionOp::verify() {
  if (failed(expectRank(*this, "qk", getQk(), 3)) || failed(expectRank(*this, "value", getValue(), 3)) ||
      failed(expectRank(*this, "buckets", getBuckets(), 3)) || failed(expectRank(*this, "sorted", getSorted(), 4)))
    return failure();
  if (getChunk() < 1) return emitOpError("expected a positive chunk");
  return expectDim(*this, "sorted rounds", ty(getSorted()).getDimSize(1), "bucket rounds", ty(getBuckets()).getDimSize(1));
}

void LshChunkAttentionOp::getKernelAttrs(KernelAttrs &a) {
  a.set("chunk", (int64_t)getChunk());
  a.setFloat("scale", getScale().convertToFloat());
  if (getCausal()) a.set("causal", "1");
}
Syms LshChunkAttentionOp::inferSeqLengths(ArrayRef<Syms> in) { return {in[0][0], in[0][1], in[1][2]}; }
// Each query: two chunks of keys per round.
OpCost LshChunkAttentionOp::getCost(function_ref<double(Value)> numel) {
  OpCost c = defaultCost(*this, numel);
  double d = dimOf(getQk(), 2), dv = dimOf(getValue(), 2), rounds = dimOf(getBuckets(), 1);
  double pairs = numel(getQk()) / d * rounds * 2.0 * (double)getChunk();
  c.flops = pairs * (2 * d + 2 * dv + 4);
  return c;
}

LogicalResult MaskOp::verify() {
  if (getKind() != "causal") return emitOpError("expected kind \"causal\", got \"") << getKind() << "\"";
  if (ty(getScores()).getRank() < 2) return emitOpError("expected scores of rank 2 or more");
  if (getScores().getType() != getResult().getType()) return emitOpError("expected the result to have the scores' type");
  return success();
}

void MaskOp::getKernelAttrs(KernelAttrs &a) { a.set("mask", getKind()); }

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
  a.set("layout1", getLayout1());
  a.set("layout2", getLayout2());
  a.set("act", stringifyActivationKind(getActivation()));
}
// Both GEMMs, the bias and the activation over the intermediate.
OpCost FfnOp::getCost(function_ref<double(Value)> numel) {
  OpCost c = defaultCost(*this, numel);
  double rows = numel(getX()) / dimOf(getX(), 1), d = dimOf(getX(), 1), dff = dimOf(getB1(), 0);
  c.flops = 2 * rows * d * dff * 2 + 10 * rows * dff;
  return c;
}

OpCost CacheWriteOp::getCost(function_ref<double(Value)> numel) {  // only the new rows move
  OpCost c;
  c.read = c.written = 4 * numel(getValue());
  return c;
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

LogicalResult DepthwiseConvGradOp::verify() {
  if (failed(expectRank(*this, "input", getX(), 2)) || failed(expectRank(*this, "weight", getWeight(), 2)))
    return failure();
  if (ty(getWeight()).getDimSize(0) % 2 == 0)
    return emitOpError("expected an odd kernel size (weight dim 0), got ") << ty(getWeight()).getDimSize(0);
  if (getGrad().getType() != getX().getType()) return emitOpError("expected grad to have the input's type");
  if (failed(expectDim(*this, "weight width", ty(getWeight()).getDimSize(1), "input width", ty(getX()).getDimSize(1))))
    return failure();
  StringRef w = getWrt();
  if (w != "x" && w != "weight") return emitOpError("expected wrt \"x\" or \"weight\", got \"") << w << "\"";
  Type want = w == "x" ? getX().getType() : getWeight().getType();
  if (getResult().getType() != want) return emitOpError("expected the result to be ") << want << ", got " << getType();
  return success();
}
void DepthwiseConvGradOp::getKernelAttrs(KernelAttrs &a) {
  a.set("wrt", getWrt());
  if (getCausal()) a.set("causal", true);
}
Syms DepthwiseConvGradOp::inferSeqLengths(ArrayRef<Syms> in) {
  return getWrt() == "x" ? in[0] : lengths(2);  // [L, d], or the weight's static [k, d]
}
OpCost DepthwiseConvGradOp::getCost(function_ref<double(Value)> numel) {
  OpCost c = defaultCost(*this, numel);
  c.flops = 2 * numel(getX()) * dimOf(getWeight(), 0);
  return c;
}

// The carry of a state [L, d] is [L, 2d + 3].
static LogicalResult expectCarry(Operation *op, Value carry, RankedTensorType state) {
  auto c = ty(carry);
  if (c.getRank() != 2 || state.getRank() != 2 || ShapedType::isDynamic(state.getDimSize(1)) ||
      c.getDimSize(1) != 2 * state.getDimSize(1) + 3)
    return op->emitOpError() << "expected an ACT carry [L, 2d + 3] for the state " << state << ", got " << c;
  return expectDim(op, "carry rows", c.getDimSize(0), "state rows", state.getDimSize(0));
}
static bool isStep(Value v) {
  auto t = ty(v);
  return t.getRank() == 1 && t.getDimSize(0) == 1 && t.getElementType().isInteger(32);
}
static LogicalResult expectStep(Operation *op, Value v, const char *role) {
  if (!isStep(v)) return op->emitOpError() << "expected the " << role << " to be a tensor<1xi32>, got " << ty(v);
  return success();
}

LogicalResult RecurrentOp::verify() {
  auto x = ty(getInit());
  if (x.getRank() != 2 || ShapedType::isDynamic(x.getDimSize(1)))
    return emitOpError("expected the initial state to be [L, d] with a static d");
  if (getMaxSteps() < 1) return emitOpError("expected max_steps to be at least 1");
  float th = getThreshold().convertToFloat();
  if (!(th > 0.0f && th < 1.0f)) return emitOpError("expected the threshold in (0, 1)");
  if (getHaltWeight().getType() != RankedTensorType::get({x.getDimSize(1)}, x.getElementType()) ||
      getHaltBias().getType() != RankedTensorType::get({1}, x.getElementType()))
    return emitOpError("expected the halting weight [d] and bias [1] of the state's width");
  if (getBody().empty()) return emitOpError("expected a body");
  Block &body = getBody().front();
  if (body.getNumArguments() != 1 || body.getArgument(0).getType() != x)
    return emitOpError("expected the body to take one argument of the state's type ") << x;
  // A body whose last op is no terminator (malformed input) has none to read.
  auto y = body.mightHaveTerminator() ? dyn_cast<YieldOp>(body.getTerminator()) : YieldOp();
  if (!y || y.getValues().size() != 1 || y.getValues()[0].getType() != x)
    return emitOpError("expected the body to yield one value of the state's type ") << x;
  auto row = RankedTensorType::get({x.getDimSize(0)}, x.getElementType());
  if (getHidden().getType() != x || getPonder().getType() != row ||
      getSteps().getType() != RankedTensorType::get({x.getDimSize(0)}, IntegerType::get(getContext(), 32)))
    return emitOpError("expected results hidden [L, d], ponder [L] f32 and steps [L] i32");
  return success();
}

Syms RecurrentOp::inferSeqLengths(ArrayRef<Syms> in) { return in[0]; }  // hidden [L, d]

LogicalResult LoopOp::verify() {
  if (getMaxSteps() < 1) return emitOpError("expected max_steps to be at least 1");
  Block &body = getBody().front();
  Type c = getInit().getType();
  if (body.getNumArguments() != 2 || body.getArgument(0).getType() != c || !isStep(body.getArgument(1)))
    return emitOpError("expected the body to take the carried value and the step (tensor<1xi32>)");
  auto y = dyn_cast<YieldOp>(body.getTerminator());
  if (!y || y.getValues().size() != 2 || !isStep(y.getValues()[0]) ||
      y.getValues()[1].getType() != c)
    return emitOpError("expected the body to yield a flag (tensor<1xi32>) and the next carried value");
  if (getResult().getType() != c) return emitOpError("expected the result to have the carried type");
  return success();
}

LogicalResult ActInitOp::verify() { return expectCarry(*this, getResult(), ty(getX())); }

LogicalResult ActInputOp::verify() {
  if (getPositions().getType() != getResult().getType()) return emitOpError("expected the positions to have the result's type");
  if (failed(expectStep(*this, getStep(), "step"))) return failure();
  return expectCarry(*this, getCarry(), ty(getResult()));
}

OpCost ActInputOp::getCost(function_ref<double(Value)> numel) { return elementwiseCost(*this, numel, 2); }

LogicalResult ActUpdateOp::verify() {
  auto x = ty(getX());
  if (getY().getType() != x) return emitOpError("expected the step's output to have its input's type");
  if (getCarry().getType() != getResult().getType()) return emitOpError("expected the result to have the carry's type");
  if (failed(expectStep(*this, getStep(), "step")) || failed(expectCarry(*this, getCarry(), x))) return failure();
  if (getHaltWeight().getType() != RankedTensorType::get({x.getDimSize(1)}, x.getElementType()) ||
      getHaltBias().getType() != RankedTensorType::get({1}, x.getElementType()))
    return emitOpError("expected the halting weight [d] and bias [1]");
  float th = getThreshold().convertToFloat();
  if (!(th > 0.0f && th < 1.0f) || getMaxSteps() < 1) return emitOpError("expected a threshold in (0, 1) and max_steps >= 1");
  return success();
}

void ActUpdateOp::getKernelAttrs(KernelAttrs &a) {
  a.set("max_steps", (int64_t)getMaxSteps());
  a.setFloat("threshold", getThreshold().convertToFloat());
}
// The halting dot product, then 3 FLOPs per state entry.
OpCost ActUpdateOp::getCost(function_ref<double(Value)> numel) {
  OpCost c = defaultCost(*this, numel);
  c.flops = 5 * numel(getX());
  return c;
}

LogicalResult ActUpdateGradOp::verify() {
  auto x = ty(getX());
  if (getY().getType() != x) return emitOpError("expected y to have x's type");
  if (failed(expectCarry(*this, getCarry(), x))) return failure();
  if (getNext().getType() != getCarry().getType() || getGrad().getType() != getCarry().getType())
    return emitOpError("expected next and grad to have the carry's type");
  if (getHaltWeight().getType() != RankedTensorType::get({x.getDimSize(1)}, x.getElementType()) ||
      getHaltBias().getType() != RankedTensorType::get({1}, x.getElementType()))
    return emitOpError("expected the halting weight [d] and bias [1]");
  StringRef w = getWrt();
  RankedTensorType want;
  if (w == "carry") want = ty(getCarry());
  else if (w == "x" || w == "y") want = x;
  else if (w == "halt_weight") want = ty(getHaltWeight());
  else if (w == "halt_bias") want = ty(getHaltBias());
  else return emitOpError("expected wrt \"carry\", \"x\", \"y\", \"halt_weight\" or \"halt_bias\", got \"") << w << "\"";
  if (ty(getResult()) != want) return emitOpError("expected the result to be ") << want << ", got " << getType();
  return success();
}
void ActUpdateGradOp::getKernelAttrs(KernelAttrs &a) { a.set("wrt", getWrt()); }
Syms ActUpdateGradOp::inferSeqLengths(ArrayRef<Syms> in) {
  Syms r = lengths(ty(getResult()).getRank());
  if (getWrt() == "carry" || getWrt() == "x" || getWrt() == "y") r[0] = in[0][0];  // [L, ...]; the halting's are static
  return r;
}
OpCost ActUpdateGradOp::getCost(function_ref<double(Value)> numel) {
  OpCost c = defaultCost(*this, numel);
  c.flops = 6 * numel(getX());
  return c;
}

LogicalResult ActRunningOp::verify() {
  auto c = ty(getCarry());
  if (c.getRank() != 2 || ShapedType::isDynamic(c.getDimSize(1)) || (c.getDimSize(1) - 3) % 2 || c.getDimSize(1) < 5)
    return emitOpError("expected an ACT carry [L, 2d + 3]");
  return expectStep(*this, getResult(), "result");
}

Syms ActRunningOp::inferSeqLengths(ArrayRef<Syms>) { return {-1}; }

LogicalResult ActOutputOp::verify() {
  auto c = ty(getCarry()), r = ty(getResult());
  if (c.getRank() != 2 || ShapedType::isDynamic(c.getDimSize(1)) || (c.getDimSize(1) - 3) % 2 || c.getDimSize(1) < 5)
    return emitOpError("expected an ACT carry [L, 2d + 3]");
  int64_t d = (c.getDimSize(1) - 3) / 2;
  StringRef f = getField();
  Type f32 = Float32Type::get(getContext()), i32 = IntegerType::get(getContext(), 32);
  RankedTensorType want;
  if (f == "hidden") want = RankedTensorType::get({c.getDimSize(0), d}, f32);
  else if (f == "ponder") want = RankedTensorType::get({c.getDimSize(0)}, f32);
  else if (f == "steps") want = RankedTensorType::get({c.getDimSize(0)}, i32);
  else return emitOpError("expected field \"hidden\", \"ponder\" or \"steps\", got \"") << f << "\"";
  if (r != want) return emitOpError("expected the ") << f << " result to be " << want << ", got " << r;
  return success();
}
void ActOutputOp::getKernelAttrs(KernelAttrs &a) { a.set("field", getField()); }
Syms ActOutputOp::inferSeqLengths(ArrayRef<Syms> in) {
  Syms r = lengths(ty(getResult()).getRank());
  r[0] = in[0][0];
  return r;
}
