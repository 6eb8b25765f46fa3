// kiln-loop-sequences: which kernels of a batched entry run once per sequence.
//
// A batch of B sequences of L positions is B·L rows (a symbol of its own, whose factors the
// module's kiln.seq_factors names). Row-wise kernels (linears, norms, activations, losses, the
// FFN, the backward's reductions over rows) run once over all the rows. A kernel that relates
// positions of a sequence to each other cannot: it sees one sequence at a time.
//
// Algorithm, per func.func, per kiln op with a dim of a batch's rows (SeqLengths):
//   1. Attention (and its gradient and statistics, LSH attention's kernels), learned, sinusoidal and rotary positions,
//      position ids, depthwise (causal) convolution, masks and mean pooling get `kiln.per_sequence = B` (the
//      batch symbol): kiln-lower-to-llvm calls them once per sequence, each call seeing one
//      sequence's rows of every operand.
//      A batch's rows may be B itself (one row per sequence: a batched decode step). A KV
//      cache kept per sequence of the batch (kiln.state with `batch`) is written (cache_write)
//      and attended to per sequence too: kiln-lower-to-llvm gives each call its sequence's.
//   2. An op that mixes the sequences of a batch or keeps one sequence's state cannot run a
//      batch: a KV cache of one buffer written or read (cache_write, attention over a static
//      cache), a slice, pad or concat along the rows (the last row), a result with two dims of
//      rows (scores of all rows against all rows). The entry gets `kiln.single_sequence` (why, as a string, the
//      runtime's error when such an entry is given B > 1) and still runs correctly at B = 1.
//   3. Two different batches in one op are an error.
//   4. An entry with a kiln.cache_slots input reads and writes the per-sequence states of the
//      slots it names (kiln-lower-to-llvm); with a single slot it runs one sequence at a time.
#include "kiln/Dialect/SeqLengths.h"
#include "kiln/Transforms/Passes.h"
#include "kiln/Transforms/Utils.h"

namespace kiln {
#define GEN_PASS_DEF_LOOPSEQUENCES
#include "kiln/Transforms/Passes.h.inc"
}  // namespace kiln

using namespace mlir;

namespace {
struct LoopSequencesPass : kiln::impl::LoopSequencesBase<LoopSequencesPass> {
  void runOnOperation() override {
    ModuleOp m = getOperation();
    auto fa = m->getAttrOfType<DenseI64ArrayAttr>("kiln.seq_factors");
    ArrayRef<int64_t> factors = fa ? fa.asArrayRef() : ArrayRef<int64_t>{};
    bool badState = false;
    m.walk([&](kiln::StateOp st) {
      if (st.getBatch() && !kiln::isBatchSymbol(factors, (int64_t)*st.getBatch())) {
        st.emitError("batch = ") << *st.getBatch() << " names no batch of the module's kiln.seq_factors";
        badState = true;
      }
    });
    if (badState) return signalPassFailure();
    if (!fa) return;
    auto bounds = m->getAttrOfType<DenseI64ArrayAttr>("kiln.seq_bounds");
    // A batch of at most one sequence is its sequence: nothing to loop over or refuse.
    // A dim of rows(B, L), or B itself (one row per sequence: a batched decode step).
    auto batchOf = [&](int64_t sym) {
      int64_t b = sym >= 0 && 2 * sym < (int64_t)factors.size() ? factors[2 * sym] : -1;
      if (b < 0 && kiln::isBatchSymbol(factors, sym)) b = sym;
      return b >= 0 && bounds && b < (int64_t)bounds.size() && bounds[b] > 1 ? b : -1;
    };
    for (auto f : m.getOps<func::FuncOp>()) {
      FailureOr<kiln::SeqLengths> lengths = kiln::SeqLengths::infer(f);
      if (failed(lengths)) return signalPassFailure();
      std::string single;
      bool bad = false;
      // An entry's cache slots (kiln.cache_slots): one id per sequence, or a single one.
      bool oneSlot = false;
      for (unsigned a = 0; a < f.getNumArguments(); ++a)
        if (f.getArgAttr(a, "kiln.cache_slots")) {
          auto t = cast<RankedTensorType>(f.getArgument(a).getType());
          if (t.getRank() != 1 || !t.getElementType().isInteger(32)) {
            f.emitError("expected the kiln.cache_slots input to be a 1-D i32 tensor, got ") << t;
            return signalPassFailure();
          }
          oneSlot = t.getDimSize(0) == 1;
        }
      f.walk([&](Operation *op) {
        // Every kiln op is looked at: a slice of the rows folded into a view is no kernel but
        // still takes one sequence's row.
        if (bad || op->getNumResults() == 0 || !isa<kiln::KilnOpInterface>(op)) return;
        int64_t batch = -1;
        int rowDimsOfResult = 0;
        bool staticKeys = false;
        SmallVector<Value> values(op->getOperands());
        values.push_back(op->getResult(0));
        for (Value v : values)
          for (int64_t s : lengths->of(v))
            if (int64_t b = batchOf(s); b >= 0) {
              if (batch >= 0 && b != batch) {
                op->emitError("expected one batch per op, got two");
                bad = true;
                return;
              }
              batch = b;
            }
        if (batch < 0) return;
        for (int64_t s : lengths->of(op->getResult(0))) rowDimsOfResult += batchOf(s) >= 0;
        auto rowsAxis = [&](Value v, int64_t axis) {
          const kiln::Syms &s = lengths->of(v);
          return axis >= 0 && axis < (int64_t)s.size() && batchOf(s[axis]) >= 0;
        };
        auto why = [&](const char *reason) {
          if (single.empty()) single = reason;
        };
        // A KV cache per sequence of this batch: written and read sequence by sequence.
        auto ownCache = [&](Value v) {
          kiln::StateOp st = kiln::perSequenceState(v);
          return st && (int64_t)*st.getBatch() == batch;
        };
        bool perSequenceCache = false;
        if (auto a = dyn_cast<kiln::AttentionOp>(op)) {
          staticKeys = !rowsAxis(a.getKey(), 1);
          perSequenceCache = staticKeys && ownCache(a.getKey()) && ownCache(a.getValue());
        }
        if (auto w = dyn_cast<kiln::CacheWriteOp>(op)) perSequenceCache = ownCache(w.getCache());
        if (perSequenceCache && oneSlot) {
          why("it takes a single cache slot");
        } else if (isa<kiln::CacheWriteOp>(op) && !perSequenceCache) {
          why("it writes a KV cache");
        } else if (staticKeys && !perSequenceCache) {
          why("it attends to a KV cache");
        } else if (auto s = dyn_cast<kiln::SliceOp>(op); s && rowsAxis(s.getInput(), (int64_t)s.getAxis())) {
          why("it slices the rows of a sequence");
        } else if (auto p = dyn_cast<kiln::PadOp>(op); p && rowsAxis(p.getLike(), (int64_t)p.getAxis())) {
          why("it pads the rows of a sequence");
        } else if (auto c = dyn_cast<kiln::ConcatOp>(op); c && rowsAxis(c.getResult(), (int64_t)c.getAxis())) {
          why("it concatenates along the rows of a sequence");
        } else if (rowDimsOfResult > 1) {
          why("it relates every row to every other row outside a fused attention");
        }
        if (kiln::isKernelOp(op) && (perSequenceCache || isa<kiln::AttentionOp, kiln::AttentionGradOp, kiln::PositionEmbeddingOp, kiln::SinusoidalPositionsOp, kiln::RopeOp,
                kiln::PositionIdsOp, kiln::LshHashOp, kiln::LshSortOp, kiln::LshChunkAttentionOp, kiln::LshChunkAttentionGradOp, kiln::DepthwiseConvOp,
                kiln::MaskOp, kiln::MeanPoolOp>(op)))
          op->setAttr("kiln.per_sequence", IntegerAttr::get(IntegerType::get(op->getContext(), 64), batch));
      });
      if (bad) return signalPassFailure();
      if (!single.empty()) f->setAttr("kiln.single_sequence", StringAttr::get(f.getContext(), single));
    }
  }
};
}  // namespace
