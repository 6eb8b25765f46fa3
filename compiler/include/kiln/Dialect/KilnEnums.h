// KilnEnums.h - the kiln dialect's enums (generated from KilnOps.td and KilnAttrs.td):
// ActivationKind, and the decisions' AttentionEngine, Packing, SparseOrder, SparseRule, SparseMask.
#pragma once
#include <cstdint>
#include <optional>

#include "llvm/ADT/StringRef.h"
#include "mlir/IR/DialectImplementation.h"

#include "kiln/Dialect/KilnEnums.h.inc"

namespace kiln {
// Weights per block, and bytes per block, of a quantized WeightFormat (0 for f32).
constexpr int kQuantBlock = 32;
inline int quantBlockBytes(WeightFormat f) {
  switch (f) {
    case WeightFormat::q8_0: return 34;
    case WeightFormat::q4_0: return 18;
    case WeightFormat::q4_1: return 20;
    case WeightFormat::f32: break;
  }
  return 0;
}
}  // namespace kiln
