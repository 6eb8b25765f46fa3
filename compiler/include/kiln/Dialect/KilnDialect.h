// KilnDialect.h - the kiln MLIR dialect: its ops (KilnOps.td), typed attributes (KilnAttrs.td)
// and per-op hooks (KilnInterfaces.td).
#pragma once
#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Dialect.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/Interfaces/InferTypeOpInterface.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include "kiln/Dialect/KilnEnums.h"
#include "kiln/Dialect/KilnInterfaces.h"
#include "kiln/Support/SparsePattern.h"

#include "kiln/Dialect/KilnOpsDialect.h.inc"
#define GET_ATTRDEF_CLASSES
#include "kiln/Dialect/KilnAttrs.h.inc"
#define GET_OP_CLASSES
#include "kiln/Dialect/KilnOps.h.inc"

namespace kiln {

// ---- #kiln.schedule as plain fields (KilnAttrs.cpp). Unset: no pass has decided it.
#define KILN_SCHEDULE_INTS(X)                                                                          \
  X(vec, Vec) X(parallel, Parallel) X(tile_m, TileM) X(tile_n, TileN) X(tile_rows, TileRows)           \
  X(column_tasks, ColumnTasks) X(hidden_vec, HiddenVec) X(hidden_tile_n, HiddenTileN)                    \
  X(rows_per_task, RowsPerTask) X(q_block, QBlock) X(k_block, KBlock) X(block, Block) X(chunk, Chunk) X(lsh_tile, LshTile) \
  X(gpu_tile_n, GpuTileN) X(gpu_tile_m, GpuTileM) X(gpu_k_chunk, GpuKChunk)                           \
  X(gpu_hidden_tile_n, GpuHiddenTileN) X(gpu_hidden_k_chunk, GpuHiddenKChunk) X(gpu_threads, GpuThreads) X(k_chunk, KChunk) X(k_unroll, KUnroll) X(col_group, ColGroup)
struct ScheduleFields {
#define KILN_FIELD(name, Getter) std::optional<int64_t> name;
  KILN_SCHEDULE_INTS(KILN_FIELD)
#undef KILN_FIELD
  Packing pack = Packing::unset;
  AttentionEngine engine = AttentionEngine::unset;
  GemmEngine gemm = GemmEngine::unset;
  OperandPrecision precision = OperandPrecision::unset;
  // "s.<field>=<value>" for every decided field, sorted: the schedule's part of a kernel key.
  std::map<std::string, std::string> keyEntries() const;
};
ScheduleFields fieldsOf(ScheduleAttr a);  // a null attribute: nothing decided
ScheduleAttr scheduleAttr(mlir::MLIRContext *ctx, const ScheduleFields &f);
// The op's `kiln.schedule` (nothing decided when it has none).
ScheduleFields scheduleOf(mlir::Operation *op);
// Sets the decisions of `decided` that the op's schedule has not made yet: a decision already
// in the IR (a user's .mlir, an edited dump) is kept.
void mergeSchedule(mlir::Operation *op, const ScheduleFields &decided);

// ---- an entry function's role (kiln.role; other when it has none)
inline EntryRoleKind roleOf(mlir::Operation *entry) {
  auto a = entry->getAttrOfType<EntryRoleKindAttr>("kiln.role");
  return a ? a.getValue() : EntryRoleKind::other;
}

// ---- an attention's mask and pattern (kiln.attention, kiln.attention_grad)
// A sparse pattern (window, strided, fixed, layout): kiln-tile-sparse-pattern's to tile.
inline bool isSparsePattern(MaskKind m) { return m != MaskKind::none && m != MaskKind::causal; }
// The op's `mask` (none when it has none) and `part` (a strided or fixed pattern's half).
inline MaskKind maskOf(mlir::Operation *op) {
  auto a = op->getAttrOfType<MaskKindAttr>("mask");
  return a ? a.getValue() : MaskKind::none;
}
inline std::optional<PatternPart> partOf(mlir::Operation *op) {
  if (auto a = op->getAttrOfType<PatternPartAttr>("part")) return a.getValue();
  return std::nullopt;
}

// ---- #kiln.sparse_schedule and kiln/Support/SparsePattern.h's parts.
sparse::Part partOf(SparsePartAttr a);
SparsePartAttr partAttr(mlir::MLIRContext *ctx, const sparse::Part &p);
// The sparse pattern a kiln.attention or kiln.attention_grad states (none when it has none), with the block size of its schedule (64 until kiln-tile-sparse-pattern chose one).
std::optional<sparse::Pattern> patternOf(mlir::Operation *op);

// ---- #kiln.view (kiln-fold-views): where a value lies in its buffer. Null: dense, row-major.
// An op's kiln.view is its first result's: a further result (an attention's lse) is dense.
inline ViewAttr viewOf(mlir::Value v) {
  auto r = mlir::dyn_cast<mlir::OpResult>(v);
  return r && r.getResultNumber() == 0 ? r.getOwner()->getAttrOfType<ViewAttr>("kiln.view") : ViewAttr();
}
// A slice, transpose or reshape folded into a view: it runs no kernel.
inline bool isFoldedView(mlir::Operation *op) {
  auto v = op->getAttrOfType<ViewAttr>("kiln.view");
  return v && v.getKind() != ViewKind::write;
}

// The kernel the runtime serves itself for `op` (it takes halide_buffer_t views like the
// generated ones), or empty: Halide generates it.
inline llvm::StringRef runtimeKernel(mlir::Operation *op) {
  if (mlir::isa<LshSortOp>(op)) return "kilnrt_kernel_lsh_sort";
  if (mlir::isa<AllReduceOp>(op)) return "kilnrt_kernel_all_reduce";
  if (mlir::isa<AllReduceWaitOp>(op)) return "kilnrt_kernel_all_reduce_wait";
  return {};
}

// An op whose kernel writes its first operand's buffer (a state or a parameter) and returns
// it: kiln.cache_write and the optimizer's updates; kiln.all_reduce (a gradient, summed over the
// ranks in its own buffer) and kiln.all_reduce_wait. Its result shares that buffer.
inline bool writesInPlace(mlir::Operation *op) {
  return mlir::isa<CacheWriteOp, StepCountOp, AdamWStepOp, AllReduceOp, AllReduceWaitOp>(op);
}

// The further operands an in-place op's kernel writes (states, updated in place beside its
// result): kiln.adamw_step's two moments. The kernel takes their buffers as further outputs,
// after its result, in this order.
inline llvm::SmallVector<unsigned, 2> alsoWritten(mlir::Operation *op) {
  if (mlir::isa<AdamWStepOp>(op)) return {1, 2};
  return {};
}

// The state holding one value per sequence of a batch (kiln.state with `batch`) that v is,
// directly or as a kiln.cache_write's updated value; null for anything else.
inline StateOp perSequenceState(mlir::Value v) {
  mlir::Operation *op = v.getDefiningOp();
  while (auto w = mlir::dyn_cast_or_null<CacheWriteOp>(op)) op = w.getCache().getDefiningOp();
  auto st = mlir::dyn_cast_or_null<StateOp>(op);
  return st && st.getBatch() ? st : StateOp();
}

}  // namespace kiln
