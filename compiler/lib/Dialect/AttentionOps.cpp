// AttentionOps.cpp - attention (dense, causal, over a cache, sparse patterns), the additive mask,
// the Reformer's LSH attention and its lowered parts, and their gradients: each op's verifier, the
// hooks it defines (KilnInterfaces.td) and its gradient rule, op after op. Verifier messages start
// with "expected"; dynamic dims (`?`) match anything.
#include "VerifyUtils.h"
#include "kiln/Dialect/KilnDialect.h"
#include "mlir/IR/Builders.h"

using namespace mlir;
using namespace kiln;
using namespace kiln::verify;

// The sparse pattern attributes kiln.attention and kiln.attention_grad share (the mask,
// pattern_size, summary, part, layout, noncausal) and a block schedule (kiln.sparse).
LogicalResult kiln::verify::verifyAttentionPattern(Operation *op, int64_t lq, int64_t lk) {
  auto num = [&](StringRef n) -> std::optional<int64_t> {
    if (auto a = op->getAttrOfType<IntegerAttr>(n)) return a.getInt();
    return std::nullopt;
  };
  MaskKind mk = maskOf(op);
  StringRef mkName = stringifyMaskKind(mk);
  bool pattern = isSparsePattern(mk);
  std::optional<int64_t> size = num("pattern_size"), summary = num("summary");
  if (pattern) {
    if (!size || *size < 1) return op->emitOpError("expected a positive pattern_size with mask ") << mkName;
    // A sliding window over a cache (`past`) sees the keys of the cache, not its own rows only.
    const bool overCache = mk == MaskKind::window && isa<AttentionOp>(op) && op->getNumOperands() > 3;
    if (!overCache && failed(expectDim(op, "query length", lq, "key length", lk))) return failure();
  } else if (size || summary || op->getAttr("part") || op->getAttr("layout")) {
    return op->emitOpError("expected pattern_size, summary, part and layout only with a sparse mask");
  }
  bool halves = mk == MaskKind::strided || mk == MaskKind::fixed;
  if (halves && !op->getAttr("part"))
    return op->emitOpError("expected a part (union, local or global) with mask ") << mkName;
  if (mk == MaskKind::fixed && (!summary || *summary < 1 || *summary > *size))
    return op->emitOpError("expected summary in [1, pattern_size] with mask fixed");
  if (mk == MaskKind::layout) {
    auto rows = op->getAttrOfType<ArrayAttr>("layout");
    if (!rows || rows.empty()) return op->emitOpError("expected a layout (one string per query block) with mask layout");
    for (Attribute r : rows) {
      auto sa = dyn_cast<StringAttr>(r);
      StringRef s = sa ? sa.getValue() : StringRef();
      if (!sa || (int64_t)s.size() != (int64_t)rows.size() || s.find_first_not_of("#.") != StringRef::npos)
        return op->emitOpError("expected every layout row to have ") << rows.size() << " characters '#' or '.', got \"" << s << "\"";
    }
  }
  if (op->getAttr("noncausal") && mk != MaskKind::layout) return op->emitOpError("expected noncausal only with mask layout");
  // A block schedule (kiln-tile-sparse-pattern's, or edited by hand): one or two parts, the
  // layout's table and mask only with a layout.
  if (auto sp = op->getAttrOfType<SparseScheduleAttr>("kiln.sparse")) {
    if (!pattern) return op->emitOpError("expected kiln.sparse only on an attention with a sparse pattern");
    if (sp.getParts().empty() || sp.getParts().size() > 2) return op->emitOpError("expected a sparse schedule of one or two parts");
    for (SparsePartAttr part : sp.getParts()) {
      bool table = part.getBlocks() == SparseRule::layout_table;
      bool layoutMask = part.getMask() == SparseMask::layout || part.getExclude() == SparseMask::layout;
      if ((table || layoutMask) != (mk == MaskKind::layout) || (mk == MaskKind::layout && !table))
        return op->emitOpError("expected the layout_table rule and the layout mask exactly with mask layout");
      if (part.getMask() == SparseMask::none) return op->emitOpError("expected every sparse part to have an element mask");
      if (part.getQueries() == SparseOrder::summary_gather)
        return op->emitOpError("expected queries in sequence or stride_transpose order (summary_gather orders keys only)");
    }
  }
  return success();
}

// Grouped-query attention: the key and value heads (one count) divide the query heads; each
// group of H / Hkv query heads reads one key and value head. Dense and causal masks only.
static LogicalResult verifyHeadGroups(Operation *op, int64_t qHeads, int64_t kHeads, int64_t vHeads, MaskKind mask) {
  if (failed(expectDim(op, "key heads", kHeads, "value heads", vHeads))) return failure();
  if (ShapedType::isDynamic(qHeads) || ShapedType::isDynamic(kHeads) || qHeads == kHeads) return success();
  if (kHeads <= 0 || qHeads % kHeads)
    return op->emitOpError("expected the key heads (") << kHeads << ") to divide the query heads (" << qHeads << ")";
  if (mask != MaskKind::none && mask != MaskKind::causal && mask != MaskKind::window)
    return op->emitOpError("grouped-query attention (") << qHeads << " query heads, " << kHeads
                                                         << " key heads) supports masks none, causal and window, not "
                                                         << stringifyMaskKind(mask);
  return success();
}

LogicalResult AttentionOp::verify() {
  for (auto [role, v] : {std::pair<const char *, Value>{"query", getQuery()}, {"key", getKey()}, {"value", getValue()}})
    if (failed(expectRank(*this, role, v, 3))) return failure();
  auto q = ty(getQuery()), k = ty(getKey()), v = ty(getValue());
  if (failed(verifyHeadGroups(*this, q.getDimSize(0), k.getDimSize(0), v.getDimSize(0), getMask())) ||
      failed(expectDim(*this, "query head dim", q.getDimSize(2), "key head dim", k.getDimSize(2))) ||
      failed(expectDim(*this, "key length", k.getDimSize(1), "value length", v.getDimSize(1))))
    return failure();
  if (failed(verifyAttentionPattern(*this, q.getDimSize(1), k.getDimSize(1)))) return failure();
  if (isSparsePattern(getMask()) && getPast() && (getMask() != MaskKind::window || getKeyCount() || getKeyMask()))
    return emitOpError("expected no past or key count with a sparse pattern (a window takes a past)");
  if (getKeyMask()) {  // the fourth operand: a mask over the keys
    if (!getPast() || getKeyCount()) return emitOpError("expected a key mask operand with key_mask, and no key_count");
    if (ty(getPast()).getRank() != 1 || !ty(getPast()).getElementType().isInteger(32))
      return emitOpError("expected the key mask to be a 1-D i32 tensor");
    if (failed(expectDim(*this, "key mask length", ty(getPast()).getDimSize(0), "key length", k.getDimSize(1)))) return failure();
    if (getMask() != MaskKind::none) return emitOpError("expected no causal mask with a key mask");
  } else if (getPast() && !getKeyCount() && failed(expectPast(*this, getPast()))) {
    return failure();
  } else if (getKeyCount() && getPast() && (ty(getPast()).getRank() != 1 || ty(getPast()).getDimSize(0) != 1 ||
                               !ty(getPast()).getElementType().isInteger(32))) {
    return emitOpError("expected the key count to be a tensor<1xi32>");
  }
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

void AttentionOp::getKernelAttrs(KernelAttrs &a) {
  a.set("mask", stringifyMaskKind(getMask()));
  a.setFloat("scale", getScale().convertToFloat());
  if (getPast()) a.set("valid", getKeyCount() ? "key_count" : getKeyMask() ? "key_mask" : "past");
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
  double pairs = lqh * lk * (getMask() == MaskKind::causal ? 0.5 : 1.0);
  if (std::optional<sparse::Pattern> p = patternOf(*this)) pairs = dimOf(getQuery(), 0) * sparse::countWork(*p, (int64_t)lk).visited;
  c.flops = pairs * (2 * d + 2 * dv + 4);
  return c;
}

LogicalResult AttentionOp::buildGradient(OpBuilder &b, ArrayRef<Value> g, SmallVectorImpl<Value> &out) {
  if (getPast()) return emitOpError("gradient: attention over a cache (past or key_count) is not differentiable");
  if (getMask() == MaskKind::window && !patternOf(*this))
    return emitOpError("gradient: a sliding window over grouped key heads (row strips, not a block schedule) is not "
                       "differentiable yet");
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
  for (AttentionGradWrt w : {AttentionGradWrt::query, AttentionGradWrt::key, AttentionGradWrt::value}) {
    Value of = getOperand((unsigned)w);  // query, key, value: operands 0, 1, 2
    // A sparse pattern's gradients state it as the attention does (kiln-tile-sparse-pattern
    // gives them its block schedule).
    out.push_back(AttentionGradOp::create(b, getLoc(), of.getType(), getQuery(), getKey(), getValue(), o, g[0], lse,
                                          getMaskAttr(), getScaleAttr(), AttentionGradWrtAttr::get(b.getContext(), w), getPatternSizeAttr(),
                                          getSummaryAttr(), getPartAttr(), getLayoutAttr(), getNoncausalAttr()));
    if (Attribute sp = (*this)->getAttr("kiln.sparse")) out.back().getDefiningOp()->setAttr("kiln.sparse", sp);
  }
  return success();
}

void kiln::verify::patternKernelAttrs(Operation *op, KernelAttrs &a) {
  if (auto v = op->getAttrOfType<IntegerAttr>("pattern_size")) a.set("pattern_size", v.getInt());
  if (auto v = op->getAttrOfType<IntegerAttr>("summary")) a.set("summary", v.getInt());
  if (std::optional<PatternPart> p = partOf(op)) a.set("part", stringifyPatternPart(*p));
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

// A sliding window over a cache (a past operand) or over grouped key heads has no block
// schedule: kiln-tile-ops gives it row strips, the window a predicate on the keys.
static bool windowInRowStrips(Operation *op) {
  if (maskOf(op) != MaskKind::window) return false;
  auto a = dyn_cast<AttentionOp>(op);
  auto heads = [](Value v) { return cast<RankedTensorType>(v.getType()).getDimSize(0); };
  if (a) return a.getPast() || heads(a.getQuery()) != heads(a.getKey());
  auto g = dyn_cast<AttentionGradOp>(op);
  return g && heads(g.getQuery()) != heads(g.getKey());
}

std::optional<sparse::Pattern> kiln::patternOf(Operation *op) {
  sparse::Pattern p;
  auto size = op->getAttrOfType<IntegerAttr>("pattern_size");
  if (!size || windowInRowStrips(op)) return std::nullopt;
  switch (maskOf(op)) {
    case MaskKind::none:
    case MaskKind::causal: return std::nullopt;  // the verifier's to report
    case MaskKind::window: p.kind = sparse::Kind::Window; break;
    case MaskKind::strided: p.kind = sparse::Kind::Strided; break;
    case MaskKind::fixed: p.kind = sparse::Kind::Fixed; break;
    case MaskKind::layout: p.kind = sparse::Kind::Layout; break;
  }
  switch (partOf(op).value_or(PatternPart::union_)) {
    case PatternPart::union_: p.part = sparse::Half::Union; break;
    case PatternPart::local: p.part = sparse::Half::Local; break;
    case PatternPart::global: p.part = sparse::Half::Global; break;
  }
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

LshAttentionOp::Lowered LshAttentionOp::lower(OpBuilder &b) {
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointAfter(*this);
  Location loc = getLoc();
  auto qt = cast<RankedTensorType>(getQk().getType());
  int64_t H = qt.getDimSize(0), L = qt.getDimSize(1), R = (int64_t)getHashes();
  auto i32 = b.getI32Type();
  Operation *hash = LshHashOp::create(b, loc, RankedTensorType::get({H, R, L}, i32), getQk(), getRotations());
  Operation *sort = LshSortOp::create(b, loc, RankedTensorType::get({H, R, 2, L}, i32), hash->getResult(0));
  Operation *attn = LshChunkAttentionOp::create(b, loc, getType(), getQk(), getValue(), hash->getResult(0),
                                                sort->getResult(0), getChunkAttr(), getCausalAttr(), getScaleAttr());
  for (NamedAttribute a : (*this)->getDiscardableAttrs())
    if (a.getName().getValue().starts_with("kiln."))
      for (Operation *op : {hash, sort, attn}) op->setAttr(a.getName(), a.getValue());
  getResult().replaceAllUsesWith(attn->getResult(0));
  return {hash->getResult(0), sort->getResult(0), attn->getResult(0)};
}

// The buckets are constants (argmax has no gradient) and the backward must see the forward's:
// the forward is lowered here (`lower`, as kiln-lower-lsh-attention does) and both gradients
// read its hash and order. The rotations are fixed: no gradient.
LogicalResult LshAttentionOp::buildGradient(OpBuilder &b, ArrayRef<Value> g, SmallVectorImpl<Value> &out) {
  Location loc = getLoc();
  auto [buckets, sorted, o] = lower(b);
  for (LshGradWrt w : {LshGradWrt::qk, LshGradWrt::value})
    out.push_back(LshChunkAttentionGradOp::create(b, loc, w == LshGradWrt::qk ? getQk().getType() : getValue().getType(),
                                                  getQk(), getValue(), buckets, sorted, o, g[0], getChunkAttr(),
                                                  getCausalAttr(), getScaleAttr(), LshGradWrtAttr::get(b.getContext(), w)));
  out.push_back(Value());
  return success();
}

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
  if (getKind() != MaskKind::causal)
    return emitOpError("expected the causal mask (the only one kiln.mask makes), got ") << stringifyMaskKind(getKind());
  if (ty(getScores()).getRank() < 2) return emitOpError("expected scores of rank 2 or more");
  if (getScores().getType() != getResult().getType()) return emitOpError("expected the result to have the scores' type");
  return success();
}

void MaskOp::getKernelAttrs(KernelAttrs &a) { a.set("mask", stringifyMaskKind(getKind())); }

LogicalResult AttentionGradOp::verify() {
  for (auto [role, v] : {std::pair<const char *, Value>{"query", getQuery()}, {"key", getKey()}, {"value", getValue()},
                         {"out", getOut()}, {"grad", getGrad()}})
    if (failed(expectRank(*this, role, v, 3))) return failure();
  auto q = ty(getQuery()), k = ty(getKey()), v = ty(getValue());
  if (failed(verifyAttentionPattern(*this, q.getDimSize(1), k.getDimSize(1)))) return failure();
  if (getMask() == MaskKind::window && q.getDimSize(0) != k.getDimSize(0))
    return emitOpError("expected the key heads to equal the query heads with mask window (the backward has no grouped window)");
  if (failed(expectShape(*this, "out", getOut(), "grad", getGrad())) ||
      failed(verifyHeadGroups(*this, q.getDimSize(0), k.getDimSize(0), v.getDimSize(0), getMask())) ||
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
  Value of = getOperand((unsigned)getWrt());  // query, key, value: operands 0, 1, 2
  return expectShape(*this, "result", getResult(), stringifyAttentionGradWrt(getWrt()).data(), of);
}

void AttentionGradOp::getKernelAttrs(KernelAttrs &a) {
  a.set("mask", stringifyMaskKind(getMask()));
  a.setFloat("scale", getScale().convertToFloat());
  a.set("wrt", stringifyAttentionGradWrt(getWrt()));
  patternKernelAttrs(*this, a);
}

Syms AttentionGradOp::inferSeqLengths(ArrayRef<Syms> in) { return in[(unsigned)getWrt()]; }

// The scores once more, then dP and the product wanted.
OpCost AttentionGradOp::getCost(function_ref<double(Value)> numel) {
  OpCost c = defaultCost(*this, numel);
  double lk = numel(getKey()) / dimOf(getKey(), 2) / dimOf(getKey(), 0);
  double lqh = numel(getQuery()) / dimOf(getQuery(), 2);
  double d = dimOf(getQuery(), 2), dv = dimOf(getValue(), 2);
  double pairs = lqh * lk * (getMask() == MaskKind::causal ? 0.5 : 1.0);
  if (std::optional<sparse::Pattern> p = patternOf(*this))  // the blocks the schedule visits
    pairs = dimOf(getQuery(), 0) * sparse::countWork(*p, (int64_t)lk).visited;
  c.flops = pairs * (2 * d + 4 * dv + 8);
  return c;
}

LogicalResult LshChunkAttentionGradOp::verify() {
  if (getChunk() < 1) return emitOpError("expected a positive chunk");
  for (auto [role, v] : {std::pair<const char *, Value>{"qk", getQk()}, {"value", getValue()}, {"buckets", getBuckets()},
                         {"out", getOut()}, {"grad", getGrad()}})
    if (failed(expectRank(*this, role, v, 3))) return failure();
  if (failed(expectRank(*this, "sorted", getSorted(), 4)) || failed(expectShape(*this, "out", getOut(), "grad", getGrad())) ||
      failed(expectDim(*this, "sorted rounds", ty(getSorted()).getDimSize(1), "bucket rounds", ty(getBuckets()).getDimSize(1))) ||
      failed(expectDim(*this, "value rows", ty(getValue()).getDimSize(1), "qk rows", ty(getQk()).getDimSize(1))) ||
      failed(expectDim(*this, "out width", ty(getOut()).getDimSize(2), "value width", ty(getValue()).getDimSize(2))))
    return failure();
  bool qk = getWrt() == LshGradWrt::qk;
  return expectShape(*this, "result", getResult(), qk ? "qk" : "value", qk ? getQk() : getValue());
}

void LshChunkAttentionGradOp::getKernelAttrs(KernelAttrs &a) {
  a.set("chunk", (int64_t)getChunk());
  a.setFloat("scale", getScale().convertToFloat());
  if (getCausal()) a.set("causal", "1");
  a.set("wrt", stringifyLshGradWrt(getWrt()));
}

Syms LshChunkAttentionGradOp::inferSeqLengths(ArrayRef<Syms> in) { return getWrt() == LshGradWrt::qk ? in[0] : in[1]; }

// Per query and round, two chunks of keys: the scores and dP once more, and the sums wanted
// (the qk gradient: the scores and dS twice, as query and as key).
OpCost LshChunkAttentionGradOp::getCost(function_ref<double(Value)> numel) {
  OpCost c = defaultCost(*this, numel);
  double d = dimOf(getQk(), 2), dv = dimOf(getValue(), 2), rounds = dimOf(getBuckets(), 1);
  double pairs = numel(getQk()) / d * rounds * 2.0 * (double)getChunk();
  c.flops = getWrt() == LshGradWrt::qk ? pairs * (3 * (2 * d + 2 * dv + 8) + 4 * d) : pairs * (2 * (2 * d + 4) + 2 * dv + 2 * dv);
  return c;
}
