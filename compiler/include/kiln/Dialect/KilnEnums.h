// KilnEnums.h - the kiln dialect's enums (generated from KilnOps.td and KilnAttrs.td):
// ActivationKind, and the decisions' AttentionEngine, Packing, SparseOrder, SparseRule, SparseMask.
#pragma once
#include <cstdint>
#include <optional>

#include "llvm/ADT/StringRef.h"
#include "mlir/IR/DialectImplementation.h"

#include "kiln/Dialect/KilnEnums.h.inc"
