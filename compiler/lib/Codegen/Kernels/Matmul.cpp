// Matmul.cpp - linear, matmul and batch_matmul: out(j, i[, b]) = act(sum_k A(k, i[, b]) B(j, k[, b]) + bias(j)),
// and the GPU GEMM schedule the FFN shares. Tiles, packing and parallelism are kiln-tile-ops'
// and kiln-assign-schedule's decisions (the kernel's kiln.schedule); this file applies them.
#include "Kernels.h"

namespace kiln::codegen {

// The GPU GEMM: output tiles of tn columns x tm rows per block; tn/4 x tm/4 threads, each with
// a 4 x 4 block of the output.
//
// With a K chunk (a static K that kc divides, operands read through Funcs with clamped indices):
// K runs in chunks of kc inside the block. Per chunk the block's threads copy the chunk's
// operand tiles (kc x tm rows of A, tn columns x kc of B) into shared memory, then each thread
// sums its 4 x 4 block over the chunk in registers (acc's update rfactor'ed over the chunks) and
// adds it to the block's accumulator tile in shared memory. Every tile, edge tiles included, is
// computed whole (bound_extent): the operand Funcs clamp their indices.
//
// Without: each thread's 4 x 4 accumulators stay in registers over all of K and the operands are
// read through the caches. fullTiles: every thread computes its whole 4 x 4 block, edge tiles
// included: needed where out's rows are a split of a dynamic-sized chunk, and safe only where
// every operand read is clamped (the FFN's packed panels and clamped input rows).
void gpuGemm(Builder &B, Func out, Func acc, Var j, Var i, RVar rk, const Var *batch, const GpuGemm &g, bool fullTiles) {
  const int tn = g.tn, tm = g.tm;
  Var jo("jo"), io("io"), ji("ji"), ii("ii"), jt("jt"), it("it"), jr("jr"), ir("ir");
  B.s(out).tile(j, i, jo, io, ji, ii, tn, tm, TailStrategy::GuardWithIf).tile(ji, ii, jt, it, jr, ir, 4, 4, TailStrategy::GuardWithIf);
  if (batch) B.s(out).gpu_blocks(jo, io, *batch);
  else B.s(out).gpu_blocks(jo, io);
  B.s(out).gpu_threads(jt, it).unroll(jr).unroll(ir);
  Var aj = acc.args()[0], ai = acc.args()[1];  // acc's own (column, row): out's row may be a split of it
  if (g.kc) {
    const int kc = g.kc;
    Func a = g.a, b = g.b;
    Var c("c"), tj("tj"), ti("ti"), uj("uj"), ui("ui");
    RVar rko("rko"), rki("rki");
    B.s(acc).compute_at(out, jo).store_in(MemoryType::GPUShared).bound_extent(aj, tn).bound_extent(ai, tm);
    if (batch) B.s(acc).bound_extent(*batch, 1);
    B.s(acc).tile(aj, ai, tj, ti, uj, ui, 4, 4).gpu_threads(tj, ti).unroll(uj).unroll(ui);
    B.s(acc.update()).split(rk, rko, rki, kc);
    Func part = acc.update().rfactor(rko, c);  // part(j, i[, b], c): one chunk's sum
    B.note(funcName(part.name()) + " = " + funcName(acc.name()) + ".update().rfactor(" + rko.name() + ", c): one K chunk's sum per thread");
    B.s(acc.update()).tile(aj, ai, tj, ti, uj, ui, 4, 4).reorder(uj, ui, tj, ti, rko).gpu_threads(tj, ti).unroll(uj).unroll(ui);
    Var pj = part.args()[0], pi = part.args()[1];
    B.s(part).compute_at(acc, tj).store_in(MemoryType::Register).bound_extent(pj, 4).bound_extent(pi, 4).unroll(pj).unroll(pi);
    B.s(part.update()).reorder(pj, pi, rki).unroll(pj).unroll(pi).unroll(rki);
    // The chunk's operand tiles, copied by the block's threads (tn/4 x tm/4 of them).
    Var bj = b.args()[0], bk = b.args()[1], ak = a.args()[0], ar = a.args()[1];
    B.s(b).compute_at(acc, rko).store_in(MemoryType::GPUShared).bound_extent(bj, tn).bound_extent(bk, kc);
    B.s(b).tile(bj, bk, tj, ti, uj, ui, 4, std::max(1, kc / (tm / 4))).gpu_threads(tj, ti).unroll(uj).unroll(ui);
    B.s(a).compute_at(acc, rko).store_in(MemoryType::GPUShared).bound_extent(ak, kc).bound_extent(ar, tm);
    B.s(a).tile(ak, ar, tj, ti, uj, ui, std::max(1, kc / (tn / 4)), 4).gpu_threads(tj, ti).unroll(uj).unroll(ui);
    if (batch) B.s(a).bound_extent(a.args()[2], 1), B.s(b).bound_extent(b.args()[2], 1);
    return;
  }
  B.s(acc).compute_at(out, jt).store_in(MemoryType::Register).unroll(aj).unroll(ai);
  if (fullTiles) B.s(acc).bound_extent(aj, 4).bound_extent(ai, 4);
  B.s(acc.update()).reorder(aj, ai, rk).unroll(aj).unroll(ai);
}

void cpuStreamGemm(Builder &B, Func out, Func acc, Var j, Var i, RVar r, int rows, bool alongK, int tn, int vec,
                   bool parallel, TailStrategy tail) {
  Var jo("jo"), ji("ji"), io("io"), ii("ii");
  // Rows in groups of `rows` (a batch's decode step past a few rows): each column task runs its
  // groups one after another over its weight tile, cache-resident after the first.
  B.s(out).split(j, jo, ji, tn, tail).split(i, io, ii, rows, TailStrategy::GuardWithIf).reorder(ii, ji, io, jo);
  if (parallel) B.s(out).parallel(jo);
  Var aj = acc.args()[0], ai = acc.args()[1];
  B.s(acc).compute_at(out, io).bound_extent(aj, tn).bound_extent(ai, rows).unroll(ai);
  if (!alongK) {
    // For each k: the rows' activations (broadcast) times tn/vec weight vectors of row k.
    if (vec > 1) B.s(out).vectorize(ji, vec), B.s(acc).vectorize(aj, vec);
    B.s(acc.update()).reorder(aj, ai, r);
    if (vec > 1) B.s(acc.update()).vectorize(aj, vec);
    B.s(acc.update()).unroll(aj).unroll(ai).unroll(r, 2, TailStrategy::GuardWithIf);
    return;
  }
  // For each column: vec-lane partial sums over K for every row (each weight vector loaded
  // once for all rows), then a horizontal add. Consecutive columns are consecutive in memory,
  // so a task streams its tn x K block front to back.
  RVar ro("ro"), ri("ri");
  Var l("l");
  B.s(acc.update()).split(r, ro, ri, vec, TailStrategy::GuardWithIf);
  Func part = acc.update().rfactor(ri, l);
  B.note(funcName(part.name()) + " = " + funcName(acc.name()) + ".update().rfactor(ri, l): vec-lane partial sums along K");
  B.s(acc.update()).reorder(ri, ai, aj);
  Var pj = part.args()[0], pi = part.args()[1];  // part(j, i, l)
  B.s(part).compute_at(acc, aj).bound_extent(pj, 1).bound_extent(pi, rows).reorder_storage(l, pj, pi).reorder(l, pj, pi).unroll(pi);
  if (vec > 1) B.s(part).vectorize(l, vec);
  B.s(part.update()).reorder(l, pi, ro);
  if (vec > 1) B.s(part.update()).vectorize(l, vec);
  B.s(part.update()).unroll(pi).unroll(ro, 4, TailStrategy::GuardWithIf);
}

Expr panelRead(ImageParam W, const TensorDesc &d, Expr j, Expr k) {
  const int panels = (int)d.dims[0], w = (int)d.dims[2];  // static: [panels, K, w]
  return W(j % w, k, min(j / w, panels - 1));
}

namespace {
// One GEMM kernel: its algorithm, then the schedule its kiln.schedule names (GPU; CPU stream;
// CPU register blocks over K chunks; CPU register blocks), each a method.
struct MatmulKernel {
  Builder &B;
  const KernelSpec &k;
  const bool batch, lin;
  Var j{"j"}, i{"i"}, b{"b"}, kk{"kk"};
  ImageParam A, W;
  const int64_t K, N;
  Expr Kx, M;
  bool transposed = false, panels = false, stream = false, dot = false, hasBias = false, biasStart = false;
  WeightFormat quant = WeightFormat::f32;  // a linear's weight in quantized blocks (bytes [N, K / 32, block])
  RDom rq;                                 // quantized, streaming: (l, h, block), k = 32·block + 16·h + l
  bool factored = false;                   // quantized, streaming, f32 operands: the scales out of the sums
  RDom rb, rl;                             // factored: the blocks; the 16 lanes of the partial sums
  Func part{"part"}, Hb{"Hb"}, Sd{"Sd"}, Sm{"Sm"}, Sl{"Sl"}, Mt{"Mt"};  // factored: see sumsOfScaledBlocks
  int kc = 0;  // K in chunks of kc (CPU register blocks; 0: none)
  RDom r, rk, rc, rp;
  Func Ar{"Ar"}, Bt{"Bt"}, acc{"acc"}, out{"out"};
  Func Ap{"Ap"}, Wp{"Wp"};  // bf16_dot: the operands as bfloat16 pairs along K
  Func Qd{"Qd"}, Qm{"Qm"};  // a quantized weight's block scales and minimums (j, block), f32

  explicit MatmulKernel(Builder &B)
      : B(B), k(B.k), batch(mlir::isa<BatchMatMulOp>(B.k.source)), lin(mlir::isa<LinearOp>(B.k.source)), A(B.in[0]),
        W(B.in[1]), K(B.k.inputs[0].dims.back()), N(B.k.output.dims.back()) {
    Kx = K >= 0 ? Expr((int)K) : A.dim(0).extent();
    M = A.dim(1).extent();
    transposed = lin ? B.op<LinearOp>().getWeightLayout() == WeightLayoutKind::out_in
                     : batch ? B.op<BatchMatMulOp>().getTransposeB() : B.op<MatMulOp>().getTransposeB();
    panels = lin && B.op<LinearOp>().getWeightLayout() == WeightLayoutKind::panels;
    if (lin) quant = B.op<LinearOp>().getWeightFormat();
  }
  std::vector<Expr> withB(std::vector<Expr> v) const {
    if (batch) v.push_back(b);
    return v;
  }
  Expr epilogue(Expr v) const {  // the bias (where the sums did not start at it) and the activation
    if (hasBias && !biasStart) v = v + B.in[2](j);
    if (lin) v = activation(B.op<LinearOp>().getActivation(), v);
    return v;
  }

  /* THE ALGORITHM */
  void algorithm() {
    // Rows beyond M are only ever computed by the last register block's padding: clamp them.
    // Columns are clamped where tiles may overhang N: a dynamic N, and the GPU schedule's tiles,
    // which are computed whole.
    Expr row = clamp(i, 0, M - 1);
    stream = !B.gpu && B.sch.gemm == GemmEngine::stream;
    Expr col = N >= 0 && !B.gpu ? Expr(j) : clamp(j, 0, (transposed ? W.dim(1).extent() : W.dim(0).extent()) - 1);
    r = RDom(0, Kx, "r");
    if (quant != WeightFormat::f32) {
      if (B.gpu || batch || N < 0 || K < 0 || K % kQuantBlock)
        throw std::runtime_error("kernel " + k.kind + ": a quantized weight needs a CPU target, no batch and a static K of whole blocks");
      col = clamp(j, 0, (int)N - 1);  // a streaming tile may overhang N
    }
    // A weight in panels (kiln-prepack-weights) is read in place: column j is lane j % w of panel
    // j / w (clamped: a streaming tile of several panels may overhang the last one). A quantized
    // one is decoded from its block (what a register-block schedule packs per task).
    if (quant != WeightFormat::f32) {
      Var qb("qb");
      Qd(j, qb) = quantHalf(W, 0, qb, col);
      Qm(j, qb) = quant == WeightFormat::q4_1 ? quantHalf(W, 2, qb, col) : Expr(0.0f);
      Expr b = kk / kQuantBlock;
      Bt(j, kk) = gemmOperand(B, quantDecode(W, quant, col, b, (kk % kQuantBlock) / 16, kk % 16, Qd(j, b), Qm(j, b)));
    }
    else
      Bt(withB({j, kk})) = gemmWeight(B, panels ? panelRead(W, k.inputs[1], j, kk) : transposed ? W(withB({kk, col})) : W(withB({col, kk})));
    Ar(withB({kk, i})) = gemmOperand(B, A(withB({kk, row})));  // inlined on the CPU
    // K in chunks of k_chunk (a long K; CPU, register blocks): acc is one chunk's sum, out the
    // bias plus the chunks' sums in order.
    kc = !B.gpu && !stream && B.sch.k_chunk ? (int)*B.sch.k_chunk : 0;
    dot = B.sch.precision == OperandPrecision::bf16_dot;
    // A linear's sums start at its bias where every column tile is within N (sumsStartAtBias).
    hasBias = lin && k.inputs.size() > 2;
    biasStart = hasBias && !kc && sumsStartAtBias(B, N, B.sch.tile_n ? (int64_t)*B.sch.tile_n : 0);
    if (dot && (B.gpu || stream || kc || batch || B.sch.gemm != GemmEngine::register_block))
      throw std::runtime_error("kernel " + k.kind + ": precision = bf16_dot needs a CPU register-block GEMM without batch or k_chunk");
    factored = quant != WeightFormat::f32 && stream && (B.sch.precision == OperandPrecision::f32 || B.sch.precision == OperandPrecision::unset);
    if (factored) sumsOfScaledBlocks(col);
    else if (quant != WeightFormat::f32 && stream) sumsOfBlocks(col);
    else if (kc) sumsInKChunks();
    else if (dot) sumsOfBf16Pairs();
    else sums();
  }
  // A quantized weight, streamed (a decode step): the sums run over (l, h, block), so 16
  // consecutive weights of a block (its bytes l = 0..15, one nibble half or one half of q8_0's
  // int8) are one vector of 16 lanes, decoded in registers from the bytes as stored.
  void sumsOfBlocks(Expr col) {
    rq = RDom(0, 16, 0, 2, 0, (int)(K / kQuantBlock), "rq");
    Expr kx = rq.z * kQuantBlock + rq.y * 16 + rq.x;
    acc(j, i) = biasStart ? B.in[2](j) : Expr(0.0f);
    acc(j, i) += Ar(kx, i) * gemmOperand(B, quantWeight(W, quant, col, rq.z, rq.y, rq.x));
    out(j, i) = epilogue(acc(j, i));
  }
  // The same with f32 operands, the scales factored out: a block's weights are d·code (+ m), so
  // its share of a column's sum is d · Σ a·code (+ m · Σ a). part(l, j, i): 16-lane partial sums,
  // per block the two halves' a·code (16 lanes each) added, then scaled by d: one FMA per block
  // on the chain. The scales: each block's first 4 bytes copied (Hb: one 32-bit load a block),
  // then decoded from f16 16 blocks at a time (Sd, Sm). q4_1's minimums: Mt, the sum over blocks
  // of m times the block's sum of a (Sl, once per call), starts lane 0 of the partial sums (a
  // scalar FMA a block, off the vector units that bound the sums).
  void sumsOfScaledBlocks(Expr col) {
    const int nb = (int)(K / kQuantBlock);
    Var l("l"), qb("qb"), x("x");
    rb = RDom(0, nb, "rb");
    Hb(x, qb, j) = W(x, qb, col);
    Sd(qb, j) = halfFromBytes(Hb(0, qb, j), Hb(1, qb, j));
    Expr dot = Ar(rb * kQuantBlock + l, i) * quantCode(W, quant, col, rb, 0, l) +
               Ar(rb * kQuantBlock + 16 + l, i) * quantCode(W, quant, col, rb, 1, l);
    if (quant == WeightFormat::q4_1) {
      Sm(qb, j) = halfFromBytes(Hb(2, qb, j), Hb(3, qb, j));
      RDom r32(0, kQuantBlock, "r32");
      Sl(qb, i) = 0.0f;
      Sl(qb, i) += Ar(qb * kQuantBlock + r32, i);
      Mt(j, i) = 0.0f;
      Mt(j, i) += Sm(rb, j) * Sl(rb, i);
      part(l, j, i) = select(l == 0, Mt(j, i), 0.0f);
    } else {
      part(l, j, i) = 0.0f;
    }
    part(l, j, i) += Sd(rb, j) * dot;
    rl = RDom(0, 16, "rl");
    acc(j, i) = biasStart ? B.in[2](j) : Expr(0.0f);
    acc(j, i) += part(rl, j, i);
    out(j, i) = epilogue(acc(j, i));
  }
  // K in chunks: acc(j, i, ro) is chunk ro's sum; out the bias plus the chunks' sums in order.
  void sumsInKChunks() {
    if (batch || panels || K < 0 || (lin && B.op<LinearOp>().getActivation() != ActivationKind::none))
      throw std::runtime_error("kernel " + k.kind + ": k_chunk needs a static K, no batch, no panels and no activation");
    Var ro("ro");
    rk = RDom(0, kc, "rk");
    rk.where(ro * kc + rk < Kx);
    Expr kx = min(ro * kc + rk, Kx - 1);  // = ro·kc + rk where summed: the clamp only bounds the reads
    acc(j, i, ro) = 0.0f;
    acc(j, i, ro) += Ar(kx, i) * Bt(j, kx);
    rc = RDom(0, (Kx + kc - 1) / kc, "rc");
    out(j, i) = lin && k.inputs.size() > 2 ? B.in[2](j) : Expr(0.0f);
    out(j, i) += acc(j, i, rc);
  }
  // bf16_dot: both operands converted to bfloat16 (to nearest even) as pairs along K, k = 2·k2 +
  // e (a zero pair element past an odd K); acc sums f32(a)·f32(w) over (e, k2), which the
  // schedule turns into one vdpbf16ps lane per pair.
  void sumsOfBf16Pairs() {
    Var e("e"), k2("k2");
    Expr ka = 2 * k2 + e, kin = min(ka, Kx - 1);
    Ap(e, k2, i) = cast(BFloat(16), select(ka < Kx, Ar(kin, i), 0.0f));
    if (k.inputs[1].is_bf16)  // kept in bfloat16: its panels read as they are
      Wp(e, j, k2) = select(ka < Kx, panelRead(W, k.inputs[1], j, kin), cast(BFloat(16), 0.0f));
    else
      Wp(e, j, k2) = cast(BFloat(16), select(ka < Kx, Bt(j, kin), 0.0f));
    rp = RDom(0, 2, 0, (Kx + 1) / 2, "rp");
    acc(j, i) = biasStart ? B.in[2](j) : Expr(0.0f);
    acc(j, i) += cast<float>(Ap(rp.x, rp.y, i)) * cast<float>(Wp(rp.x, j, rp.y));
    out(j, i) = epilogue(acc(j, i));
  }
  void sums() {
    std::vector<Expr> accArgs = withB({j, i});
    if (biasStart) {
      acc(accArgs) = B.in[2](j);
    } else if (!B.gpu && !stream) {
      // No bias to start from (none, as in the LM head, or one a column tile would read past N):
      // the first product starts the sum and the rest of K follows, the same sums bit for bit,
      // with no zeroed register block.
      acc(accArgs) = Ar(withB({0, i})) * Bt(withB({j, 0}));
      r = RDom(1, Kx - 1, "r");
    } else {
      acc(accArgs) = 0.0f;
    }
    acc(accArgs) += Ar(withB({r, i})) * Bt(withB({j, r}));
    out(accArgs) = epilogue(acc(accArgs));
  }

  /* THE SCHEDULE: GPU
   * Block tiles of gpu_tile_n x gpu_tile_m, K staged in chunks of gpu_k_chunk (0: unstaged). A
   * transposed weight (pack = per_call) is transposed on the GPU once per call (gpu_tile 16 x
   * 16), so threads read along N; the root Bt is staged through a wrapper. */
  void scheduleGpu() {
    const bool perCall = B.sch.pack == Packing::per_call;
    if (perCall) {
      Var bx("bx"), by("by"), tx("tx"), ty("ty");
      B.s(Bt).compute_root().gpu_tile(j, kk, bx, by, tx, ty, 16, 16, TailStrategy::GuardWithIf);
    }
    GpuGemm g{B.need(B.sch.gpu_tile_n, "gpu_tile_n"), B.need(B.sch.gpu_tile_m, "gpu_tile_m"),
              B.need(B.sch.gpu_k_chunk, "gpu_k_chunk"), Ar, perCall ? Bt.in() : Bt};
    gpuGemm(B, out, acc, j, i, r, batch ? &b : nullptr, g);
  }

  /* THE SCHEDULE: CPU, gemm = stream (a decode step: tile_m rows, the static count or the bound of a few;
   * a batched step's rows past that in groups of tile_m, each column task's groups in turn)
   * Each weight element is read once, in place: column tiles of tile_n are the threads' tasks;
   * an [N, K] weight (the tied LM head) is read along K with vec-lane partial sums per column,
   * a [K, N] one as tile_n-wide row segments, a weight in panels panel after panel. No copy.
   * Tiles of panels start at whole panels (GuardWithIf): a shifted tile would read them
   * unaligned. */
  void scheduleStream() {
    const int rows = B.need(B.sch.tile_m, "tile_m");  // the rows computed together (a group's; the last one's clamped)
    if (batch) throw std::runtime_error("kernel " + k.kind + ": gemm = stream takes no batch");
    if (factored) return scheduleScaledBlocks(rows);
    if (quant != WeightFormat::f32) return scheduleQuantStream(rows);
    cpuStreamGemm(B, out, acc, j, i, r, rows, transposed, B.need(B.sch.tile_n, "tile_n"), B.vec(), B.parallel(),
                  panels ? TailStrategy::GuardWithIf : TailStrategy::ShiftInwards);
  }

  /* THE SCHEDULE: CPU, gemm = stream, a quantized weight
   * Column tiles of tile_n are the threads' tasks; for each column, 16-lane partial sums over
   * its blocks for every row (each block's bytes loaded once for all rows, decoded in
   * registers), then a horizontal add. A task streams its tile_n rows of blocks front to back:
   * the weight's bytes are read once, as stored. */
  void scheduleQuantStream(int rows) {
    const int tn = B.need(B.sch.tile_n, "tile_n");
    Var jo("jo"), ji("ji"), io("io"), ii("ii"), l("l");
    B.s(out).split(j, jo, ji, tn, TailStrategy::GuardWithIf).split(i, io, ii, rows, TailStrategy::GuardWithIf).reorder(ii, ji, io, jo);
    if (B.parallel()) B.s(out).parallel(jo);
    B.s(acc).compute_at(out, io).bound_extent(j, tn).bound_extent(i, rows).unroll(i);
    Func part = acc.update().rfactor(rq.x, l);
    B.note(funcName(part.name()) + " = " + funcName(acc.name()) + ".update().rfactor(rq.x, l): 16-lane partial sums over the blocks");
    B.s(acc.update()).reorder(rq.x, i, j);
    Var pj = part.args()[0], pi = part.args()[1];  // part(j, i, l)
    const int vec = std::min(16, B.vec());
    B.s(part).compute_at(acc, j).bound_extent(pj, 1).bound_extent(pi, rows).reorder_storage(l, pj, pi).reorder(l, pj, pi).unroll(pi);
    if (vec > 1) B.s(part).vectorize(l, vec);
    B.s(part.update()).reorder(l, pi, rq.y, rq.z);
    if (vec > 1) B.s(part.update()).vectorize(l, vec);
    B.s(part.update()).unroll(pi).unroll(rq.y);
  }

  /* THE SCHEDULE: CPU, gemm = stream, a quantized weight, f32 operands (sumsOfScaledBlocks)
   * Column tiles of tile_n are the threads' tasks, streaming their rows of blocks front to back
   * in groups of col_group columns; per column, the 16-lane partial sums over its blocks for
   * every row (each block's bytes loaded once for all rows), then a tree of adds. q4_1's block
   * sums of a once per call, the minimums' sums per group. */
  void scheduleScaledBlocks(int rows) {
    const int tn = B.need(B.sch.tile_n, "tile_n");
    Var jo("jo"), ji("ji"), io("io"), ii("ii");
    B.s(out).split(j, jo, ji, tn, TailStrategy::GuardWithIf).split(i, io, ii, rows, TailStrategy::GuardWithIf).reorder(ii, ji, io, jo);
    if (B.parallel()) B.s(out).parallel(jo);
    B.s(acc).compute_at(out, io).bound_extent(j, tn).bound_extent(i, rows).unroll(i);
    // col_group columns at a time (their chains of partial sums interleaved), each group's scales
    // decoded just before its blocks are summed.
    const int G = B.sch.col_group ? (int)*B.sch.col_group : 1;
    if (tn % G) throw std::runtime_error("kernel " + k.kind + ": col_group must divide tile_n");
    Var jg("jg"), jj("jj");
    B.s(acc.update()).split(j, jg, jj, G).reorder(rl, i, jj, jg).atomic().vectorize(rl).unroll(i).unroll(jj);
    Var pl = part.args()[0], pj = part.args()[1], pi = part.args()[2];
    const int vec = std::min(16, B.vec());
    B.s(part).compute_at(acc, jg).bound_extent(pj, G).bound_extent(pi, rows).unroll(pi).unroll(pj);
    B.s(part.update()).reorder(pl, pj, pi, rb.x).unroll(pi).unroll(pj);
    if (vec > 1) {
      B.s(part).vectorize(pl, vec);
      B.s(part.update()).vectorize(pl, vec);
    }
    // The group's scales: its blocks' first 4 bytes (one load a block: the group's first touch of
    // its bytes), then the f16 decoded over (block, column) as 16-lane vectors; q4_1's minimums'
    // term (Mt) too. Tried and not kept (SmolLM2's decode step, 2 threads): the scales of the
    // whole task decoded in a pass before its sums (the tile then read twice, the second time
    // from beyond L1: 10.6-11.0 against 9.6-9.8 ms a token), prefetching the next group's bytes
    // (Halide prefetch: 10.6-13.1 ms), and the next task's (1 ms slower).
    Var hx = Hb.args()[0], hj = Hb.args()[2], sf("sf");
    B.s(Hb).compute_at(acc, jg).bound_extent(hx, 4).bound_extent(hj, G).vectorize(hx);
    for (Func f : quant == WeightFormat::q4_1 ? std::vector<Func>{Sd, Sm} : std::vector<Func>{Sd}) {
      Var fq = f.args()[0], fj = f.args()[1];
      B.s(f).compute_at(acc, jg).bound_extent(fj, G).fuse(fq, fj, sf).vectorize(sf, 16, TailStrategy::GuardWithIf);
    }
    if (quant == WeightFormat::q4_1) {
      B.s(Sl).compute_root();
      B.s(Mt).compute_at(acc, jg).bound_extent(Mt.args()[0], G).bound_extent(Mt.args()[1], rows);
      B.s(Mt.update()).reorder(rb.x, Mt.args()[1], Mt.args()[0]);
    }
  }

  /* THE SCHEDULE: CPU, K in chunks
   * Each column task (tile_n columns) packs one chunk's panel (k_chunk x tile_n) at a time and
   * runs every row tile's register blocks over it, adding the chunk's sums into its columns of
   * out (a tile_n-wide strip of out, L2-resident). */
  void scheduleKChunks(int vec, int tn, int tm, int tr, bool columnTasks) {
    if (!columnTasks || B.sch.pack != Packing::per_task)
      throw std::runtime_error("kernel " + k.kind + ": k_chunk needs column tasks packing per task");
    Var jo("jo"), ji("ji"), io("io"), ii("ii"), yi("yi"), yii("yii");
    const TailStrategy g = TailStrategy::GuardWithIf;
    B.vectorize(out, j, N);
    if (B.parallel()) B.s(out).parallel(i);
    B.s(out.update()).split(j, jo, ji, tn, g).split(i, io, ii, tr, g).split(ii, yi, yii, tm, g)
        .reorder(ji, yii, yi, io, rc, jo).vectorize(ji, vec).unroll(yii);
    if (B.parallel()) B.s(out.update()).parallel(jo);
    B.s(Bt).compute_at(out, rc).vectorize(j, vec, g);
    Var ro = acc.args()[2];
    B.s(acc).compute_at(out, yi).bound_extent(i, tm).bound_extent(j, tn).bound_extent(ro, 1).vectorize(j, vec).unroll(i);
    B.s(acc.update()).reorder(j, i, rk).vectorize(j, vec).unroll(j).unroll(i);
  }

  /* THE SCHEDULE: CPU (a GEMM micro-kernel in Halide's terms)
   *   * out is tiled into tile_n columns x tile_rows rows, row tiles inside column tiles, so a
   *     weight panel (K x tile_n, L2-sized) is reused by every row tile while the activations
   *     stream; with column_tasks the column tiles are the parallel tasks (each packing its
   *     panel once), otherwise tiles (and batches) are fused into the tasks;
   *   * inside a tile, a register block of tile_m rows x tile_n columns accumulates over all of
   *     K with the loops fully unrolled (tile_n/vec x tile_m vector accumulators), k unrolled by
   *     k_unroll (unset: 2);
   *   * the register block always has tile_m rows (bound_extent), so a row tail recomputes
   *     clamped rows instead of losing the unrolling; columns shift inwards when N >= tile_n;
   *   * short inputs get task tiles of 1, 2, 4... register blocks (specializations on M):
   *     GuardWithIf keeps an inner split's full trip count, so a 32-row tile would compute 8
   *     register blocks for a one-row (decode) input;
   *   * pack = per_task: the weight panel (transposed from [N, K] where it is stored so) is
   *     packed once per task, so the inner loop reads contiguous vectors from both layouts;
   *     pack = at_load: the weight is kept in panels of tile_n columns, a register block reads
   *     one in place; column tiles start at whole panels (GuardWithIf). */
  void scheduleCpu() {
    const int vec = B.vec(), tn = B.need(B.sch.tile_n, "tile_n"), tm = B.need(B.sch.tile_m, "tile_m"),
              tr = B.need(B.sch.tile_rows, "tile_rows");
    const bool columnTasks = B.need(B.sch.column_tasks, "column_tasks") != 0;
    if (tn % vec || tr % tm) throw std::runtime_error("kernel " + k.kind + ": tile_n must be a multiple of vec and tile_rows of tile_m");
    if (kc) return scheduleKChunks(vec, tn, tm, tr, columnTasks);
    Var jo("jo"), ji("ji"), io("io"), ii("ii"), yi("yi"), yii("yii"), t("t");
    TailStrategy tj = N >= tn && !panels ? TailStrategy::ShiftInwards : TailStrategy::GuardWithIf;
    Var par = columnTasks ? jo : t;
    auto tileRows = [&](Stage st, int rows) {
      auto ls = B.s(st);
      ls.split(j, jo, ji, tn, tj).split(i, io, ii, rows, TailStrategy::GuardWithIf).reorder(ji, ii, io, jo);
      if (!columnTasks) {
        ls.fuse(io, jo, t);
        if (batch) ls.fuse(t, b, t);
      }
      if (B.parallel()) ls.parallel(par);
      ls.split(ii, yi, yii, tm, TailStrategy::GuardWithIf);
      if (vec > 1) ls.vectorize(ji, vec, TailStrategy::GuardWithIf);
    };
    for (int rows = tm; rows < tr; rows *= 2) {
      B.note("out.specialize(M <= " + std::to_string(rows) + ")");
      tileRows(out.specialize(M <= rows), rows);
    }
    tileRows(out, tr);
    if (dot) return scheduleBf16Dot(tn, tm, columnTasks ? io : t, par, yi);
    if (B.sch.pack == Packing::per_task) {
      B.s(Bt).compute_at(out, par);
      if (vec > 1) B.s(Bt).vectorize(j, vec, TailStrategy::GuardWithIf);
      if (quant != WeightFormat::f32) {  // each block's scale (and minimum) decoded once per task, not per weight
        B.s(Qd).compute_at(out, par);
        if (vec > 1) B.s(Qd).vectorize(Qd.args()[0], vec, TailStrategy::GuardWithIf);
        if (quant == WeightFormat::q4_1) {
          B.s(Qm).compute_at(out, par);
          if (vec > 1) B.s(Qm).vectorize(Qm.args()[0], vec, TailStrategy::GuardWithIf);
        }
      }
    } else if (B.sch.pack != (panels ? Packing::at_load : Packing::none)) {
      throw std::runtime_error("kernel " + k.kind + (panels ? ": a weight in panels is read at_load"
                                                            : ": a CPU GEMM packs its weight per_task or not at all"));
    }
    B.s(acc).compute_at(out, yi).bound_extent(i, tm).bound_extent(j, tn);
    if (vec > 1) B.s(acc).vectorize(j, vec);
    B.s(acc).unroll(i);
    B.s(acc.update()).reorder(j, i, r);
    if (vec > 1) B.s(acc.update()).vectorize(j, vec);
    B.s(acc.update()).unroll(j).unroll(i);
    if (int ku = B.sch.k_unroll ? (int)*B.sch.k_unroll : 2; ku > 1) B.s(acc.update()).unroll(r, ku, TailStrategy::GuardWithIf);
  }

  /* bf16_dot: each task converts its weight columns to a bfloat16 panel of pairs (e, j, k2) (so
   * a register block reads 16 columns' pairs as one 32-lane vector, whatever the weight's layout
   * or packing), each row tile its rows' activations to pairs (e, k2, i); the update is
   * vectorized over the pair atomically (a 2-to-1 vector reduction) and over 16 columns: Halide
   * emits vdpbf16ps (checked in the kernel's object by precision_test). `rowTile`, `task` and
   * `block`: scheduleCpu's loops of a row tile, a task and a register block. */
  void scheduleBf16Dot(int tn, int tm, Var rowTile, Var task, Var block) {
    if (tn % 16) throw std::runtime_error("kernel " + k.kind + ": precision = bf16_dot needs tile_n in whole 16-lane vectors");
    B.s(Wp).compute_at(out, task).bound_extent(j, tn).vectorize(j, 16).unroll(Wp.args()[0]);
    B.s(Ap).compute_at(out, rowTile).vectorize(Ap.args()[1], 16, TailStrategy::GuardWithIf).unroll(Ap.args()[0]);
    B.s(acc).compute_at(out, block).bound_extent(i, tm).bound_extent(j, tn).vectorize(j, 16).unroll(i);
    B.s(acc.update()).reorder(rp.x, j, i, rp.y).atomic().vectorize(rp.x).vectorize(j, 16).unroll(j).unroll(i);
    if (int ku = B.sch.k_unroll ? (int)*B.sch.k_unroll : 2; ku > 1) B.s(acc.update()).unroll(rp.y, ku, TailStrategy::GuardWithIf);
  }
};
}  // namespace

Func buildMatmul(Builder &B) {
  MatmulKernel m(B);
  m.algorithm();
  if (B.gpu) m.scheduleGpu();
  else if (m.stream) m.scheduleStream();
  else m.scheduleCpu();
  return m.out;
}

}  // namespace kiln::codegen
