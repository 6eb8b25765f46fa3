// SeqLengths.cpp - sequence-length inference over an entry (see SeqLengths.h).
#include "kiln/Dialect/SeqLengths.h"

using namespace mlir;

namespace kiln {

FailureOr<SeqLengths> SeqLengths::infer(func::FuncOp f) {
  SeqLengths r;
  for (BlockArgument a : f.getArguments()) {
    auto s = f.getArgAttrOfType<DenseI64ArrayAttr>(a.getArgNumber(), "kiln.syms");
    if (!s) {
      f.emitError("expected every argument to carry kiln.syms");
      return failure();
    }
    r.syms_[a] = Syms(s.asArrayRef());
  }
  bool bad = false;
  f.walk<WalkOrder::PreOrder>([&](Operation *op) {
    auto k = dyn_cast<KilnOpInterface>(op);
    if (!k || op->getNumResults() == 0) return;
    SmallVector<Syms> in;
    for (Value v : op->getOperands()) in.push_back(r.of(v));
    Syms s = k.inferSeqLengths(in);
    auto rt = cast<RankedTensorType>(op->getResult(0).getType());
    bool ok = (int64_t)s.size() == rt.getRank();
    for (int64_t d = 0; ok && d < rt.getRank(); ++d) ok = ShapedType::isDynamic(rt.getDimSize(d)) == (s[d] >= 0);
    if (!ok) {
      op->emitError("expected every dynamic dim to be a sequence length and no static one, but ") << rt << " is not";
      bad = true;
    }
    r.syms_[op->getResult(0)] = s;
    // An attention's lse [H, Lq]: the query's heads and rows.
    if (auto a = dyn_cast<AttentionOp>(op); a && a.getLse()) r.syms_[a.getLse()] = Syms{in[0][0], in[0][1]};
    // The body's arguments: a loop's carry and step number, a recurrent step's state.
    if (auto loop = dyn_cast<LoopOp>(op)) {
      Block &b = loop.getBody().front();
      r.syms_[b.getArgument(0)] = r.of(loop.getInit());
      r.syms_[b.getArgument(1)] = Syms{-1};
    } else if (auto rec = dyn_cast<RecurrentOp>(op)) {
      r.syms_[rec.getBody().front().getArgument(0)] = r.of(rec.getInit());
    }
  });
  if (bad) return failure();
  return r;
}

const Syms &SeqLengths::of(Value v) const {
  auto it = syms_.find(v);
  if (it != syms_.end()) return it->second;
  return none_;
}

double SeqLengths::numel(Value v, ArrayRef<int64_t> values) const {
  auto t = cast<RankedTensorType>(v.getType());
  const Syms &s = of(v);
  double n = 1;
  for (int64_t d = 0; d < t.getRank(); ++d)
    n *= d < (int64_t)s.size() && s[d] >= 0 && s[d] < (int64_t)values.size() ? (double)values[s[d]] : (double)t.getDimSize(d);
  return n;
}

}  // namespace kiln
