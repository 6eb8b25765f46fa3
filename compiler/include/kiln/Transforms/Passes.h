// Passes.h - kiln's passes (declared in Passes.td) and their registration.
#pragma once
#include <memory>

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"
#include "kiln/Dialect/KilnEnums.h"

namespace kiln {
#define GEN_PASS_DECL
#include "kiln/Transforms/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "kiln/Transforms/Passes.h.inc"
}  // namespace kiln
