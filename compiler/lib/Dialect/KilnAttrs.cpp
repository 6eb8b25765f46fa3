// KilnAttrs.cpp - the typed decisions (KilnAttrs.td) as plain fields for the passes that make
// them and the code generator that applies them, and their checks.
#include "kiln/Dialect/KilnDialect.h"
#include "mlir/IR/Builders.h"

using namespace mlir;

namespace kiln {

std::map<std::string, std::string> ScheduleFields::keyEntries() const {
  std::map<std::string, std::string> m;
#define KILN_FIELD(name, Getter) \
  if (name) m["s." #name] = std::to_string(*name);
  KILN_SCHEDULE_INTS(KILN_FIELD)
#undef KILN_FIELD
  if (pack != Packing::unset) m["s.pack"] = stringifyPacking(pack).str();
  if (engine != AttentionEngine::unset) m["s.engine"] = stringifyAttentionEngine(engine).str();
  if (gemm != GemmEngine::unset) m["s.gemm"] = stringifyGemmEngine(gemm).str();
  if (precision != OperandPrecision::unset) m["s.precision"] = stringifyOperandPrecision(precision).str();
  return m;
}

ScheduleFields fieldsOf(ScheduleAttr a) {
  ScheduleFields f;
  if (!a) return f;
#define KILN_FIELD(name, Getter) f.name = a.get##Getter();
  KILN_SCHEDULE_INTS(KILN_FIELD)
#undef KILN_FIELD
  f.pack = a.getPack();
  f.engine = a.getEngine();
  f.gemm = a.getGemm();
  f.precision = a.getPrecision();
  return f;
}

ScheduleAttr scheduleAttr(MLIRContext *ctx, const ScheduleFields &f) {
  return ScheduleAttr::get(ctx, f.vec, f.parallel, f.tile_m, f.tile_n, f.tile_rows, f.column_tasks, f.pack, f.hidden_vec,
                           f.hidden_tile_n, f.rows_per_task, f.engine, f.q_block, f.k_block, f.block, f.chunk, f.lsh_tile, f.gpu_tile_n,
                           f.gpu_tile_m, f.gpu_k_chunk, f.gpu_hidden_tile_n, f.gpu_hidden_k_chunk, f.gpu_threads, f.k_chunk, f.k_unroll, f.col_group, f.gemm,
                           f.precision);
}

ScheduleFields scheduleOf(Operation *op) { return fieldsOf(op->getAttrOfType<ScheduleAttr>("kiln.schedule")); }

void mergeSchedule(Operation *op, const ScheduleFields &decided) {
  ScheduleFields f = scheduleOf(op);
#define KILN_FIELD(name, Getter) \
  if (!f.name) f.name = decided.name;
  KILN_SCHEDULE_INTS(KILN_FIELD)
#undef KILN_FIELD
  if (f.pack == Packing::unset) f.pack = decided.pack;
  if (f.engine == AttentionEngine::unset) f.engine = decided.engine;
  if (f.gemm == GemmEngine::unset) f.gemm = decided.gemm;
  if (f.precision == OperandPrecision::unset) f.precision = decided.precision;
  op->setAttr("kiln.schedule", scheduleAttr(op->getContext(), f));
}

// SparsePattern.h's enums and the dialect's, case for case (the attribute is cast to them).
static_assert((int)sparse::Order::Identity == (int)SparseOrder::sequence &&
              (int)sparse::Order::StrideTranspose == (int)SparseOrder::stride_transpose &&
              (int)sparse::Order::SummaryGather == (int)SparseOrder::summary_gather);
static_assert((int)sparse::Rule::Window == (int)SparseRule::window_to_diagonal &&
              (int)sparse::Rule::Group == (int)SparseRule::residue_class_to_diagonal &&
              (int)sparse::Rule::OwnBlock == (int)SparseRule::own_block_to_diagonal &&
              (int)sparse::Rule::Summary == (int)SparseRule::summaries_before_last_row &&
              (int)sparse::Rule::Table == (int)SparseRule::layout_table);
static_assert((int)sparse::Pred::None == (int)SparseMask::none && (int)sparse::Pred::Window == (int)SparseMask::window &&
              (int)sparse::Pred::StridedLocal == (int)SparseMask::strided_local &&
              (int)sparse::Pred::StridedGlobal == (int)SparseMask::strided_global &&
              (int)sparse::Pred::FixedLocal == (int)SparseMask::fixed_local &&
              (int)sparse::Pred::FixedGlobal == (int)SparseMask::fixed_global &&
              (int)sparse::Pred::Layout == (int)SparseMask::layout);

sparse::Part partOf(SparsePartAttr a) {
  return {(sparse::Order)a.getQueries(), (sparse::Order)a.getKeys(), (sparse::Rule)a.getBlocks(), (sparse::Pred)a.getMask(),
          (sparse::Pred)a.getExclude()};
}

SparsePartAttr partAttr(MLIRContext *ctx, const sparse::Part &p) {
  return SparsePartAttr::get(ctx, (SparseOrder)p.q, (SparseOrder)p.k, (SparseRule)p.rule, (SparseMask)p.mask,
                             (SparseMask)p.exclude);
}

LogicalResult ArenaSlotAttr::verify(function_ref<InFlightDiagnostic()> emitError, int64_t bytes, DenseI64ArrayAttr powers,
                                    int64_t first, int64_t last) {
  if (bytes < 0) return emitError() << "expected non-negative static bytes, got " << bytes;
  if (!powers || powers.size() != 8 || llvm::any_of(powers.asArrayRef(), [](int64_t p) { return p < 0 || p > 255; }))
    return emitError() << "expected eight powers in [0, 255] (one per sequence length, batch or batch's rows)";
  if (first < 0 || last < first) return emitError() << "expected a live range 0 <= first <= last, got [" << first << ", " << last << "]";
  return success();
}

}  // namespace kiln
