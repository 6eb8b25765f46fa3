// KilnDialect.h - the kiln MLIR dialect (ops generated from KilnOps.td).
#pragma once
#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Dialect.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "mlir/Interfaces/InferTypeOpInterface.h"

#include "kiln/Dialect/KilnOpsDialect.h.inc"
#define GET_OP_CLASSES
#include "kiln/Dialect/KilnOps.h.inc"
