// DataMovement.cpp - kernels that move or generate data: embedding, position_embedding,
// sinusoidal_positions, rope (rotary positions), position_ids, transpose, slice, concat, the additive causal mask, cache_write
// (rows written in place into a state), and pad (a slice's gradient).
#include "Kernels.h"

namespace kiln::codegen {

Func buildDataMovement(Builder &B) {
  const KernelSpec &k = B.k;
  int r = B.rank();
  std::vector<Var> v = makeVars(r);

  /* THE ALGORITHM */
  Func out("out");
  if (mlir::isa<EmbeddingOp>(k.source)) {
    // Ids are range-checked by the runtime before any kernel runs; the clamp keeps the access
    // provably in bounds. A table in panels [ceil(V / w), d, w] (tied to an output head): row
    // t is lane t % w of panel t / w (the padding past V is zeros).
    const TensorDesc &t = k.inputs[0];
    if (WeightFormat f = B.op<EmbeddingOp>().getTableFormat(); f != WeightFormat::f32) {
      // A quantized table (kiln-quantize-weights): feature c of row t decoded from its block.
      Expr id = clamp(B.in[1](v[1]), 0, (int)t.dims[0] - 1), c = v[0];
      out(v) = quantWeight(B.in[0], f, id, c / kQuantBlock, (c % kQuantBlock) / 16, c % 16);
    } else if (B.op<EmbeddingOp>().getTableLayout() == TableLayoutKind::panels) {
      const int w = (int)t.dims[2];
      Expr id = clamp(B.in[1](v[1]), 0, (int)(t.dims[0] * t.dims[2]) - 1);
      out(v) = asF32(B.in[0](id % w, v[0], id / w));  // a table kept in bfloat16 widened
    } else {
      out(v) = B.in[0](v[0], clamp(B.in[1](v[1]), 0, (int)t.dims[0] - 1));
    }
  } else if (mlir::isa<PositionEmbeddingOp>(k.source)) {
    // From `start` (a chunk at a cache's past): clamped, a bound Halide can prove (the runtime
    // keeps past + L within the table).
    out(v) = k.inputs.size() > 2 ? B.in[0](v[0], clamp(v[1] + B.in[2](0), 0, (int)k.inputs[0].dims[0] - 1)) : B.in[0](v[0], v[1]);
  } else if (mlir::isa<PositionIdsOp>(k.source)) {
    out(v) = v[0];  // run per sequence over a batch's rows
  } else if (mlir::isa<TransposeOp>(k.source)) {
    llvm::ArrayRef<int64_t> perm = B.op<TransposeOp>().getPermutation();
    // result tensor dim t is input tensor dim perm[t]; Halide dims are reversed.
    std::vector<Expr> a(r);
    for (int t = 0; t < r; ++t) a[r - 1 - perm[t]] = v[r - 1 - t];
    out(v) = B.in[0](a);
  } else if (mlir::isa<SinusoidalPositionsOp>(k.source)) {  // c0: feature, c1: position
    float d = (float)k.output.dims[1];
    Expr freq = exp(cast<float>(v[0] - v[0] % 2) * (-std::log(10000.0f) / d));
    Expr pos = k.inputs.size() > 1 ? v[1] + B.in[1](0) : Expr(v[1]);
    Expr angle = cast<float>(pos) * freq;
    out(v) = select(v[0] % 2 == 0, sin(angle), cos(angle));
  } else if (mlir::isa<RopeOp>(k.source)) {  // c0: feature, c1: position, c2: head
    // Rotary positions: pair i of a row at position p turns by p · theta^(-2i/d) / scaling. The
    // angles' cosines and sines are a table over (pair, row), computed once for every head.
    RopeOp op = B.op<RopeOp>();
    const int D = (int)k.output.dims[2], half = D / 2;
    const bool inter = op.getStyle() == RopeStyleKind::interleaved;
    const float theta = op.getTheta().convertToFloat(), scaling = op.getScaling().convertToFloat();
    Var i("i"), p("p");
    Func invFreq("inv_freq"), cs("cos_sin");
    // As Hugging Face computes it: 1 / theta^(2i/d) in f32, then the position times it.
    if (int64_t original = op.getOriginalContext(); original > 0) {
      // Llama 3.1's scaling, in f32 as transformers' _compute_llama3_parameters: by wavelength.
      const float low = op.getLowFreqFactor().convertToFloat(), high = op.getHighFreqFactor().convertToFloat();
      const float orig = (float)original;
      Expr f = 1.0f / pow(Expr(theta), cast<float>(2 * i) / (float)D);
      Expr wavelen = (float)(2 * M_PI) / f;
      Expr smooth = (orig / wavelen - low) / (high - low);
      Expr blended = (1.0f - smooth) * f / scaling + smooth * f;
      invFreq(i) = select(wavelen < (float)(original / (double)high), f,
                          select(wavelen > (float)(original / (double)low), f / scaling, blended));
    } else {
      invFreq(i) = 1.0f / (pow(Expr(theta), cast<float>(2 * i) / (float)D) * scaling);
    }
    Expr pos = cast<float>(k.inputs.size() > 1 ? p + B.in[1](0) : Expr(p));
    Expr angle = pos * invFreq(i);
    cs(i, p) = Tuple(cos(angle), op.getInverse() ? -sin(angle) : sin(angle));
    Expr c = v[0];
    Expr pair = inter ? c / 2 : c % half;
    Expr first = inter ? c % 2 == 0 : c < half;
    Expr partner = inter ? c + select(first, 1, -1) : c + select(first, half, -half);
    Expr x = B.in[0](c, v[1], v[2]), y = B.in[0](clamp(partner, 0, D - 1), v[1], v[2]);  // clamped: bounds Halide can prove
    out(v) = x * cs(pair, v[1])[0] + select(first, -y, y) * cs(pair, v[1])[1];
    /* THE SCHEDULE: the table at root (every head reads it), then row-wise. */
    B.s(invFreq).compute_root();
    B.s(cs).compute_root();
    if (B.gpu) {
      B.gpuRows(invFreq, {i});
      B.gpuRows(cs, {i, p});
    } else if (B.parallel()) {
      B.s(cs).parallel(p);
    }
  } else if (mlir::isa<CacheWriteOp>(k.source)) {
    // In place: only rows [past, past + n) of the state are written (an undefined pure step,
    // then an update over the new rows), so a decode step costs O(one row), not O(cache).
    ImageParam V = B.in[1];
    Expr past = k.inputs.size() > 2 ? B.in[2](0) : Expr(0);
    RDom rn(0, V.dim(1).extent(), "rn");
    out(v) = undef<float>();
    out(v[0], past + rn, v[2]) = V(v[0], rn, v[2]);
    /* THE SCHEDULE: the update over the new rows only (GPU: a block per row and head; the rows
     * are independent, each written once). */
    if (B.gpu) {
      B.s(out.update()).allow_race_conditions().reorder(v[0], rn, v[2]).gpu_blocks(rn, v[2]).gpu_threads(v[0]);
      return out;
    }
    B.s(out.update()).vectorize(v[0], std::min(B.vec(), (int)k.output.dims[2]), TailStrategy::GuardWithIf);
    return out;
  } else if (mlir::isa<MaskOp>(k.source)) {  // causal: key c0 visible to query c1 when c0 <= c1 + Lk - Lq
    Expr Lk = B.in[0].dim(0).extent(), Lq = B.in[0].dim(1).extent();
    out(v) = select(v[0] <= v[1] + (Lk - Lq), 0.0f, -std::numeric_limits<float>::infinity());
  } else if (mlir::isa<SliceOp>(k.source)) {
    SliceOp op = B.op<SliceOp>();
    int axis = r - 1 - (int)op.getAxis();
    std::vector<Expr> a = ex(v);
    const int64_t off = op.getOffset();  // -1: the last element
    a[axis] = a[axis] + (off < 0 ? B.in[0].dim(axis).extent() + (int)off : Expr((int)off));
    out(v) = B.in[0](a);
  } else if (mlir::isa<ConcatOp>(k.source)) {
    int axis = r - 1 - (int)B.op<ConcatOp>().getAxis();
    int64_t start = 0;
    std::vector<std::pair<int64_t, Expr>> parts;
    for (size_t i = 0; i < B.in.size(); ++i) {
      std::vector<Expr> a = ex(v);
      a[axis] = clamp(a[axis] - (int)start, 0, (int)k.inputs[i].dims[k.inputs[i].dims.size() - 1 - axis] - 1);
      parts.push_back({start, B.in[i](a)});
      start += k.inputs[i].dims[k.inputs[i].dims.size() - 1 - axis];
    }
    Expr val = parts.back().second;
    for (int i = (int)parts.size() - 2; i >= 0; --i) val = select(v[axis] < (int)parts[i + 1].first, parts[i].second, val);
    out(v) = val;
  } else if (mlir::isa<PadOp>(k.source)) {  // the input at `offset` along the axis (-1: the last), zeros elsewhere
    PadOp op = B.op<PadOp>();
    int axis = r - 1 - (int)op.getAxis();
    Expr n = B.in[0].dim(axis).extent();
    const int64_t offset = (int64_t)op.getOffset();  // an I64Attr's getter is unsigned
    Expr off = offset < 0 ? Expr(B.in[1].dim(axis).extent() - 1) : Expr((int)offset);
    std::vector<Expr> a = ex(v);
    a[axis] = clamp(a[axis] - off, 0, n - 1);
    out(v) = select(v[axis] >= off && v[axis] < off + n, B.in[0](a), 0.0f);
  } else {
    throw std::runtime_error("kernel " + k.kind + " does not move data");
  }

  /* THE SCHEDULE: row-wise (CPU: row tasks; GPU: a block per row). */
  B.rowwise(out, v);
  return out;
}

}  // namespace kiln::codegen
