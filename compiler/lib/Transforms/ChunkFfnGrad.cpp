// kiln-chunk-ffn-grad: the backward of an FFN whose intermediates are recomputed runs over
// chunks of d_ff, so each [rows, d_ff] intermediate exists one chunk of columns at a time.
//
// The chain it finds (kiln-recompute-checkpoints' clones of a checkpointed FFN, with
// --recompute-ffn all or a DSL block; dY the gradient of the FFN's output):
//   %h  = kiln.linear %x, %w1, %b1                 (no activation: the gelu's gradient reads %h)
//   %a  = kiln.gelu %h                             (or another activation op)
//   %dw2 = kiln.weight_grad %a, %dy                (%a's only reader)
//   %da = kiln.matmul %dy, %w2                     (%da's only reader is the next op)
//   %dh = kiln.activation_grad %h, %da             (%h's other reader)
//   %dx = kiln.matmul %dh, %w1                     (%dh's readers: these three)
//   %dw1 = kiln.weight_grad %x, %dh
//   %db1 = kiln.reduce_rows %dh
//
// Algorithm, per match:
//   1. The chunk: the chunk-cols option, else the widest multiple of 64 columns whose
//      [rows, chunk] f32 intermediate fits in chunk-bytes at the entry's row bound (at least 64).
//      No bound, or a chunk of all of d_ff: the chain stays as it is.
//   2. For each chunk [o, o + c) of d_ff: slices of w1, b1 and w2 along their d_ff axis (strided
//      views after kiln-fold-views, no copies) and the eight ops again on [rows, c] values.
//   3. %dw1, %dw2 and %db1 become concats of the chunks' parts along their d_ff axis (each part
//      written in place by its kernel, kiln-fold-views); %dx the sum of the chunks' products.
// Every intermediate is then [rows, c]: the buffer plan holds three of them (%h, %a or %da, and
// %dh) instead of three [rows, d_ff]. The FLOPs are the same; the sum of %dx adds (chunks - 1)
// elementwise passes over [rows, d].
#include <optional>

#include "kiln/Dialect/SeqLengths.h"
#include "kiln/Transforms/Passes.h"
#include "kiln/Transforms/Utils.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"

namespace kiln {
#define GEN_PASS_DEF_CHUNKFFNGRAD
#include "kiln/Transforms/Passes.h.inc"
}  // namespace kiln

using namespace mlir;

namespace {
struct Chain {
  kiln::LinearOp h;
  Operation *act;
  kiln::WeightGradOp dw2;
  kiln::MatMulOp da;
  kiln::ActivationGradOp dh;
  kiln::MatMulOp dx;
  kiln::WeightGradOp dw1;
  kiln::ReduceRowsOp db1;
  // In program order: each op reads only those before it.
  SmallVector<Operation *, 8> ops() {
    return {h, act, dw2, da, dh, dx, dw1, db1};
  }
};

template <typename T>
T onlyUser(Value v) {
  return v.hasOneUse() ? dyn_cast<T>(*v.getUsers().begin()) : T();
}

// The chain that starts at linear %h, or nothing.
std::optional<Chain> match(kiln::LinearOp h) {
  Chain c{};
  c.h = h;
  if (!h.getBias() || h.getActivation() != kiln::ActivationKind::none || cast<RankedTensorType>(h.getX().getType()).getRank() != 2)
    return std::nullopt;
  for (Operation *u : h.getResult().getUsers()) {
    if (auto ag = dyn_cast<kiln::ActivationGradOp>(u); ag && ag.getX() == h.getResult() && !c.dh) c.dh = ag;
    else if (isa<kiln::KilnActivationOpInterface>(u) && u->getOperand(0) == h.getResult() && !c.act) c.act = u;
    else return std::nullopt;
  }
  if (!c.act || !c.dh) return std::nullopt;
  if (cast<kiln::KilnActivationOpInterface>(c.act).getActivation() != c.dh.getActivation()) return std::nullopt;
  c.dw2 = onlyUser<kiln::WeightGradOp>(c.act->getResult(0));
  if (!c.dw2 || c.dw2.getX() != c.act->getResult(0)) return std::nullopt;
  Value dy = c.dw2.getGrad();
  c.da = c.dh.getGrad().getDefiningOp<kiln::MatMulOp>();
  if (!c.da || !c.da.getResult().hasOneUse() || c.da.getLhs() != dy || c.dh.getGrad() == c.dh.getX()) return std::nullopt;
  for (Operation *u : c.dh.getResult().getUsers()) {
    if (auto m = dyn_cast<kiln::MatMulOp>(u); m && m.getLhs() == c.dh.getResult() && !c.dx) c.dx = m;
    else if (auto w = dyn_cast<kiln::WeightGradOp>(u); w && w.getGrad() == c.dh.getResult() && w.getX() == h.getX() && !c.dw1) c.dw1 = w;
    else if (auto r = dyn_cast<kiln::ReduceRowsOp>(u); r && !c.db1) c.db1 = r;
    else return std::nullopt;
  }
  if (!c.dx || !c.dw1 || !c.db1) return std::nullopt;
  // Each op once, in one block.
  for (Operation *op : c.ops())
    if (op->getBlock() != h->getBlock() || op->getNumResults() != 1) return std::nullopt;
  return c;
}

RankedTensorType withDim(Value v, int64_t axis, int64_t size) {
  auto t = cast<RankedTensorType>(v.getType());
  SmallVector<int64_t> shape(t.getShape());
  shape[axis] = size;
  return RankedTensorType::get(shape, t.getElementType());
}

// A weight's d_ff axis. h's w1: [d_ff, d] out_in, [d, d_ff] in_out. A matmul's rhs [K, N], or
// [N, K] with transpose_b: da reads w2 with N = d_ff, dx reads w1 with K = d_ff. A weight
// gradient has its weight's layout: out_in [N, K], in_out [K, N]; dw2's K is d_ff, dw1's N.
int64_t w1Axis(kiln::LinearOp h) { return h.getWeightLayout() == kiln::WeightLayoutKind::out_in ? 0 : 1; }
int64_t rhsAxis(kiln::MatMulOp m, bool dffIsN) { return (dffIsN == m.getTransposeB()) ? 0 : 1; }
int64_t gradAxis(kiln::WeightGradOp w, bool dffIsK) {
  bool outIn = w.getWeightLayout() == kiln::WeightLayoutKind::out_in;
  return dffIsK == outIn ? 1 : 0;
}

void chunkChain(Chain c, int64_t chunk) {
  auto w1t = cast<RankedTensorType>(c.h.getWeight().getType());
  const int64_t dff = w1t.getDimSize(w1Axis(c.h));
  if (chunk <= 0 || chunk >= dff || w1t.isDynamicDim(w1Axis(c.h))) return;
  // Where the chunks go: before the chain's first op, after every operand they read.
  Operation *first = c.h;
  for (Operation *op : c.ops())
    if (op->isBeforeInBlock(first)) first = op;
  Value dy = c.dw2.getGrad();
  Operation *ip = first;
  for (Value v : SmallVector<Value>{c.h.getX(), c.h.getWeight(), c.h.getBias(), c.da.getRhs(), c.dx.getRhs(), dy}) {
    Operation *def = v.getDefiningOp();
    if (def && def->getBlock() == ip->getBlock() && !def->isBeforeInBlock(ip)) ip = def->getNextNode();
  }
  // Every reader of a result must come after the new ops.
  for (Operation *res : {(Operation *)c.dw2, (Operation *)c.dx, (Operation *)c.dw1, (Operation *)c.db1})
    for (Operation *u : res->getResult(0).getUsers()) {
      Operation *t = ip->getBlock()->findAncestorOpInBlock(*u);
      if (!t || t->isBeforeInBlock(ip)) return;
    }

  OpBuilder b(ip);
  auto slice = [&](Value w, int64_t axis, int64_t off, int64_t size, Location loc) -> Value {
    return kiln::SliceOp::create(b, loc, withDim(w, axis, size), w, b.getI64IntegerAttr(axis), b.getI64IntegerAttr(off));
  };
  auto again = [&](Operation *op, int64_t resultAxis, int64_t size) {
    Operation *n = b.clone(*op);
    if (resultAxis >= 0) n->getResult(0).setType(withDim(op->getResult(0), resultAxis, size));
    return n;
  };
  SmallVector<Value> dw1s, dw2s, db1s, dxs;
  const int64_t aDw2 = gradAxis(c.dw2, /*dffIsK=*/true), aDw1 = gradAxis(c.dw1, /*dffIsK=*/false);
  for (int64_t o = 0; o < dff; o += chunk) {
    const int64_t n = std::min(chunk, dff - o);
    Value w1 = slice(c.h.getWeight(), w1Axis(c.h), o, n, c.h.getLoc()), b1 = slice(c.h.getBias(), 0, o, n, c.h.getLoc());
    Value w2 = slice(c.da.getRhs(), rhsAxis(c.da, true), o, n, c.da.getLoc());
    Value w1t = slice(c.dx.getRhs(), rhsAxis(c.dx, false), o, n, c.dx.getLoc());
    Operation *h = again(c.h, 1, n);
    h->setOperand(1, w1);
    h->setOperand(2, b1);
    Operation *a = again(c.act, 1, n);
    a->setOperand(0, h->getResult(0));
    Operation *dw2 = again(c.dw2, aDw2, n);
    dw2->setOperand(0, a->getResult(0));
    Operation *da = again(c.da, 1, n);
    da->setOperand(1, w2);
    Operation *dh = again(c.dh, 1, n);
    dh->setOperand(0, h->getResult(0));
    dh->setOperand(1, da->getResult(0));
    Operation *dx = again(c.dx, -1, n);
    dx->setOperand(0, dh->getResult(0));
    dx->setOperand(1, w1t);
    Operation *dw1 = again(c.dw1, aDw1, n);
    dw1->setOperand(1, dh->getResult(0));
    Operation *db1 = again(c.db1, 0, n);
    db1->setOperand(0, dh->getResult(0));
    dw2s.push_back(dw2->getResult(0));
    dw1s.push_back(dw1->getResult(0));
    db1s.push_back(db1->getResult(0));
    if (dxs.empty()) dxs.push_back(dx->getResult(0));
    else dxs.front() = kiln::AddOp::create(b, c.dx.getLoc(), c.dx.getType(), dxs.front(), dx->getResult(0));
  }
  auto concat = [&](Operation *old, ArrayRef<Value> parts, int64_t axis) {
    Value v = kiln::ConcatOp::create(b, old->getLoc(), old->getResult(0).getType(), parts, b.getI64IntegerAttr(axis));
    old->getResult(0).replaceAllUsesWith(v);
  };
  concat(c.dw2, dw2s, aDw2);
  concat(c.dw1, dw1s, aDw1);
  concat(c.db1, db1s, 0);
  c.dx.getResult().replaceAllUsesWith(dxs.front());
  SmallVector<Operation *, 8> old = c.ops();
  for (Operation *op : llvm::reverse(old)) op->erase();  // readers first
}

struct ChunkFfnGradPass : kiln::impl::ChunkFfnGradBase<ChunkFfnGradPass> {
  using ChunkFfnGradBase::ChunkFfnGradBase;
  void runOnOperation() override {
    ModuleOp m = getOperation();
    SmallVector<int64_t> bounds;
    if (auto bnd = m->getAttrOfType<DenseI64ArrayAttr>("kiln.seq_bounds")) bounds.assign(bnd.asArrayRef().begin(), bnd.asArrayRef().end());
    for (auto f : m.getOps<func::FuncOp>()) {
      if (f.isExternal()) continue;
      SmallVector<Chain> chains;
      f.walk([&](kiln::LinearOp h) {
        if (auto c = match(h)) chains.push_back(*c);
      });
      if (chains.empty()) continue;
      std::optional<kiln::SeqLengths> lengths;
      if (!chunkCols && !bounds.empty()) {
        FailureOr<kiln::SeqLengths> l = kiln::SeqLengths::infer(f);
        if (failed(l)) return signalPassFailure();
        lengths = std::move(*l);
      }
      for (Chain &c : chains) {
        int64_t chunk = chunkCols;
        if (!chunk && lengths) {
          double rows = lengths->numel(c.h.getX(), bounds) / cast<RankedTensorType>(c.h.getX().getType()).getDimSize(1);
          chunk = std::max<int64_t>(64, (int64_t)(chunkBytes / (4 * std::max(1.0, rows))) / 64 * 64);
        }
        chunkChain(c, chunk);
      }
    }
  }
};
}  // namespace
