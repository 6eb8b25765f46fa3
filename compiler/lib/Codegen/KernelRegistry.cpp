// KernelRegistry.cpp - a kernel spec to its family's Halide algorithm and schedule. The switch
// is over the family enum: a family without a case is a compiler warning (-Wswitch).
#include "KernelRegistry.h"

#include "Kernels/Kernels.h"

namespace kiln::codegen {

Func generate(Builder &B) {
  const KernelSpec &k = B.k;
  switch (k.family) {
    case KernelFamily::Matmul: return buildMatmul(B);
    case KernelFamily::Ffn: return buildFfn(B);
    case KernelFamily::Attention:
      // Over a cache, or a static query length (decode steps): row strips; otherwise the online block engine.
      if (k.inputs.size() == 3 && k.inputs[0].dims[1] < 0) return buildSequenceAttention(B);
      return buildCacheAttention(B);
    case KernelFamily::SparseAttention: return buildSparseAttention(B);
    case KernelFamily::LshHash: return buildLshHash(B);
    case KernelFamily::LshChunkAttention: return buildLshChunkAttention(B);
    case KernelFamily::RowReduce: return buildRowReduce(B);
    case KernelFamily::Elementwise: return buildElementwise(B);
    case KernelFamily::DataMovement: return buildDataMovement(B);
    case KernelFamily::DepthwiseConv: return buildDepthwiseConv(B);
    case KernelFamily::Act: return buildAct(B);
    case KernelFamily::Host: break;
  }
  throw std::runtime_error("no Halide kernel for op kind '" + k.kind + "'");
}

}  // namespace kiln::codegen
