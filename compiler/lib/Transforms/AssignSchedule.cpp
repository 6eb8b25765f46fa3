// kiln-assign-schedule: vectorization and parallelism for every kernel.
//
// Algorithm:
//   1. vec = the target's f32 lanes, reduced to the largest power of two not above the
//      innermost extent for narrow tensors (a 4-wide row is not vectorized 16-wide).
//   2. parallel = 1: the outer loop (row tiles, heads x query blocks, row groups) is split
//      among the runtime's threads; the kernels split into enough tasks that small inputs
//      (decode-sized L) still run in one task without thread overhead dominating.
#include "kiln/Transforms/Passes.h"
#include "kiln/Transforms/Utils.h"

namespace kiln {
#define GEN_PASS_DEF_ASSIGNSCHEDULE
#include "kiln/Transforms/Passes.h.inc"
}  // namespace kiln

using namespace mlir;

namespace {
struct AssignSchedulePass : kiln::impl::AssignScheduleBase<AssignSchedulePass> {
  using AssignScheduleBase::AssignScheduleBase;
  void runOnOperation() override {
    getOperation().walk([&](Operation *op) {
      if (!kiln::isKernelOp(op)) return;
      auto rt = cast<RankedTensorType>(op->getResult(0).getType());
      int64_t inner = rt.getDimSize(rt.getRank() - 1);
      int64_t vec = vectorWidth;
      if (!ShapedType::isDynamic(inner))
        while (vec > 1 && vec > inner) vec /= 2;
      kiln::mergeSchedule(op, {{"vec", vec}, {"parallel", 1}});
    });
  }
};
}  // namespace
