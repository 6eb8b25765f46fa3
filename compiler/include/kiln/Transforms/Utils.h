// Utils.h - helpers shared by kiln's passes.
#pragma once
#include "kiln/Dialect/KilnDialect.h"

namespace kiln {
// Ops that become kernels: those whose hooks name a kernel (not parameters, states, views,
// slices and transposes folded into views, or the structure of loops).
inline bool isKernelOp(mlir::Operation *op) {
  auto k = mlir::dyn_cast<KilnOpInterface>(op);
  return k && k.getKernelOp() != KernelOp::None && !isFoldedView(op);
}
// The f32 lanes a kernel uses: the target's, halved down to a static innermost extent (a row of
// 4 is not vectorized 16 wide).
inline int64_t lanesFor(int64_t targetLanes, int64_t extent) {
  int64_t w = targetLanes;
  if (extent >= 0)
    while (w > 1 && w > extent) w /= 2;
  return w;
}
}  // namespace kiln
