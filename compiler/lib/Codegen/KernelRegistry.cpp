// KernelRegistry.cpp - a kernel spec to its family's Halide algorithm and schedule. The switch
// is over the KernelOp enum (and an attention's over its engine): a kernel without a case is a
// compiler warning (-Wswitch).
#include "KernelRegistry.h"

#include "Kernels/Kernels.h"

namespace kiln::codegen {

Func generate(Builder &B) {
  const KernelSpec &k = B.k;
  switch (k.op) {
    case KernelOp::Linear:
    case KernelOp::MatMul:
    case KernelOp::BatchMatMul: return buildMatmul(B);
    case KernelOp::Ffn: return buildFfn(B);
    case KernelOp::Attention:
      switch (B.sch.engine) {
        case AttentionEngine::online_block: return buildSequenceAttention(B);
        case AttentionEngine::row_strip: return buildCacheAttention(B);
        case AttentionEngine::block_sparse: return buildSparseAttention(B);
        case AttentionEngine::unset: break;
      }
      throw std::runtime_error("kernel attention: its kiln.schedule has no engine (kiln-tile-ops did not run)");
    case KernelOp::LshHash: return buildLshHash(B);
    case KernelOp::LshChunkAttention: return buildLshChunkAttention(B);
    case KernelOp::LayerNorm:
    case KernelOp::Softmax: return buildRowReduce(B);
    case KernelOp::Add:
    case KernelOp::Mul:
    case KernelOp::Scale:
    case KernelOp::Activation: return buildElementwise(B);
    case KernelOp::Embedding:
    case KernelOp::PositionEmbedding:
    case KernelOp::SinusoidalPositions:
    case KernelOp::Transpose:
    case KernelOp::Slice:
    case KernelOp::Concat:
    case KernelOp::Mask:
    case KernelOp::CacheWrite: return buildDataMovement(B);
    case KernelOp::DepthwiseConv: return buildDepthwiseConv(B);
    case KernelOp::DepthwiseConvGrad: return buildDepthwiseConvGrad(B);
    case KernelOp::ActInit:
    case KernelOp::ActInput:
    case KernelOp::ActUpdate:
    case KernelOp::ActRunning:
    case KernelOp::ActOutput:
    case KernelOp::ActUpdateGrad: return buildAct(B);
    case KernelOp::Fill:
    case KernelOp::ActivationGrad: return buildElementwise(B);
    case KernelOp::SoftmaxGrad: return buildRowReduce(B);
    case KernelOp::LayerNormGrad:
      return B.op<LayerNormGradOp>().getWrt() == "input" ? buildRowReduce(B) : buildBackward(B);
    case KernelOp::CrossEntropy:
    case KernelOp::CrossEntropyGrad: return buildLoss(B);
    case KernelOp::Mean:
    case KernelOp::MeanGrad: return buildMean(B);
    case KernelOp::ReduceRows:
    case KernelOp::WeightGrad:
    case KernelOp::EmbeddingGrad: return buildBackward(B);
    case KernelOp::Pad:
    case KernelOp::PositionIds: return buildDataMovement(B);
    case KernelOp::AttentionGrad:
      return B.op<AttentionGradOp>().getPatternSize() ? buildSparseAttentionGrad(B) : buildAttentionGrad(B);
    case KernelOp::LshChunkAttentionGrad: return buildLshChunkAttentionGrad(B);
    case KernelOp::SumSquares:
    case KernelOp::StepCount:
    case KernelOp::LearningRate:
    case KernelOp::LossWeight:
    case KernelOp::AdamWStep: return buildOptimizer(B);
    case KernelOp::LshSort:  // the runtime's (kiln::runtimeKernel)
    case KernelOp::AllReduce:
    case KernelOp::AllReduceWait:
    case KernelOp::None: break;
  }
  throw std::runtime_error("no Halide kernel for op kind '" + k.kind + "'");
}

}  // namespace kiln::codegen
