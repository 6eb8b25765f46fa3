// Kernels.h - the kernel families, one file each (Kernels/<Family>.cpp), and the pieces two
// families share. KernelRegistry.cpp dispatches a kernel spec to its family.
#pragma once
#include "../Builder.h"

namespace kiln::codegen {

// x rounded to bfloat16 (round to nearest, ties to even; a NaN stays a NaN), as an f32.
inline Expr roundToBf16(Expr x) {
  Expr u = reinterpret(UInt(32), x);
  Expr r = ((u + cast(UInt(32), 0x7fff) + ((u >> 16) & cast(UInt(32), 1))) >> 16) << 16;
  return select(is_nan(x), x, reinterpret(Float(32), r));
}
// A GEMM operand as the kernel's precision reads it (kiln-assign-precision): as it is (f32, and
// bf16_dot, whose kernel converts its operands to bfloat16 pairs itself), or rounded to
// bfloat16; the products are summed in f32 either way.
inline Expr gemmOperand(const Builder &B, Expr x) { return B.sch.precision == OperandPrecision::bf16 ? roundToBf16(x) : x; }
// A value as f32: a weight kept in bfloat16 (kiln-assign-precision) widened, exactly.
inline Expr asF32(Expr x) { return x.type().is_bfloat() ? cast<float>(x) : x; }
// A GEMM's weight operand: one kept in bfloat16 is already rounded, so only widened.
inline Expr gemmWeight(const Builder &B, Expr w) { return w.type().is_bfloat() ? cast<float>(w) : gemmOperand(B, w); }
// Whether a CPU GEMM's sums can start at the bias instead of zero: every column tile lies within
// the N columns (a static N that the tile divides), so no register block reads a bias past the
// end. Zeroing a block (6 x 64 floats) compiled to a memset call per block, 3.5% of GPT-2 small's
// profile at L = 512; loading the bias there costs four vector loads. (A linear without such a
// bias starts at its first product instead: Matmul.cpp.)
inline bool sumsStartAtBias(const Builder &B, int64_t N, int64_t tile) { return !B.gpu && N > 0 && tile > 0 && N % tile == 0; }
// Attention's operands under the kernel's precision (kiln-assign-precision): with bf16, a copy
// of X(c, row, head) rounded to bfloat16, made once at root (heads in parallel, vectors of
// `width`, X's first extent) for the products to read; else X itself.
inline Func attentionOperand(Builder &B, ImageParam X, int width, const std::string &name) {
  if (B.sch.precision != OperandPrecision::bf16) return Func(X);
  Func f(name);
  Var a("a"), r("r"), h("h");
  f(a, r, h) = roundToBf16(X(a, r, h));
  if (!B.gpu) {
    B.s(f).compute_root();
    if (B.parallel()) B.s(f).parallel(h);
    if (int w = largestDivisor(width, B.vec()); w > 1) B.s(f).vectorize(a, w);
  }
  return f;
}

// IEEE half bits (u32, the high half zero) as f32, exactly for every half: the sign and the 15
// bits of exponent and mantissa moved to an f32's places (x 2^112 rebiases the exponent; a
// subnormal half lands on an f32 subnormal that the product makes normal), the exponent of
// infinity and NaN set apart. A few integer operations (Halide's float16 cast is a long
// emulation on x86).
inline Expr halfToFloat(Expr h) {
  auto u = [](uint32_t x) { return Expr(x); };
  Expr bits = ((h & u(0x8000)) << 16) | ((h & u(0x7fff)) << 13);
  Expr v = reinterpret(Float(32), bits) * 5.192296858534828e33f;  // 2^112
  return select((h & u(0x7c00)) == u(0x7c00), reinterpret(Float(32), bits | u(0x7f800000)), v);
}
// The half stored little-endian in bytes lo, hi (u8) as f32.
inline Expr halfFromBytes(Expr lo, Expr hi) { return halfToFloat(cast<uint32_t>(lo) | (cast<uint32_t>(hi) << 8)); }
// A quantized weight (kiln-quantize-weights): W holds bytes (byte, block, row), blocks of 32
// weights along a row as ggml stores them. The weight at `e` (0..31) of block `b` of row `row`,
// with e = 16·h + l: the f16 scale d (bytes 0-1) times the block's int8 (q8_0: byte 2 + e), or
// its nibble (the low one of byte l for h = 0, the high one for h = 1) minus 8 (q4_0, bytes
// from 2), or plus the f16 minimum m (bytes 2-3; q4_1, nibbles from byte 4).
inline Expr quantHalf(ImageParam W, Expr at, Expr b, Expr row) {
  return halfFromBytes(W(at, b, row), W(at + 1, b, row));
}
// A weight's code as f32, the weight being d·code (+ m): q8_0's int8, q4_0's nibble - 8, q4_1's
// nibble (h = 0: the low nibbles of the block's 16 bytes, h = 1: the high ones; l: the byte).
inline Expr quantCode(ImageParam W, WeightFormat f, Expr row, Expr b, Expr h, Expr l) {
  switch (f) {
    case WeightFormat::q8_0: return cast<float>(reinterpret(Int(8), W(2 + 16 * h + l, b, row)));
    case WeightFormat::q4_0:
    case WeightFormat::q4_1: {
      Expr byte = W((f == WeightFormat::q4_0 ? 2 : 4) + l, b, row);
      Expr nib = cast<int>(select(h == 0, byte & cast<uint8_t>(15), byte >> 4));
      return cast<float>(f == WeightFormat::q4_0 ? nib - 8 : nib);
    }
    case WeightFormat::f32: break;
  }
  throw std::runtime_error("quantCode: not a quantized format");
}
// The weight from its block's scale d, its minimum m (q4_1; else unused) and its code.
inline Expr quantDecode(ImageParam W, WeightFormat f, Expr row, Expr b, Expr h, Expr l, Expr d, Expr m) {
  Expr w = d * quantCode(W, f, row, b, h, l);
  return f == WeightFormat::q4_1 ? w + m : w;
}
inline Expr quantWeight(ImageParam W, WeightFormat f, Expr row, Expr b, Expr h, Expr l) {
  return quantDecode(W, f, row, b, h, l, quantHalf(W, 0, b, row), f == WeightFormat::q4_1 ? quantHalf(W, 2, b, row) : Expr(0.0f));
}

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
// LshGrad.cpp: its gradient with respect to the shared qk or the value.
Func buildLshChunkAttentionGrad(Builder &B);
// RowReduce.cpp: layer norm and softmax.
Func buildRowReduce(Builder &B);
// RowReduce.cpp: layer norm's per-row statistics of X [..., D] (Halide (D, rest...)): the mean
// mu(rest) and rstd(rest) = 1 / sqrt(variance + eps); `funcs`, every Func to schedule per row.
struct RowStats {
  Func mu, rstd;
  std::vector<Func> funcs;
};
RowStats layerNormStats(ImageParam X, Expr D, const std::vector<Var> &rest, float eps);
// Elementwise.cpp: add, mul, scale and the activations.
Func buildElementwise(Builder &B);
// DataMovement.cpp: embeddings, positions, transpose, slice, concat, masks, cache writes.
Func buildDataMovement(Builder &B);
// DepthwiseConv.cpp.
Func buildDepthwiseConv(Builder &B);
Func buildDepthwiseConvGrad(Builder &B);
// Act.cpp: adaptive computation time on the recurrent carry.
Func buildAct(Builder &B);
// Loss.cpp: cross_entropy and its gradient.
Func buildLoss(Builder &B);
Func buildMean(Builder &B);  // kiln.mean and kiln.mean_grad (Loss.cpp)
// Backward.cpp: the backward's column reductions (reduce_rows, weight_grad, layer_norm_grad
// wrt gamma, embedding_grad).
Func buildBackward(Builder &B);
// AttentionGrad.cpp: attention's gradient with respect to its query, key or value.
Func buildAttentionGrad(Builder &B);
// SparseAttentionGrad.cpp: a block-sparse attention's gradients, over its block schedule.
Func buildSparseAttentionGrad(Builder &B);
// Optimizer.cpp: gradient norms, the step counter, the learning rate, AdamW.
Func buildOptimizer(Builder &B);

// Elementwise.cpp: an activation, also the epilogue of linears and FFNs.
Expr activation(ActivationKind act, Expr x);

// Matmul.cpp: the GPU GEMM schedule, shared by the FFN's two GEMMs: output tiles of tn columns
// x tm rows per block, 4 x 4 per thread; with kc > 0 (a static K that kc divides), K in chunks
// of kc staged through shared memory from the operand Funcs a(k, i[, batch]) and b(j, k[, batch]).
struct GpuGemm {
  int tn = 64, tm = 32;
  int kc = 0;
  Func a, b;
};
void gpuGemm(Builder &B, Func out, Func acc, Var j, Var i, RVar rk, const Var *batch, const GpuGemm &g,
             bool fullTiles = false);

// Matmul.cpp: the CPU GEMM of a few static rows (gemm = stream), shared by the FFN's two GEMMs:
// out(j, i) over `rows` rows from acc(j, i) = sum_r A(r, i) W(j, r), each weight element read
// once per call in the layout it is stored in. Column tiles of tn run as tasks (`tail`:
// ShiftInwards where tn <= N, GuardWithIf for tiles of whole panels); `alongK`: the weight is
// [N, K] (contiguous along r), read as vec-lane partial sums per column, else [K, N] or panels,
// read as tn-column row segments with tn/vec x rows accumulators.
void cpuStreamGemm(Builder &B, Func out, Func acc, Var j, Var i, RVar r, int rows, bool alongK, int tn, int vec,
                   bool parallel, TailStrategy tail);
// Column j, row k of an [K, N] weight kept in panels [ceil(N / w), K, w] (kiln-prepack-weights,
// weight layout "panels"; `d` is its static shape): lane j % w of panel j / w, the panel
// clamped (a tile of several panels may overhang the last).
Expr panelRead(ImageParam W, const TensorDesc &d, Expr j, Expr k);

}  // namespace kiln::codegen
