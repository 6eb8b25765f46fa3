// KernelRegistry.cpp - a kernel spec to its family's Halide algorithm and schedule. The switch
// is over the KernelFamily enum (and an attention's over its engine): a family without a case is
// a compiler warning (-Wswitch). Within a family, its builder tells its ops apart.
#include "KernelRegistry.h"

#include "Kernels/Kernels.h"

namespace kiln::codegen {

Func generate(Builder &B) {
  const KernelSpec &k = B.k;
  switch (k.family) {
    case KernelFamily::Gemm: return buildMatmul(B);
    case KernelFamily::Ffn: return buildFfn(B);
    case KernelFamily::Attention:
      switch (B.sch.engine) {
        case AttentionEngine::online_block: return buildSequenceAttention(B);
        case AttentionEngine::row_strip: return buildCacheAttention(B);
        case AttentionEngine::block_sparse: return buildSparseAttention(B);
        case AttentionEngine::unset: break;
      }
      throw std::runtime_error("kernel attention: its kiln.schedule has no engine (kiln-tile-ops did not run)");
    case KernelFamily::LshHash: return buildLshHash(B);
    case KernelFamily::LshChunkAttention: return buildLshChunkAttention(B);
    case KernelFamily::RowReduce: return buildRowReduce(B);
    case KernelFamily::Elementwise: return buildElementwise(B);
    case KernelFamily::DataMovement: return buildDataMovement(B);
    case KernelFamily::DepthwiseConv: return buildDepthwiseConv(B);
    case KernelFamily::DepthwiseConvGrad: return buildDepthwiseConvGrad(B);
    case KernelFamily::Act: return buildAct(B);
    case KernelFamily::Loss: return buildLoss(B);
    case KernelFamily::Mean: return buildMean(B);
    case KernelFamily::Backward: return buildBackward(B);
    case KernelFamily::AttentionGrad:
      return B.op<AttentionGradOp>().getPatternSize() ? buildSparseAttentionGrad(B) : buildAttentionGrad(B);
    case KernelFamily::LshChunkAttentionGrad: return buildLshChunkAttentionGrad(B);
    case KernelFamily::Optimizer: return buildOptimizer(B);
    case KernelFamily::Runtime:  // the runtime's (kiln::runtimeKernel)
    case KernelFamily::None: break;
  }
  throw std::runtime_error("no Halide kernel for op kind '" + k.kind + "'");
}

}  // namespace kiln::codegen
