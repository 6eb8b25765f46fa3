// MemoryLimit.h - refusing a model whose buffer plan cannot fit: each entry's peak at the
// sequence-length bounds (parameters, inputs and outputs, the arena) against a byte limit.
#pragma once
#include <cstdint>

#include "mlir/IR/BuiltinOps.h"

namespace kiln {

// Fails (with an error naming the largest buffers) when an entry's peak memory at the bounds
// exceeds `limit` bytes; limit <= 0: no limit.
mlir::LogicalResult checkMemoryLimit(mlir::ModuleOp module, int64_t limit);

}  // namespace kiln
