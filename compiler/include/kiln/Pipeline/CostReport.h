// CostReport.h - what the compiler reports about a model after the kernels phase: FLOPs and
// bytes per op and the buffer plan's peak (--emit=cost, cost.txt), and every kernel's schedule
// (--emit=schedule, <kernel>.schedule.txt).
#pragma once
#include <string>

#include "kiln/Dialect/KernelSpec.h"
#include "mlir/IR/BuiltinOps.h"

namespace kiln {

// FLOPs, bytes and the buffer plan's peak at the bounds and at 1/2 and 1/4 of them, from each
// op's cost hook.
std::string costReport(mlir::ModuleOp module);
// The schedule of every kernel: its spec and the decisions of its kiln.schedule (and sparse
// block schedule), then the Halide calls applied when given.
std::string kernelScheduleText(const std::string &name, const KernelSpec &spec, const std::string &halideSchedule);
std::string scheduleReport(mlir::ModuleOp module);
// An op's location as file:line ("+" when fused from several lines).
std::string opLocation(mlir::Operation *op);
// A quantity with an SI prefix ("3.2 MB").
std::string humanUnits(double v, const char *unit);
// The arena's size for one entry at the given lengths, placed by the runtime's own planner.
int64_t arenaBytes(mlir::Operation *entry, llvm::ArrayRef<int64_t> lengths);
double paramBytesOf(mlir::ModuleOp module);

}  // namespace kiln
