// kiln-assign-schedule: vectorization and parallelism of every kernel.
//
// Algorithm, per kernel op (a decision already in its kiln.schedule is kept):
//   1. vec = the target's f32 lanes, halved down to a static innermost extent (a 4-wide row is
//      not vectorized 16-wide).
//   2. parallel = 1 when the kernel's work at the sequence-length bounds (its FLOPs plus bytes
//      read and written, from its cost hook; a length without a bound counts as 2^16) is at
//      least 2^16: then its outer loop (row tiles,
//      heads x query blocks, row groups) is split among the runtime's threads. Smaller kernels
//      (a decode step's norms and adds over one row) run on the calling thread, where waking
//      the others would cost more than the work.
#include "kiln/Dialect/SeqLengths.h"
#include "kiln/Transforms/Passes.h"
#include "kiln/Transforms/Utils.h"

namespace kiln {
#define GEN_PASS_DEF_ASSIGNSCHEDULE
#include "kiln/Transforms/Passes.h.inc"
}  // namespace kiln

using namespace mlir;

namespace {
constexpr double kParallelWork = 1 << 16;

struct AssignSchedulePass : kiln::impl::AssignScheduleBase<AssignSchedulePass> {
  using AssignScheduleBase::AssignScheduleBase;
  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto boundsAttr = module->getAttrOfType<DenseI64ArrayAttr>("kiln.seq_bounds");
    SmallVector<int64_t> bounds(boundsAttr ? boundsAttr.asArrayRef() : ArrayRef<int64_t>{});
    for (auto f : module.getOps<func::FuncOp>()) {
      // The lengths at their bounds; where the entry does not say (a lit test's function without
      // kiln.syms), a dynamic dim counts as 2^16: enough work for parallel tasks.
      bool known = llvm::all_of(f.getArguments(), [&](BlockArgument a) {
        return f.getArgAttrOfType<DenseI64ArrayAttr>(a.getArgNumber(), "kiln.syms") != nullptr;
      });
      FailureOr<kiln::SeqLengths> lengths = known ? kiln::SeqLengths::infer(f) : FailureOr<kiln::SeqLengths>(failure());
      if (known && failed(lengths)) return signalPassFailure();
      auto numel = [&](Value v) {
        if (known) return lengths->numel(v, bounds);
        double n = 1;
        for (int64_t d : cast<RankedTensorType>(v.getType()).getShape()) n *= ShapedType::isDynamic(d) ? 65536.0 : (double)d;
        return n;
      };
      f.walk([&](Operation *op) {
        if (!kiln::isKernelOp(op)) return;
        auto rt = cast<RankedTensorType>(op->getResult(0).getType());
        int64_t inner = rt.getDimSize(rt.getRank() - 1);
        kiln::OpCost c = cast<kiln::KilnOpInterface>(op).getCost(numel);
        kiln::ScheduleFields s;
        s.vec = kiln::lanesFor(vectorWidth, ShapedType::isDynamic(inner) ? -1 : inner);
        s.parallel = c.flops + c.read + c.written >= kParallelWork;
        kiln::mergeSchedule(op, s);
      });
    }
  }
};
}  // namespace
