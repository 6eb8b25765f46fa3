// kiln-plan-buffers: give every tensor a buffer and record the arena's slots.
//
// Algorithm:
//   1. Sequence lengths: function arguments carry `kiln.syms` (the length index of each dim,
//      -1 for static dims); kiln/Dialect/SeqLengths.h propagates them through every op's
//      inferSeqLengths hook; each result gets its `kiln.syms`. Every tensor must have fewer
//      than 2^31 elements at the bounds (Halide's 32-bit extents).
//   2. Parameters are numbered module-wide by first appearance (`kiln.params`); inputs and
//      outputs likewise by name (`kiln.io`), states too (`kiln.states`). Buffer ids: parameters,
//      then io, then states, then arena slots.
//   3. A reshape is a view and a cache write works in place: their results take their input's
//      buffer, as a read view of kiln-fold-views does; a write view takes its user's (whose
//      arena slot is live from the writing kernel). A returned value is computed straight into
//      its output buffer. A placed value whose user is placed too (a part of a concat its
//      operands' kernels write, kiln-fold-views) takes that user's buffer. Every other kernel
//      result gets a new arena slot; a kernel's further results (an attention's lse) are
//      listed in `kiln.more_buffers`.
//   4. Each arena slot records its static bytes, the power of each length and its first and
//      last kernel as a #kiln.arena_slot in the function's `kiln.arena`; the runtime sizes and
//      places them at start-up.
//   5. Loops (kiln.loop): the carried value, its initial value and the loop's result share one
//      buffer (the host copies each step's yielded value into it); the step number gets a
//      4-byte slot (`kiln.step_buffer`). A value defined outside a loop and used inside it, and
//      every value the body yields, stays live until the loop's last kernel: the body runs again.
#include <cstdio>

#include "kiln/Dialect/SeqLengths.h"
#include "kiln/Transforms/Passes.h"
#include "kiln/Transforms/Utils.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"

namespace kiln {
#define GEN_PASS_DEF_PLANBUFFERS
#include "kiln/Transforms/Passes.h.inc"
}  // namespace kiln

using namespace mlir;
using kiln::Syms;

// Halide's buffers have 32-bit extents and strides and its kernels index with 32-bit
// arithmetic: a tensor must have fewer than 2^31 elements at the sequence-length bounds.
static LogicalResult checkElements(Operation *at, Value v, const Syms &s, ArrayRef<int64_t> bounds) {
  auto rt = cast<RankedTensorType>(v.getType());
  double n = 1;
  for (int64_t d = 0; d < rt.getRank(); ++d)
    n *= (double)(s[d] >= 0 && s[d] < (int64_t)bounds.size() ? bounds[s[d]] : rt.getDimSize(d));
  if (n <= (double)INT32_MAX) return success();
  char count[32];
  snprintf(count, sizeof count, "%.4g", n);
  return at->emitError() << "expected fewer than 2^31 elements per tensor (Halide's 32-bit extents and strides), but "
                         << rt << " has " << count << " at the sequence-length bounds; lower the bound";
}

namespace {
struct PlanBuffersPass : kiln::impl::PlanBuffersBase<PlanBuffersPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    MLIRContext *ctx = &getContext();
    Builder b(ctx);
    // 2. Module-wide numbering of parameters and io.
    SmallVector<Attribute> paramNames, ioNames, stateNames;
    llvm::StringMap<int64_t> paramIdx, ioIdx, stateIdx;
    module.walk([&](kiln::ParamOp p) {
      if (paramIdx.try_emplace(p.getName(), paramIdx.size()).second) paramNames.push_back(p.getNameAttr());
    });
    module.walk([&](kiln::StateOp p) {
      if (stateIdx.try_emplace(p.getName(), stateIdx.size()).second) stateNames.push_back(p.getNameAttr());
    });
    auto ioName = [&](StringAttr n) {
      if (ioIdx.try_emplace(n.getValue(), ioIdx.size()).second) ioNames.push_back(n);
      return ioIdx[n.getValue()];
    };
    for (auto f : module.getOps<func::FuncOp>()) {
      for (unsigned i = 0; i < f.getNumArguments(); ++i)
        if (auto n = f.getArgAttrOfType<StringAttr>(i, "kiln.name")) ioName(n);
      for (unsigned i = 0; i < f.getNumResults(); ++i)
        if (auto n = f.getResultAttrOfType<StringAttr>(i, "kiln.name")) ioName(n);
    }
    int64_t nParams = paramIdx.size(), nIo = ioIdx.size(), nStates = stateIdx.size();
    module->setAttr("kiln.params", b.getArrayAttr(paramNames));
    module->setAttr("kiln.io", b.getArrayAttr(ioNames));
    module->setAttr("kiln.states", b.getArrayAttr(stateNames));

    auto boundsAttr = module->getAttrOfType<DenseI64ArrayAttr>("kiln.seq_bounds");
    SmallVector<int64_t> bounds(boundsAttr ? boundsAttr.asArrayRef() : ArrayRef<int64_t>{});
    for (auto f : module.getOps<func::FuncOp>()) {
      llvm::DenseMap<Value, int64_t> slot;  // buffer id of each value
      for (unsigned i = 0; i < f.getNumArguments(); ++i) {
        auto n = f.getArgAttrOfType<StringAttr>(i, "kiln.name");
        if (!n) {
          f.emitError("expected every argument to carry kiln.name");
          return signalPassFailure();
        }
        slot[f.getArgument(i)] = nParams + ioIdx[n.getValue()];
        f.setArgAttr(i, "kiln.buffer", b.getI64IntegerAttr(slot[f.getArgument(i)]));
      }
      // 1. Lengths of every result.
      FailureOr<kiln::SeqLengths> lengths = kiln::SeqLengths::infer(f);
      if (failed(lengths)) return signalPassFailure();
      bool bad = false;
      f.walk([&](Operation *op) {
        if (isa<kiln::RecurrentOp>(op)) {
          op->emitError("expected no kiln.recurrent: run kiln-lower-act first");
          bad = true;
        }
        if (op->getNumResults() == 0 || !isa<kiln::KilnOpInterface>(op)) return;
        const Syms &s = lengths->of(op->getResult(0));
        op->setAttr("kiln.syms", b.getDenseI64ArrayAttr(s));
        if (failed(checkElements(op, op->getResult(0), s, bounds))) bad = true;
      });
      for (BlockArgument a : f.getArguments())
        if (failed(checkElements(f, a, lengths->of(a), bounds))) bad = true;
      if (bad) return signalPassFailure();
      // 3. Outputs first, so the kernel producing an output writes it in place.
      auto ret = cast<func::ReturnOp>(f.getBody().front().getTerminator());
      auto isPlaced = [](Operation *op) {
        auto view = op->getAttrOfType<kiln::ViewAttr>("kiln.view");
        return view && view.getKind() == kiln::ViewKind::placed;
      };
      auto root = [&](Value v) {  // views, in-place writes and loops share their input's buffer
        while (true) {
          kiln::ViewAttr view = kiln::viewOf(v);
          if (view && view.getKind() == kiln::ViewKind::read) v = v.getDefiningOp()->getOperand(0);
          else if (view && view.getKind() == kiln::ViewKind::write) v = (*v.getUsers().begin())->getResult(0);
          else if (view && view.getKind() == kiln::ViewKind::placed && v.hasOneUse() && isPlaced(*v.getUsers().begin()))
            v = (*v.getUsers().begin())->getResult(0);  // a part of a concat its operands' kernels write
          else if (auto r = v.getDefiningOp<kiln::ReshapeOp>()) v = r.getInput();
          else if (v.getDefiningOp() && kiln::writesInPlace(v.getDefiningOp())) v = v.getDefiningOp()->getOperand(0);
          else if (auto l = v.getDefiningOp<kiln::LoopOp>()) v = l.getInit();
          else if (auto ba = dyn_cast<BlockArgument>(v); ba && ba.getArgNumber() == 0 && isa<kiln::LoopOp>(ba.getOwner()->getParentOp()))
            v = cast<kiln::LoopOp>(ba.getOwner()->getParentOp()).getInit();
          else return v;
        }
      };
      for (unsigned i = 0; i < ret.getNumOperands(); ++i) {
        auto n = f.getResultAttrOfType<StringAttr>(i, "kiln.name");
        Value r = root(ret.getOperand(i));
        if (!n) {
          f.emitError("expected every result to carry kiln.name");
          return signalPassFailure();
        }
        if (slot.count(r) || !r.getDefiningOp() || isa<kiln::ParamOp, kiln::StateOp>(r.getDefiningOp())) {
          f.emitError("output '") << n.getValue() << "' is an input, a parameter, a state or another output; kiln "
                                     "needs each output computed by its own kernel";
          return signalPassFailure();
        }
        slot[r] = nParams + ioIdx[n.getValue()];
      }
      // 4. Arena slots and live ranges, in kernel order.
      SmallVector<Operation *> kernels;
      f.walk([&](Operation *op) {
        if (kiln::isKernelOp(op)) kernels.push_back(op);
      });
      llvm::DenseMap<Operation *, int64_t> kidx;
      for (size_t i = 0; i < kernels.size(); ++i) kidx[kernels[i]] = i;
      struct Slot {
        Value v;
        int64_t first, last;
      };
      SmallVector<Slot> arena;
      llvm::DenseMap<Value, int64_t> arenaOf;
      for (Operation *op : kernels) {
        if (kiln::writesInPlace(op)) continue;
        for (Value res : op->getResults()) {  // further results (an attention's lse): slots of their own
          Value v = root(res);  // a write view: its user's buffer, live from this kernel
          if (slot.count(v)) continue;
          arenaOf[v] = arena.size();
          slot[v] = nParams + nIo + nStates + arena.size();
          arena.push_back({v, kidx[op], kidx[op]});
        }
      }
      // 5. Each loop's kernel range and its step slot.
      llvm::DenseMap<Operation *, std::pair<int64_t, int64_t>> loopRange;
      f.walk([&](kiln::LoopOp loop) {
        int64_t lo = INT64_MAX, hi = -1;
        loop.walk([&](Operation *op) {
          if (kidx.count(op)) lo = std::min(lo, kidx[op]), hi = std::max(hi, kidx[op]);
        });
        if (hi < 0) lo = hi = 0;
        loopRange[loop] = {lo, hi};
        Value step = loop.getBody().front().getArgument(1);
        arenaOf[step] = arena.size();
        slot[step] = nParams + nIo + nStates + arena.size();
        arena.push_back({step, lo, hi});
        loop->setAttr("kiln.step_buffer", b.getI64IntegerAttr(slot[step]));
      });
      auto use = [&](Value v, Operation *user, int64_t at) {
        Value r = root(v);
        auto it = arenaOf.find(r);
        if (it == arenaOf.end()) return;
        int64_t last = at;
        Operation *def = r.getDefiningOp() ? r.getDefiningOp() : r.getParentBlock()->getParentOp();
        for (Operation *p = user->getParentOp(); p && !isa<func::FuncOp>(p); p = p->getParentOp())
          if (isa<kiln::LoopOp>(p) && !p->isProperAncestor(def)) last = std::max(last, loopRange[p].second);
        arena[it->second].last = std::max(arena[it->second].last, last);
      };
      f.walk([&](Operation *op) {
        if (auto p = dyn_cast<kiln::ParamOp>(op)) slot[p.getResult()] = paramIdx[p.getName()];
        if (auto st = dyn_cast<kiln::StateOp>(op)) slot[st.getResult()] = nParams + nIo + stateIdx[st.getName()];
        if (isa<kiln::ReshapeOp, kiln::LoopOp>(op) || kiln::writesInPlace(op) || op->hasAttr("kiln.view"))
          slot[op->getResult(0)] = slot.lookup(root(op->getResult(0)));
        if (op->getNumResults() >= 1 && isa_and_nonnull<kiln::KilnDialect>(op->getDialect())) {
          op->setAttr("kiln.buffer", b.getI64IntegerAttr(slot.lookup(op->getResult(0))));
          SmallVector<int64_t> more;  // the further results' buffers, in order
          for (unsigned i = 1; i < op->getNumResults(); ++i) more.push_back(slot.lookup(op->getResult(i)));
          if (!more.empty()) op->setAttr("kiln.more_buffers", b.getDenseI64ArrayAttr(more));
        }
        if (auto y = dyn_cast<kiln::YieldOp>(op)) {  // read by the host after the body's last kernel
          auto loop = cast<kiln::LoopOp>(y->getParentOp());
          for (Value v : y.getValues()) use(v, y, loopRange[loop].second);
          return;
        }
        if (!kiln::isKernelOp(op)) return;
        for (Value v : op->getOperands()) use(v, op, kidx[op]);
      });
      SmallVector<Attribute> table;
      for (Slot &s : arena) {
        auto rt = cast<RankedTensorType>(s.v.getType());
        int64_t bytes = 4;
        int64_t pow[8] = {0, 0, 0, 0, 0, 0, 0, 0};  // KILN_MAX_SYMS
        const Syms &sy = lengths->of(s.v);
        for (int64_t d = 0; d < rt.getRank(); ++d) sy[d] >= 0 ? (void)++pow[sy[d]] : (void)(bytes *= rt.getDimSize(d));
        table.push_back(kiln::ArenaSlotAttr::get(ctx, bytes, b.getDenseI64ArrayAttr(pow), s.first, s.last));
      }
      f->setAttr("kiln.arena", b.getArrayAttr(table));
    }
  }
};
}  // namespace
