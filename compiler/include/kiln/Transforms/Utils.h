// Utils.h - helpers shared by kiln's passes.
#pragma once
#include "kiln/Dialect/KilnDialect.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"

namespace kiln {
// Ops that become kernels: those whose hooks name a kernel family, generated or the runtime's
// (not parameters, states, views, slices and transposes folded into views, or the structure of
// loops).
inline bool isKernelOp(mlir::Operation *op) {
  auto k = mlir::dyn_cast<KilnOpInterface>(op);
  return k && k.getKernelFamily() != KernelFamily::None && !isFoldedView(op);
}
// The f32 lanes a kernel uses: the target's, halved down to a static innermost extent (a row of
// 4 is not vectorized 16 wide).
inline int64_t lanesFor(int64_t targetLanes, int64_t extent) {
  int64_t w = targetLanes;
  if (extent >= 0)
    while (w > 1 && w > extent) w /= 2;
  return w;
}
// A CPU GEMM's register block rows: 6 with 32 vector registers (AVX-512: 6 x 4 accumulator
// vectors, each weight vector loaded once per 6 FMAs, so a block's panel streams from L2 at
// 2/3 of the rate of 4 rows), else 4.
inline int64_t gemmTileM(int64_t targetLanes) { return targetLanes >= 16 ? 6 : 4; }
// A CPU GEMM's register block columns over N output columns (-1: dynamic) on a target with
// `targetLanes` f32 lanes: 4 vectors of the target's width, capped by N rounded up to the
// target's vectors, then rounded down to whole vectors of the op's lanes within N. Also the
// width of the panels a weight of N columns is kept in (kiln-prepack-weights), so that a
// register block reads exactly one panel.
inline int64_t gemmTileN(int64_t targetLanes, int64_t N) {
  int64_t lanes = lanesFor(targetLanes, N), tn = 4 * targetLanes;
  if (N >= 0) tn = std::min(tn, (N + targetLanes - 1) / targetLanes * targetLanes);
  if (N >= 0) tn = std::max(lanes, std::min(tn, N / lanes * lanes));
  return std::max(lanes, tn / lanes * lanes);
}
// Replaces an entry's results (its return and type) with `values`, each carrying its kiln.name.
inline void setResults(mlir::func::FuncOp f, llvm::ArrayRef<mlir::Value> values, llvm::ArrayRef<std::string> names) {
  auto ret = mlir::cast<mlir::func::ReturnOp>(f.getBody().front().getTerminator());
  mlir::OpBuilder b(ret);
  llvm::SmallVector<mlir::DictionaryAttr> attrs;
  llvm::SmallVector<mlir::Type> types;
  for (size_t i = 0; i < values.size(); ++i) {
    attrs.push_back(b.getDictionaryAttr(b.getNamedAttr("kiln.name", b.getStringAttr(names[i]))));
    types.push_back(values[i].getType());
  }
  mlir::func::ReturnOp::create(b, ret.getLoc(), values);
  ret.erase();
  f.setFunctionType(mlir::FunctionType::get(f.getContext(), f.getArgumentTypes(), types));
  f.setAllResultAttrs(attrs);
}
}  // namespace kiln
