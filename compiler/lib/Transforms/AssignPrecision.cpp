// kiln-assign-precision: the precision of every forward GEMM's operands (mixed precision).
//
// Algorithm:
//   1. The request: the pass option `precision` when given (the driver's --precision), else the
//      module's `kiln.precision` string (the DSL's Model::set_precision), else f32. Anything
//      else is an error naming the value.
//   2. bf16: every kiln.linear, kiln.matmul, kiln.batch_matmul and kiln.ffn gets precision = bf16
//      in its kiln.schedule (a decision already there is kept): its kernel rounds both operands
//      to bfloat16 and sums the products in f32. That includes the backward's input gradients
//      (dY·W, a kiln.matmul), as mixed-precision training does; weight gradients
//      (kiln.weight_grad), attention and its gradient and everything else stay f32, so do the
//      parameters (the optimizer updates f32 master weights) and the activations between kernels.
//   3. With `dot` (the target has AVX-512 BF16; the pass runs after kiln-tile-ops): a linear,
//      matmul (not batched) or FFN with gemm = register_block, no k_chunk and column tiles
//      (tile_n, and the FFN's hidden_tile_n) of whole 16-lane vectors gets bf16_dot: its kernel
//      converts both operands to bfloat16 pairs along K and sums each pair's products with
//      vdpbf16ps. Others (decode's streaming GEMMs, batched products) keep bf16.
//   4. On a CPU target (`cpu`) with no kiln.adamw_step in the module (training keeps f32
//      master weights): a parameter every use of which reads it in panels (kiln-prepack-weights)
//      as a bf16 or bf16_dot linear's weight, W1 or W2 of such an FFN, or an embedding's table
//      (an output head tied to the input embedding) gets the element type bf16. Its values are
//      the ones the GEMMs would round to anyway, so results do not change; the runtime keeps
//      it in half the bytes (the weight bytes a decode step reads are halved), rounding once at
//      load or taking a BF16 checkpoint's values as stored.
//   5. On a CPU target, every attention and its gradient gets precision = bf16 too (dense,
//      causal, over a cache, block-sparse: kiln.attention and kiln.attention_grad; LSH:
//      kiln.lsh_hash, kiln.lsh_chunk_attention and its grad): the kernels round q, k and v (the
//      Reformer's shared qk, hashed as rounded) to bfloat16 and compute the scores, the
//      softmax, the weighted sums, the merges and the gradients in f32 (the gradient of
//      attention over the rounded operands, passed on to q, k and v unchanged, as a bf16
//      cast's gradient is).
#include "kiln/Transforms/Passes.h"
#include "kiln/Transforms/Utils.h"
#include "llvm/ADT/MapVector.h"

namespace kiln {
#define GEN_PASS_DEF_ASSIGNPRECISION
#include "kiln/Transforms/Passes.h.inc"
}  // namespace kiln

using namespace mlir;

namespace {
struct AssignPrecisionPass : kiln::impl::AssignPrecisionBase<AssignPrecisionPass> {
  using AssignPrecisionBase::AssignPrecisionBase;
  void runOnOperation() override {
    ModuleOp module = getOperation();
    kiln::ModelPrecision want = kiln::ModelPrecision::f32;
    switch (precision) {
      case kiln::PrecisionOption::model:
        if (auto a = module->getAttrOfType<kiln::ModelPrecisionAttr>("kiln.precision")) want = a.getValue();
        break;
      case kiln::PrecisionOption::f32: break;
      case kiln::PrecisionOption::bf16: want = kiln::ModelPrecision::bf16; break;
    }
    if (want == kiln::ModelPrecision::f32) return;
    module.walk([&](Operation *op) {
      if (!isa<kiln::LinearOp, kiln::MatMulOp, kiln::BatchMatMulOp, kiln::FfnOp>(op)) return;
      kiln::ScheduleFields s = kiln::scheduleOf(op), want;
      auto l = dyn_cast<kiln::LinearOp>(op);
      const bool quantized = l && l.getWeightFormat() != kiln::WeightFormat::f32;  // its blocks' values, by f32 activations
      bool dotted = dot && !quantized && isa<kiln::LinearOp, kiln::MatMulOp, kiln::FfnOp>(op) &&
                    s.gemm == kiln::GemmEngine::register_block && !s.k_chunk && s.tile_n && *s.tile_n % 16 == 0 &&
                    (!isa<kiln::FfnOp>(op) || (s.hidden_tile_n && *s.hidden_tile_n % 16 == 0));
      want.precision = dotted ? kiln::OperandPrecision::bf16_dot : kiln::OperandPrecision::bf16;
      kiln::mergeSchedule(op, want);
    });
    if (!cpu) return;
    // 5. Attention and its gradient, every engine (CPU): q, k and v rounded.
    module.walk([&](Operation *op) {
      if (!isa<kiln::AttentionOp, kiln::AttentionGradOp, kiln::LshHashOp, kiln::LshChunkAttentionOp,
               kiln::LshChunkAttentionGradOp>(op))
        return;
      kiln::ScheduleFields want;
      want.precision = kiln::OperandPrecision::bf16;
      kiln::mergeSchedule(op, want);
    });
    bool training = false;
    module.walk([&](kiln::AdamWStepOp) { training = true; });
    if (training) return;
    llvm::MapVector<StringRef, SmallVector<kiln::ParamOp>> byName;
    module.walk([&](kiln::ParamOp p) { byName[p.getName()].push_back(p); });
    for (auto &[name, ops] : byName) {
      if (!ops.front().getPanelCols() || !cast<RankedTensorType>(ops.front().getType()).getElementType().isF32()) continue;
      bool all = true;
      for (kiln::ParamOp p : ops)
        for (OpOperand &use : p->getUses()) all &= readsPanels(use);
      if (!all) continue;
      for (kiln::ParamOp p : ops) {
        auto t = cast<RankedTensorType>(p.getType());
        p.getResult().setType(RankedTensorType::get(t.getShape(), BFloat16Type::get(&getContext())));
      }
    }
  }

  // Whether `use` reads a parameter in panels as the weight of a bf16 GEMM or as a table.
  static bool readsPanels(OpOperand &use) {
    Operation *op = use.getOwner();
    auto rounded = [&] {
      auto p = kiln::scheduleOf(op).precision;
      return p == kiln::OperandPrecision::bf16 || p == kiln::OperandPrecision::bf16_dot;
    };
    if (auto l = dyn_cast<kiln::LinearOp>(op)) return use.getOperandNumber() == 1 && l.getWeightLayout() == kiln::WeightLayoutKind::panels && rounded();
    if (auto f = dyn_cast<kiln::FfnOp>(op))
      return ((use.getOperandNumber() == 1 && f.getLayout1() == kiln::WeightLayoutKind::panels) ||
              (use.getOperandNumber() == 3 && f.getLayout2() == kiln::WeightLayoutKind::panels)) &&
             rounded();
    if (auto e = dyn_cast<kiln::EmbeddingOp>(op)) return use.getOperandNumber() == 0 && e.getTableLayout() == kiln::TableLayoutKind::panels;
    return false;
  }
};
}  // namespace
