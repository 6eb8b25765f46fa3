// Ffn.cpp - the chunked feed-forward network:
//   out(j, i) = sum_f act(sum_k x(k, i) W1(f, k) + b1(f)) W2(j, f) + b2(j) [+ res(j, i)]
// The intermediate h [chunk x d_ff] exists for one chunk of rows at a time. The chunk is
// kiln-chunk-ffn's decision, the tiles kiln-tile-ops' (the kernel's kiln.schedule).
#include "Kernels.h"

namespace kiln::codegen {

namespace {
// One FFN kernel: its algorithm, then the schedule its kiln.schedule names (GPU; CPU stream;
// CPU register blocks, with bf16_dot or without), each a method.
struct FfnKernel {
  Builder &B;
  const KernelSpec &k;
  FfnOp op;
  ImageParam X, W1, B1, W2, B2;
  const int d, dff, dout, chunk;
  bool oi1, oi2, pan1, pan2;
  Expr M;
  Var j{"j"}, i{"i"}, f{"f"}, kk{"kk"}, pi{"pi"}, po{"po"}, e{"e"}, k2{"k2"};
  RDom r1, r2, q1, q2;
  int tn1, tn2;  // the panels' widths: the GEMMs' column tiles (the CPU's register blocks, the GPU's block tiles)
  bool stream = false, dot = false;
  Func P1{"P1"}, P2{"P2"}, acc1{"acc1"}, h{"h"}, acc2{"acc2"}, out{"out"};
  Func Xr{"Xr"}, W1p{"W1p"}, Hr{"Hr"}, W2p{"W2p"};   // the GEMMs' operands
  Func Xp{"Xp"}, Hp{"Hp"}, W1b{"W1b"}, W2b{"W2b"};   // bf16_dot: the operands as bfloat16 pairs

  explicit FfnKernel(Builder &B)
      : B(B), k(B.k), op(B.op<FfnOp>()), X(B.in[0]), W1(B.in[1]), B1(B.in[2]), W2(B.in[3]), B2(B.in[4]),
        d((int)B.k.inputs[0].dims[1]), dff((int)B.k.inputs[2].dims[0]), dout((int)B.k.output.dims[1]),
        chunk(B.need(B.sch.chunk, "chunk")) {
    oi1 = op.getLayout1() == WeightLayoutKind::out_in, oi2 = op.getLayout2() == WeightLayoutKind::out_in;
    pan1 = op.getLayout1() == WeightLayoutKind::panels, pan2 = op.getLayout2() == WeightLayoutKind::panels;
    M = X.dim(1).extent();
    r1 = RDom(0, d, "r1"), r2 = RDom(0, dff, "r2");
    tn2 = B.gpu ? B.need(B.sch.gpu_tile_n, "gpu_tile_n") : B.need(B.sch.tile_n, "tile_n");
    tn1 = B.gpu ? B.need(B.sch.gpu_hidden_tile_n, "gpu_hidden_tile_n") : B.need(B.sch.hidden_tile_n, "hidden_tile_n");
  }

  /* THE ALGORITHM */
  void algorithm() {
    // A weight kept in panels since load (kiln-prepack-weights) is read in place; others are
    // packed once per call into panels: P(pi, kk, po) is column po * tn + pi of row kk, so the
    // panel a column tile reads (K x tn) is contiguous, as for a linear.
    Expr c1 = min(po * tn1 + pi, dff - 1), c2 = min(po * tn2 + pi, dout - 1);
    P1(pi, kk, po) = pan1 ? W1(pi, kk, po) : oi1 ? W1(kk, c1) : W1(c1, kk);  // (unused with panels)
    P2(pi, kk, po) = pan2 ? W2(pi, kk, po) : oi2 ? W2(kk, c2) : W2(c2, kk);
    // The GEMMs' operands as Funcs (inlined on the CPU; staged through shared memory on the GPU).
    Xr(kk, i) = gemmOperand(B, X(kk, clamp(i, 0, M - 1)));
    // gemm = stream (a decode step): the weights are read in place, never packed.
    stream = !B.gpu && B.sch.gemm == GemmEngine::stream;
    if (stream && (oi1 || oi2)) throw std::runtime_error("kernel ffn: gemm = stream reads [in, out] weights only");
    W1p(f, kk) = gemmWeight(B, pan1 ? panelRead(W1, k.inputs[1], f, kk) : stream ? W1(f, kk) : P1(f % tn1, kk, f / tn1));
    dot = B.sch.precision == OperandPrecision::bf16_dot;
    if (dot && (B.gpu || stream)) throw std::runtime_error("kernel ffn: precision = bf16_dot needs a CPU register-block schedule");
    // The sums start at the biases where every column tile is within the columns (sumsStartAtBias).
    const bool start1 = sumsStartAtBias(B, dff, tn1), start2 = sumsStartAtBias(B, dout, tn2);
    Expr v = dot ? sumsOfBf16Pairs(start1, start2) : sums(start1, start2);
    if (!start2) v = v + B2(j);
    if (k.inputs.size() > 5) v = v + B.in[5](j, i);
    out(j, i) = v;
  }
  // h = act(x·W1 + b1), then the second GEMM's sum (without b2 where it does not start at it).
  Expr sums(bool start1, bool start2) {
    acc1(f, i) = start1 ? B1(f) : Expr(0.0f);
    acc1(f, i) += Xr(r1, i) * W1p(f, r1);
    h(f, i) = activation(op.getActivation(), start1 ? acc1(f, i) : acc1(f, i) + B1(f));
    Hr(kk, i) = gemmOperand(B, h(kk, i));
    W2p(j, kk) = gemmWeight(B, pan2 ? panelRead(W2, k.inputs[3], j, kk) : stream ? W2(j, kk) : P2(j % tn2, kk, j / tn2));
    acc2(j, i) = start2 ? B2(j) : Expr(0.0f);
    acc2(j, i) += Hr(r2, i) * W2p(j, r2);
    return acc2(j, i);
  }
  // bf16_dot (a CPU register-block FFN): both GEMMs' operands as bfloat16 pairs along K (k =
  // 2·k2 + e, a zero element past an odd K), the weights in panels of pairs (e, pi, k2, po)
  // converted once per call, the chunk's input and intermediate rows once per chunk; acc sums
  // f32(a)·f32(w) over (e, k2), one vdpbf16ps lane per pair. The accumulators are over (lane,
  // panel, row): a register block reads its pair panel as vectors (indexing by f % tn inside the
  // update made Halide 14 gather the last vector of each panel); h and out read them back by
  // f % tn and f / tn once per block.
  Expr sumsOfBf16Pairs(bool start1, bool start2) {
    q1 = RDom(0, 2, 0, (d + 1) / 2, "q1"), q2 = RDom(0, 2, 0, (dff + 1) / 2, "q2");
    Expr ka = 2 * k2 + e;
    auto bf16 = [&](Expr inRange, Expr v) {
      if (v.type().is_bfloat()) return select(inRange, v, cast(BFloat(16), 0.0f));  // a weight kept in bfloat16
      return cast(BFloat(16), select(inRange, v, 0.0f));
    };
    Xp(e, k2, i) = bf16(ka < d, Xr(min(ka, d - 1), i));
    W1b(e, pi, k2, po) = bf16(ka < d, P1(pi, min(ka, d - 1), po));
    acc1(pi, po, i) = start1 ? B1(po * tn1 + pi) : Expr(0.0f);
    acc1(pi, po, i) += cast<float>(Xp(q1.x, q1.y, i)) * cast<float>(W1b(q1.x, pi, q1.y, po));
    Expr s1 = acc1(f % tn1, f / tn1, i);
    h(f, i) = activation(op.getActivation(), start1 ? s1 : s1 + B1(f));
    Hr(kk, i) = gemmOperand(B, h(kk, i));
    W2p(j, kk) = gemmWeight(B, pan2 ? panelRead(W2, k.inputs[3], j, kk) : P2(j % tn2, kk, j / tn2));
    Hp(e, k2, i) = bf16(ka < dff, h(min(ka, dff - 1), i));
    W2b(e, pi, k2, po) = bf16(ka < dff, P2(pi, min(ka, dff - 1), po));
    acc2(pi, po, i) = start2 ? B2(po * tn2 + pi) : Expr(0.0f);
    acc2(pi, po, i) += cast<float>(Hp(q2.x, q2.y, i)) * cast<float>(W2b(q2.x, pi, q2.y, po));
    return acc2(j % tn2, j / tn2, i);
  }

  /* THE SCHEDULE: GPU
   * Chunks of rows in a host loop; per chunk h [rows, d_ff] on the device, then the second GEMM.
   * kiln-chunk-ffn picks GPU-sized chunks (1024 rows unless --ffn-chunk says otherwise): each
   * chunk's two GEMMs still fill the GPU, and h never exceeds chunk x d_ff. Inputs shorter than
   * a chunk are one chunk of their own length (the factor is min(L, chunk)). The weights are
   * packed into panels on the GPU once per call (pack = per_call), or read in place. */
  void scheduleGpu() {
    for (auto [P, packed] : {std::pair<Func, bool>{P1, !pan1}, {P2, !pan2}}) {
      if (!packed) continue;
      Var kp("kp"), bx("bx"), by("by"), tx("tx"), ty("ty");
      B.s(P).compute_root().fuse(kk, po, kp).gpu_tile(pi, kp, bx, by, tx, ty, 16, 16, TailStrategy::GuardWithIf);
    }
    Var ic("ic"), ir("ir");
    B.s(out).split(i, ic, ir, min(M, chunk), TailStrategy::GuardWithIf);
    B.s(h).compute_at(out, ic);
    const int tm = B.need(B.sch.gpu_tile_m, "gpu_tile_m");
    GpuGemm g1{tn1, tm, B.need(B.sch.gpu_hidden_k_chunk, "gpu_hidden_k_chunk"), Xr, W1p};
    GpuGemm g2{tn2, tm, B.need(B.sch.gpu_k_chunk, "gpu_k_chunk"), Hr, W2p};
    gpuGemm(B, h, acc1, f, i, r1, nullptr, g1);
    gpuGemm(B, out, acc2, j, ir, r2, nullptr, g2, /*fullTiles=*/true);
  }

  /* THE SCHEDULE: CPU, gemm = stream (a few static rows)
   * h [rows x d_ff] once, then the second GEMM, each a streaming GEMM whose column tiles are the
   * threads' tasks: every weight element read once per call, in place. */
  void scheduleStream() {
    const int rows = B.need(B.sch.tile_m, "tile_m");  // the rows, or their bound (M <= rows: Halide checks it)
    B.s(h).compute_root();
    cpuStreamGemm(B, h, acc1, f, i, r1, rows, false, B.need(B.sch.hidden_tile_n, "hidden_tile_n"),
                  B.need(B.sch.hidden_vec, "hidden_vec"), B.parallel(), pan1 ? TailStrategy::GuardWithIf : TailStrategy::ShiftInwards);
    cpuStreamGemm(B, out, acc2, j, i, r2, rows, false, tn2, B.vec(), B.parallel(),
                  pan2 ? TailStrategy::GuardWithIf : TailStrategy::ShiftInwards);
  }

  /* THE SCHEDULE: CPU
   * Chunks of rows run in parallel; within a chunk the intermediate h is computed once (a GEMM
   * with the same register blocks as a linear) and consumed by the second GEMM. The rows are
   * cut into as few chunks of at most `chunk` rows as they need, of equal length rounded up to
   * whole register blocks (a factor computed from M at run time): a register block's rows are
   * guarded, not its loop, so a chunk longer than its rows would compute every block of it
   * (M = 128 in chunks of 192 computed 32 blocks of the second GEMM for 22; M = 512 in chunks
   * of 336, 112 for 86). Column tiles of a weight in panels start at whole panels (GuardWithIf
   * where the panels do not divide the columns). */
  void scheduleCpu() {
    const int tm = B.need(B.sch.tile_m, "tile_m"), w2 = B.vec(), w1 = B.need(B.sch.hidden_vec, "hidden_vec");
    const bool par = B.parallel();
    Var io("io"), ii("ii"), jo("jo"), ji("ji"), yi("yi"), yii("yii");
    const int cap = std::max(chunk, tm);
    Expr nChunks = max((M + cap - 1) / cap, 1), perChunk = (M + nChunks - 1) / nChunks;
    Expr chunkRows = clamp((perChunk + tm - 1) / tm * tm, tm, (cap + tm - 1) / tm * tm);
    auto ls = B.s(out);
    ls.split(i, io, ii, chunkRows, TailStrategy::GuardWithIf)
        .split(j, jo, ji, tn2, (pan2 && dout % tn2) || dot ? TailStrategy::GuardWithIf : TailStrategy::ShiftInwards)
        .split(ii, yi, yii, tm, TailStrategy::GuardWithIf)
        .reorder(ji, yii, yi, jo, io);
    if (par) ls.parallel(io).parallel(jo);  // nested: short inputs are one chunk
    if (w2 > 1) ls.vectorize(ji, w2, TailStrategy::GuardWithIf);
    if (dot) return scheduleBf16Dot(tm, io, yi);
    B.s(acc2).compute_at(out, yi).bound_extent(i, tm).bound_extent(j, tn2);
    B.s(acc2.update()).reorder(j, i, r2);
    if (w2 > 1) B.s(acc2).vectorize(j, w2), B.s(acc2.update()).vectorize(j, w2);
    B.s(acc2).unroll(i);
    B.s(acc2.update()).unroll(j).unroll(i).unroll(r2, 2, TailStrategy::GuardWithIf);
    // The chunk's intermediate, itself a register-blocked GEMM.
    Var fo("fo"), fi("fi"), hy("hy"), hyy("hyy");
    B.s(h).compute_at(out, io)
        .split(f, fo, fi, tn1, pan1 && dff % tn1 ? TailStrategy::GuardWithIf : TailStrategy::ShiftInwards)
        .split(i, hy, hyy, tm, TailStrategy::GuardWithIf)
        .reorder(fi, hyy, hy, fo);
    if (par) B.s(h).parallel(fo);
    if (w1 > 1) B.s(h).vectorize(fi, w1, TailStrategy::GuardWithIf);
    B.s(acc1).compute_at(h, hy).bound_extent(i, tm).bound_extent(f, tn1);
    B.s(acc1.update()).reorder(f, i, r1);
    if (w1 > 1) B.s(acc1).vectorize(f, w1), B.s(acc1.update()).vectorize(f, w1);
    B.s(acc1).unroll(i);
    B.s(acc1.update()).unroll(f).unroll(i).unroll(r1, 2, TailStrategy::GuardWithIf);
    // The panels of weights not kept in panels are packed once per call (not once per chunk,
    // which would repeat the packing L/chunk times).
    if (B.sch.pack != (pan1 && pan2 ? Packing::at_load : Packing::per_call))
      throw std::runtime_error(std::string("kernel ffn: its weights are ") + (pan1 && pan2 ? "read at_load" : "packed per_call"));
    for (auto [P, w, packed] : {std::tuple<Func, int, bool>{P1, w1, !pan1}, {P2, w2, !pan2}}) {
      if (!packed) continue;
      B.s(P).compute_root();
      if (par) B.s(P).parallel(po);
      if (w > 1) B.s(P).vectorize(pi, w, TailStrategy::GuardWithIf);
    }
  }

  /* bf16_dot: scheduleCpu's tiles; each register block's update vectorized over the pair
   * (atomically: a 2-to-1 reduction) and 16 columns, which Halide emits as vdpbf16ps. The
   * weights' pair panels are made once per call (in parallel over panels), the chunk's input
   * rows and its intermediate's once per chunk. `chunkLoop` and `block`: scheduleCpu's loops of
   * a chunk and of a register block. */
  void scheduleBf16Dot(int tm, Var chunkLoop, Var block) {
    const bool par = B.parallel();
    if (tn1 % 16 || tn2 % 16) throw std::runtime_error("kernel ffn: precision = bf16_dot needs column tiles of whole 16-lane vectors");
    B.s(acc2).compute_at(out, block).bound_extent(i, tm).bound_extent(pi, tn2).bound_extent(po, 1).vectorize(pi, 16).unroll(i);
    B.s(acc2.update()).reorder(q2.x, pi, i, q2.y).atomic().vectorize(q2.x).vectorize(pi, 16).unroll(pi).unroll(i);
    // Column tiles start at whole panels (GuardWithIf): a block's accumulator is one panel's.
    Var fo("fo"), fi("fi"), hy("hy"), hyy("hyy");
    B.s(h).compute_at(out, chunkLoop)
        .split(f, fo, fi, tn1, TailStrategy::GuardWithIf)
        .split(i, hy, hyy, tm, TailStrategy::GuardWithIf)
        .reorder(fi, hyy, hy, fo);
    if (par) B.s(h).parallel(fo);
    B.s(h).vectorize(fi, 16, TailStrategy::GuardWithIf);
    B.s(acc1).compute_at(h, hy).bound_extent(i, tm).bound_extent(pi, tn1).bound_extent(po, 1).vectorize(pi, 16).unroll(i);
    B.s(acc1.update()).reorder(q1.x, pi, i, q1.y).atomic().vectorize(q1.x).vectorize(pi, 16).unroll(pi).unroll(i);
    B.s(Xp).compute_at(out, chunkLoop).vectorize(k2, 16, TailStrategy::GuardWithIf).unroll(e);
    B.s(Hp).compute_at(out, chunkLoop).vectorize(k2, 16, TailStrategy::GuardWithIf).unroll(e);
    if (par) B.s(Hp).parallel(i);
    for (Func Wb : {W1b, W2b}) {
      B.s(Wb).compute_root().vectorize(pi, 16, TailStrategy::GuardWithIf).unroll(e);
      if (par) B.s(Wb).parallel(po);
    }
  }
};
}  // namespace

Func buildFfn(Builder &B) {
  FfnKernel f(B);
  f.algorithm();
  if (B.gpu) f.scheduleGpu();
  else if (f.stream) f.scheduleStream();
  else f.scheduleCpu();
  return f.out;
}

}  // namespace kiln::codegen
