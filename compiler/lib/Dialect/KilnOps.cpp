// KilnOps.cpp - the generated definitions of the kiln ops (KilnOps.td and the files it
// includes). Each op's verifier, hooks and gradient rule are in the file of its family:
// GemmOps, ElementwiseOps, NormOps, AttentionOps, SequenceOps, ConvOps, LoopOps, TrainingOps.
#include "kiln/Dialect/KilnDialect.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/OpImplementation.h"

using namespace mlir;
using namespace kiln;

#define GET_OP_CLASSES
#include "kiln/Dialect/KilnOps.cpp.inc"
