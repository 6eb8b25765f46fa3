// Kernels.h - the kernel families, one file each (Kernels/<Family>.cpp), and the pieces two
// families share. KernelRegistry.cpp dispatches a kernel spec to its family.
#pragma once
#include "../Builder.h"

namespace kiln::codegen {

// Matmul.cpp: linear, matmul, batch_matmul.
Func buildMatmul(Builder &B);
// Ffn.cpp: the chunked feed-forward network.
Func buildFfn(Builder &B);
// Attention.cpp: over a whole sequence (the online block engine), and over a cache or for
// decode steps (row strips of scores).
Func buildSequenceAttention(Builder &B);
Func buildCacheAttention(Builder &B);
// SparseAttention.cpp: block-sparse patterns on the online block engine.
Func buildSparseAttention(Builder &B);
// Lsh.cpp: the Reformer's hashing and its chunked attention.
Func buildLshHash(Builder &B);
Func buildLshChunkAttention(Builder &B);
// RowReduce.cpp: layer norm and softmax.
Func buildRowReduce(Builder &B);
// Elementwise.cpp: add, mul, scale and the activations.
Func buildElementwise(Builder &B);
// DataMovement.cpp: embeddings, positions, transpose, slice, concat, masks, cache writes.
Func buildDataMovement(Builder &B);
// DepthwiseConv.cpp.
Func buildDepthwiseConv(Builder &B);
// Act.cpp: adaptive computation time on the recurrent carry.
Func buildAct(Builder &B);

// Elementwise.cpp: an activation by name ("none", "relu", "gelu_erf", "gelu_tanh"), also the
// epilogue of linears and FFNs.
Expr activation(const std::string &act, Expr x);

// Matmul.cpp: the GPU GEMM schedule, shared by the FFN's two GEMMs.
struct GpuStage {
  Func a, b;   // a(k, i[, batch]) and b(j, k[, batch]), as acc's update reads them
  int kc = 0;  // K per chunk (divides K)
};
// The largest K chunk (of 32, 16, 8, 4) dividing a static K; 0: no staging, also for a static M
// under one block's 32 rows (decode steps), where whole staged tiles would mostly be padding.
int gpuKChunk(int64_t K, int64_t M);
void gpuGemm(Builder &B, Func out, Func acc, Var j, Var i, RVar rk, const Var *batch, int64_t N, bool fullTiles = false,
             GpuStage *stage = nullptr);

}  // namespace kiln::codegen
