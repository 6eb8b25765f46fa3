// kiln-fold-views: slices, transposes and the reshapes after them become strided views of the
// buffers they read (or, for a transpose of a kernel's result, the buffer that kernel writes),
// so no kernel copies them.
//
// Algorithm, per entry, in program order (ops outside loops only; CPU targets only):
//   1. The layout of a value: its op's #kiln.view, else dense row-major. A layout is usable
//      when every stride and the offset are static (a dense tensor whose dims after the
//      outermost are static, or a view) and the innermost stride stays 1 (kernels vectorize
//      along rows: a transpose that moves the innermost dim keeps its kernel).
//   2. A slice (the last element of a sequence too: its offset then grows with the length, at
//      run time) or a transpose of a value with a usable layout gets
//      `kiln.view = #kiln.view<kind = read, ...>`: offset += offset * stride along the axis;
//      strides permuted. Only when every user can read the view in place: a Halide kernel (not
//      the host's lsh_sort, not a cache write's cache), another slice or transpose, or a reshape
//      whose result is again a strided layout (split dims, or merged dims that are contiguous)
//      and whose users can read it in turn (those reshapes get their own read view). A returned
//      value, a loop's operand or yield keeps its copy kernel, as does a view of a buffer that
//      is written in place while the view is read (a state, a loop's initial value; not a
//      parameter that the training step's optimizer updates after the view's last reader).
//   3. Otherwise a transpose T whose operand A is the result of a Halide kernel used by T alone
//      (and T's own dense layout is static): A gets `kind = write` with T's strides permuted
//      back, T gets `kind = placed`: A's kernel writes T's elements in place (GPT-2's
//      merge_heads: attention writes [heads, L, head_dim] into the [L, d] rows c_proj reads).
//   4. A concat whose operands are each written by their own kernel (through reshapes and a
//      placed transpose, each value used by the next alone) gets
//      `kind = placed`, as do those reshapes and transposes: every producer writes its part of
//      the concat's buffer in place (a write view at its offset, with the concat's strides
//      carried back through the reshapes and the transpose). GPT-2's backward: dq, dk and dv
//      written straight into the [L, 3d] gradient of c_attn's output.
//   kiln-plan-buffers gives a read view its operand's buffer, a write its user's and a placed
//   value its placed user's;
//   kiln-outline-kernels generates each kernel for the strides it reads and writes
//   (KernelSpec); kiln-lower-to-llvm passes the offset and strides in the buffer descriptors.
#include <optional>

#include "kiln/Dialect/SeqLengths.h"
#include "kiln/Transforms/Passes.h"
#include "kiln/Transforms/Utils.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"

namespace kiln {
#define GEN_PASS_DEF_FOLDVIEWS
#include "kiln/Transforms/Passes.h.inc"
}  // namespace kiln

using namespace mlir;

namespace {

struct Layout {
  int64_t offset = 0;
  SmallVector<int64_t> strides;
  int64_t lastSym = -1, lastStride = 0;  // + (L[lastSym] - 1) * lastStride: a sequence's last row
};

std::optional<Layout> denseLayout(RankedTensorType t) {
  Layout l;
  l.strides.assign(t.getRank(), 1);
  int64_t s = 1;
  for (int64_t d = t.getRank() - 1; d >= 0; --d) {
    l.strides[d] = s;
    if (d > 0) {
      if (t.isDynamicDim(d)) return std::nullopt;
      s *= t.getDimSize(d);
    }
  }
  return l;
}

std::optional<Layout> layoutOf(Value v) {
  if (kiln::ViewAttr a = kiln::viewOf(v))
    return Layout{a.getOffset(), SmallVector<int64_t>(a.getStrides().asArrayRef()), a.getLastSym(), a.getLastStride()};
  return denseLayout(cast<RankedTensorType>(v.getType()));
}

// The layout of reshape(in) -> out over a strided input, if it is one: each group of input
// dims that becomes a group of output dims must be contiguous; dynamic dims map one to one.
std::optional<Layout> reshapeLayout(const Layout &in, RankedTensorType it, RankedTensorType ot) {
  Layout out{in.offset, SmallVector<int64_t>(ot.getRank(), 0), in.lastSym, in.lastStride};
  int64_t i = 0, j = 0, ri = it.getRank(), ro = ot.getRank();
  while (i < ri || j < ro) {
    // size-1 dims: any stride
    if (j < ro && !ot.isDynamicDim(j) && ot.getDimSize(j) == 1) {
      out.strides[j++] = 1;
      continue;
    }
    if (i < ri && !it.isDynamicDim(i) && it.getDimSize(i) == 1) {
      ++i;
      continue;
    }
    if (i >= ri || j >= ro) return std::nullopt;
    if (it.isDynamicDim(i) || ot.isDynamicDim(j)) {
      if (!it.isDynamicDim(i) || !ot.isDynamicDim(j)) return std::nullopt;
      out.strides[j++] = in.strides[i++];
      continue;
    }
    int64_t i0 = i, j0 = j, pi = it.getDimSize(i), pj = ot.getDimSize(j);
    while (pi != pj) {
      if (pi < pj) {
        if (++i >= ri || it.isDynamicDim(i)) return std::nullopt;
        pi *= it.getDimSize(i);
      } else {
        if (++j >= ro || ot.isDynamicDim(j)) return std::nullopt;
        pj *= ot.getDimSize(j);
      }
    }
    for (int64_t k = i0; k < i; ++k)  // contiguous group
      if (it.getDimSize(k) != 1 && in.strides[k] != in.strides[k + 1] * it.getDimSize(k + 1)) return std::nullopt;
    int64_t s = in.strides[i];
    for (int64_t k = j; k >= j0; --k) {
      out.strides[k] = s;
      s *= ot.getDimSize(k);
    }
    ++i, ++j;
  }
  return out;
}

kiln::ViewAttr viewAttr(MLIRContext *ctx, kiln::ViewKind kind, const Layout &l) {
  return kiln::ViewAttr::get(ctx, kind, l.offset, DenseI64ArrayAttr::get(ctx, l.strides), l.lastSym, l.lastStride);
}

// A Halide kernel that reads operand `idx` through its buffer descriptor.
bool readsInPlace(Operation *user, unsigned idx) {
  if (!kiln::isKernelOp(user) || !kiln::runtimeKernel(user).empty()) return false;
  if (kiln::writesInPlace(user) && (idx == 0 || llvm::is_contained(kiln::alsoWritten(user), idx))) return false;
  return true;
}

class Folder {
 public:
  Folder(Block &body, const kiln::SeqLengths &lengths) : body_(body), lengths_(lengths) {}

  // The value whose buffer v shares (through reshapes, read views, cache writes and loops).
  static Value root(Value v) {
    while (Operation *def = v.getDefiningOp()) {
      kiln::ViewAttr view = kiln::viewOf(v);
      if (isa<kiln::ReshapeOp>(def) || (view && view.getKind() == kiln::ViewKind::read)) v = def->getOperand(0);
      else if (kiln::writesInPlace(def)) v = def->getOperand(0);
      else if (auto l = dyn_cast<kiln::LoopOp>(def)) v = l.getInit();
      else break;
    }
    return v;
  }
  // A view is read when its users run, not where it is defined: its buffer must not change in
  // between. Buffers written in place (states, which cache writes update, and loops' initial
  // values, which become their carries) keep their copies, unless every write comes after every
  // reader of the view (a parameter that a training step's optimizer updates at its end; the
  // writer is then the op of this block that holds it). A state is written across runs too.
  void findWrittenInPlace() {
    body_.walk([&](Operation *op) {
      Operation *top = body_.findAncestorOpInBlock(*op);
      if (kiln::writesInPlace(op)) written_[key(op->getOperand(0))].push_back(top);
      for (unsigned i : kiln::alsoWritten(op)) written_[key(op->getOperand(i))].push_back(top);
      if (auto l = dyn_cast<kiln::LoopOp>(op)) written_[key(l.getInit())].push_back(top);
      if (auto st = dyn_cast<kiln::StateOp>(op)) written_[st.getResult()].push_back(nullptr);
    });
  }
  // The buffer v shares: its root; every kiln.param of one name is one buffer.
  Value key(Value v) {
    Value r = root(v);
    if (auto p = r.getDefiningOp<kiln::ParamOp>()) return params_.try_emplace(p.getName(), r).first->second;
    return r;
  }
  // Whether every reader of v, and of the views and reshapes of it, runs before `w`.
  bool readBefore(Value v, Operation *w) {
    for (Operation *u : v.getUsers()) {
      Operation *t = body_.findAncestorOpInBlock(*u);
      if (!t || !t->isBeforeInBlock(w)) return false;
      if (isa<kiln::ReshapeOp, kiln::SliceOp, kiln::TransposeOp>(u) && !readBefore(u->getResult(0), w)) return false;
    }
    return true;
  }
  // Whether the buffer that `view`'s operand shares is unchanged while the view is read.
  bool unchangedWhileRead(Operation *view) {
    auto it = written_.find(key(view->getOperand(0)));
    if (it == written_.end()) return true;
    return llvm::all_of(it->second, [&](Operation *w) { return w && readBefore(view->getResult(0), w); });
  }

  // 2. Whether every user of v (laid out as l) reads it in place; the reshapes it passes
  // through, with their layouts, are collected.
  bool usersRead(Value v, const Layout &l, SmallVectorImpl<std::pair<Operation *, Layout>> &reshapes) {
    for (OpOperand &use : v.getUses()) {
      Operation *user = use.getOwner();
      if (user->getBlock() != &body_) return false;
      if (auto r = dyn_cast<kiln::ReshapeOp>(user)) {
        std::optional<Layout> rl = reshapeLayout(l, cast<RankedTensorType>(v.getType()), r.getType());
        if (!rl) return false;
        reshapes.push_back({user, *rl});
        if (!usersRead(r.getResult(), *rl, reshapes)) return false;
        continue;
      }
      if (!readsInPlace(user, use.getOperandNumber())) return false;
    }
    return true;
  }

  bool foldRead(Operation *op, const Layout &l) {
    if (l.strides.back() != 1) return false;  // rows stay contiguous: kernels vectorize along them
    if (!unchangedWhileRead(op)) return false;
    SmallVector<std::pair<Operation *, Layout>> reshapes;
    if (!usersRead(op->getResult(0), l, reshapes)) return false;
    MLIRContext *ctx = op->getContext();
    op->setAttr("kiln.view", viewAttr(ctx, kiln::ViewKind::read, l));
    for (auto &[r, rl] : reshapes) r->setAttr("kiln.view", viewAttr(ctx, kiln::ViewKind::read, rl));
    return true;
  }

  void run() {
    findWrittenInPlace();
    for (Operation &o : body_) {
      Operation *op = &o;
      if (auto s = dyn_cast<kiln::SliceOp>(op)) {
        std::optional<Layout> in = layoutOf(s.getInput());
        if (!in) continue;
        Layout l = *in;
        int64_t axis = s.getAxis(), off = s.getOffset();
        auto it = cast<RankedTensorType>(s.getInput().getType());
        if (off >= 0) {
          l.offset += off * l.strides[axis];
        } else if (!it.isDynamicDim(axis)) {  // the last element of a static axis
          l.offset += (it.getDimSize(axis) - 1) * l.strides[axis];
        } else {  // the last element of a sequence: known at run time
          if (l.lastSym >= 0) continue;
          l.lastSym = lengths_.of(s.getInput())[axis];
          l.lastStride = l.strides[axis];
          if (l.lastSym < 0) continue;
        }
        foldRead(op, l);
      } else if (auto t = dyn_cast<kiln::TransposeOp>(op)) {
        ArrayRef<int64_t> perm = t.getPermutation();
        if (std::optional<Layout> in = layoutOf(t.getInput())) {
          Layout l{in->offset, SmallVector<int64_t>(perm.size()), in->lastSym, in->lastStride};
          for (size_t d = 0; d < perm.size(); ++d) l.strides[d] = in->strides[perm[d]];
          if (foldRead(op, l)) continue;
        }
        foldWrite(t);
      }
    }
    for (Operation &o : body_)
      if (auto c = dyn_cast<kiln::ConcatOp>(&o)) foldConcat(c);
  }

  // 4. The concat's operands written in place by their kernels, or nothing changed.
  void foldConcat(kiln::ConcatOp c) {
    std::optional<Layout> cl = denseLayout(c.getType());
    if (!cl) return;
    struct Placement {
      Operation *op;
      kiln::ViewKind kind;
      Layout layout;
    };
    SmallVector<Placement> placements;
    const int64_t axis = c.getAxis();
    int64_t at = 0;
    for (Value x : c.getInputs()) {
      auto xt = cast<RankedTensorType>(x.getType());  // static along the axis (the verifier's)
      Layout l = *cl;  // x's elements in the concat's buffer
      l.offset += at * cl->strides[axis];
      at += xt.getDimSize(axis);
      for (Value v = x;;) {
        Operation *def = v.getDefiningOp();
        if (!v.hasOneUse() || !def || def->getBlock() != &body_) return;
        kiln::ViewAttr view = kiln::viewOf(v);
        if (auto r = dyn_cast<kiln::ReshapeOp>(def); r && !view) {
          std::optional<Layout> in = reshapeLayout(l, r.getType(), r.getInput().getType());
          if (!in) return;
          placements.push_back({def, kiln::ViewKind::placed, l});
          l = *in, v = r.getInput();
          continue;
        }
        if (auto t = dyn_cast<kiln::TransposeOp>(def); t && view && view.getKind() == kiln::ViewKind::placed) {
          // foldWrite's: its operand's kernel writes it, now at this place.
          ArrayRef<int64_t> perm = t.getPermutation();
          Layout al{l.offset, SmallVector<int64_t>(perm.size())};
          for (size_t d = 0; d < perm.size(); ++d) al.strides[perm[d]] = l.strides[d];
          placements.push_back({def, kiln::ViewKind::placed, l});
          placements.push_back({t.getInput().getDefiningOp(), kiln::ViewKind::write, al});
          break;
        }
        if (view || !kiln::isKernelOp(def) || !kiln::runtimeKernel(def).empty() || kiln::writesInPlace(def) ||
            l.strides.back() != 1)
          return;
        placements.push_back({def, kiln::ViewKind::write, l});
        break;
      }
    }
    MLIRContext *ctx = c->getContext();
    for (Placement &p : placements) p.op->setAttr("kiln.view", viewAttr(ctx, p.kind, p.layout));
    c->setAttr("kiln.view", viewAttr(ctx, kiln::ViewKind::placed, *cl));
  }

  // 3. The transpose's operand written in place by its own kernel.
  void foldWrite(kiln::TransposeOp t) {
    Value a = t.getInput();
    ArrayRef<int64_t> perm = t.getPermutation();
    Operation *prod = a.getDefiningOp();
    if (!prod || prod->getBlock() != &body_ || !a.hasOneUse() || !kiln::isKernelOp(prod) || kiln::viewOf(a) ||
        !kiln::runtimeKernel(prod).empty() || kiln::writesInPlace(prod))
      return;
    std::optional<Layout> tl = denseLayout(t.getType());
    if (!tl || perm.back() != (int64_t)perm.size() - 1) return;  // the innermost dim stays innermost
    Layout al{0, SmallVector<int64_t>(perm.size())};
    for (size_t d = 0; d < perm.size(); ++d) al.strides[perm[d]] = tl->strides[d];  // T dim d is A dim perm[d]
    MLIRContext *ctx = t->getContext();
    prod->setAttr("kiln.view", viewAttr(ctx, kiln::ViewKind::write, al));
    t->setAttr("kiln.view", viewAttr(ctx, kiln::ViewKind::placed, *tl));
  }

 private:
  Block &body_;
  const kiln::SeqLengths &lengths_;
  llvm::DenseMap<Value, SmallVector<Operation *, 2>> written_;
  llvm::StringMap<Value> params_;
};

struct FoldViewsPass : kiln::impl::FoldViewsBase<FoldViewsPass> {
  using FoldViewsBase::FoldViewsBase;
  void runOnOperation() override {
    if (gpu) return;  // device buffers stay dense
    for (auto f : getOperation().getOps<func::FuncOp>()) {
      FailureOr<kiln::SeqLengths> lengths = kiln::SeqLengths::infer(f);
      if (failed(lengths)) return signalPassFailure();
      Folder(f.getBody().front(), *lengths).run();
    }
  }
};
}  // namespace
