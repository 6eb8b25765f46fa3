// KilnDialect.cpp - the kiln dialect's registration, its generated enums, attributes and
// interfaces, and the interfaces' default hooks.
#include "kiln/Dialect/KilnDialect.h"

#include <cstdio>

#include "llvm/ADT/TypeSwitch.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/DialectImplementation.h"

using namespace mlir;
using namespace kiln;

#include "kiln/Dialect/KilnEnums.cpp.inc"
#include "kiln/Dialect/KilnInterfaces.cpp.inc"
#include "kiln/Dialect/KilnOpsDialect.cpp.inc"
#define GET_ATTRDEF_CLASSES
#include "kiln/Dialect/KilnAttrs.cpp.inc"

void KilnDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "kiln/Dialect/KilnOps.cpp.inc"
      >();
  addAttributes<
#define GET_ATTRDEF_LIST
#include "kiln/Dialect/KilnAttrs.cpp.inc"
      >();
}

// The decisions passes attach to ops and entries must have their typed attributes: a schedule
// written as a dictionary (or anything else) would be silently replaced.
LogicalResult KilnDialect::verifyOperationAttribute(Operation *op, NamedAttribute attr) {
  StringRef name = attr.getName().getValue();
  Attribute a = attr.getValue();
  if (name == "kiln.schedule" && !isa<ScheduleAttr>(a))
    return op->emitError("expected kiln.schedule to be a #kiln.schedule<...>, got ") << a;
  if (name == "kiln.sparse" && !isa<SparseScheduleAttr>(a))
    return op->emitError("expected kiln.sparse to be a #kiln.sparse_schedule<...>, got ") << a;
  if ((name == "kiln.checkpoint" || name == "kiln.recomputed" || name == "kiln.reconstructed") && !isa<IntegerAttr>(a))
    return op->emitError("expected ") << name << " to be an integer (the checkpointed block or reversible layer), got " << a;
  if (name == "kiln.reversible") {
    auto arr = dyn_cast<DenseI64ArrayAttr>(a);
    if (!arr || arr.size() != 2 || arr[0] < 0 || arr[1] < 0 || arr[1] > 2)
      return op->emitError("expected kiln.reversible to be array<i64: layer, part> (part 0 glue, 1 F, 2 G), got ") << a;
  }
  if (name == "kiln.role" && !isa<EntryRoleKindAttr>(a))
    return op->emitError("expected kiln.role to be a #kiln.entry_role<...>, got ") << a;
  if (name == "kiln.precision" && !isa<ModelPrecisionAttr>(a))
    return op->emitError("expected kiln.precision to be a #kiln.precision<f32> or #kiln.precision<bf16>, got ") << a;
  if (name == "kiln.grad_seed" && !isa<UnitAttr>(a)) return op->emitError("expected kiln.grad_seed to be a unit attribute");
  if (name == "kiln.arena") {
    auto arr = dyn_cast<ArrayAttr>(a);
    if (!arr || !llvm::all_of(arr, [](Attribute e) { return isa<ArenaSlotAttr>(e); }))
      return op->emitError("expected kiln.arena to be an array of #kiln.arena_slot<...>, got ") << a;
  }
  return success();
}

namespace kiln {

void KernelAttrs::setFloat(llvm::StringRef key, float value) {
  char buf[32];
  snprintf(buf, sizeof buf, "%.9g", value);
  map_[key.str()] = buf;
}

Syms defaultSeqLengths(Operation *op, ArrayRef<Syms> operands) {
  if (op->getNumResults() == 0) return {};
  int64_t rank = cast<RankedTensorType>(op->getResult(0).getType()).getRank();
  Syms r = operands.empty() ? Syms() : operands[0];  // elementwise, norms, concat, slice, FFN, ACT: operand 0's
  r.resize(rank, -1);
  return r;
}

double elementBytes(Value v) {
  auto t = dyn_cast<ShapedType>(v.getType());
  return t ? t.getElementTypeBitWidth() / 8.0 : 4.0;
}

OpCost defaultCost(Operation *op, llvm::function_ref<double(Value)> numel) {
  OpCost c;
  for (Value v : op->getOperands()) c.read += elementBytes(v) * numel(v);
  for (Value v : op->getResults()) c.written += elementBytes(v) * numel(v);
  return c;
}

}  // namespace kiln
