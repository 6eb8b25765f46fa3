// Matmul.cpp - linear, matmul and batch_matmul: out(j, i[, b]) = act(sum_k A(k, i[, b]) B(j, k[, b]) + bias(j)),
// and the GPU GEMM schedule the FFN shares.
#include "Kernels.h"

namespace kiln::codegen {

int gpuKChunk(int64_t K, int64_t M) {
  if (M >= 0 && M < 32) return 0;
  for (int kc : {32, 16, 8, 4})
    if (K > 0 && K % kc == 0) return kc;
  return 0;
}

// GPU GEMM schedule: output tiles of tn columns x 32 rows per block; tn/4 x 8 threads, each
// with a 4 x 4 block of the output.
//
// With `stage` (a static K that kc divides, operands read through Funcs with clamped indices):
// K runs in chunks of kc inside the block. Per chunk the block's threads copy the chunk's
// operand tiles (kc x 32 rows of A, tn columns x kc of B) into shared memory, then each thread
// sums its 4 x 4 block over the chunk in registers (acc's update rfactor'ed over the chunks) and
// adds it to the block's accumulator tile in shared memory. Every tile, edge tiles included, is
// computed whole (bound_extent): the operand Funcs clamp their indices.
//
// Without: each thread's 4 x 4 accumulators stay in registers over all of K and the operands are
// read through the caches. fullTiles: every thread computes its whole 4 x 4 block, edge tiles
// included: needed where out's rows are a split of a dynamic-sized chunk, and safe only where
// every operand read is clamped (the FFN's packed panels and clamped input rows).
void gpuGemm(Builder &B, Func out, Func acc, Var j, Var i, RVar rk, const Var *batch, int64_t N, bool fullTiles,
             GpuStage *stage) {
  int tn = 64;
  if (N >= 0)
    while (tn > 16 && tn / 2 >= N) tn /= 2;
  Var jo("jo"), io("io"), ji("ji"), ii("ii"), jt("jt"), it("it"), jr("jr"), ir("ir");
  B.s(out).tile(j, i, jo, io, ji, ii, tn, 32, TailStrategy::GuardWithIf).tile(ji, ii, jt, it, jr, ir, 4, 4, TailStrategy::GuardWithIf);
  if (batch) B.s(out).gpu_blocks(jo, io, *batch);
  else B.s(out).gpu_blocks(jo, io);
  B.s(out).gpu_threads(jt, it).unroll(jr).unroll(ir);
  Var aj = acc.args()[0], ai = acc.args()[1];  // acc's own (column, row): out's row may be a split of it
  if (stage) {
    const int kc = stage->kc;
    Var c("c"), tj("tj"), ti("ti"), uj("uj"), ui("ui");
    RVar rko("rko"), rki("rki");
    B.s(acc).compute_at(out, jo).store_in(MemoryType::GPUShared).bound_extent(aj, tn).bound_extent(ai, 32);
    if (batch) B.s(acc).bound_extent(*batch, 1);
    B.s(acc).tile(aj, ai, tj, ti, uj, ui, 4, 4).gpu_threads(tj, ti).unroll(uj).unroll(ui);
    B.s(acc.update()).split(rk, rko, rki, kc);
    Func part = acc.update().rfactor(rko, c);  // part(j, i[, b], c): one chunk's sum
    B.note(funcName(part.name()) + " = " + funcName(acc.name()) + ".update().rfactor(" + rko.name() + ", c): one K chunk's sum per thread");
    B.s(acc.update()).tile(aj, ai, tj, ti, uj, ui, 4, 4).reorder(uj, ui, tj, ti, rko).gpu_threads(tj, ti).unroll(uj).unroll(ui);
    Var pj = part.args()[0], pi = part.args()[1];
    B.s(part).compute_at(acc, tj).store_in(MemoryType::Register).bound_extent(pj, 4).bound_extent(pi, 4).unroll(pj).unroll(pi);
    B.s(part.update()).reorder(pj, pi, rki).unroll(pj).unroll(pi).unroll(rki);
    // The chunk's operand tiles, copied by the block's threads (tn/4 x 8 of them).
    Var bj = stage->b.args()[0], bk = stage->b.args()[1], ak = stage->a.args()[0], ar = stage->a.args()[1];
    B.s(stage->b).compute_at(acc, rko).store_in(MemoryType::GPUShared).bound_extent(bj, tn).bound_extent(bk, kc);
    B.s(stage->b).tile(bj, bk, tj, ti, uj, ui, 4, std::max(1, kc / 8)).gpu_threads(tj, ti).unroll(uj).unroll(ui);
    B.s(stage->a).compute_at(acc, rko).store_in(MemoryType::GPUShared).bound_extent(ak, kc).bound_extent(ar, 32);
    B.s(stage->a).tile(ak, ar, tj, ti, uj, ui, std::max(1, kc / (tn / 4)), 4).gpu_threads(tj, ti).unroll(uj).unroll(ui);
    if (batch) B.s(stage->a).bound_extent(stage->a.args()[2], 1), B.s(stage->b).bound_extent(stage->b.args()[2], 1);
    return;
  }
  B.s(acc).compute_at(out, jt).store_in(MemoryType::Register).unroll(aj).unroll(ai);
  if (fullTiles) B.s(acc).bound_extent(aj, 4).bound_extent(ai, 4);
  B.s(acc.update()).reorder(aj, ai, rk).unroll(aj).unroll(ai);
}

Func buildMatmul(Builder &B) {
  const KernelSpec &k = B.k;
  bool batch = k.kind == "batch_matmul", lin = k.kind == "linear";
  Var j("j"), i("i"), b("b"), kk("kk");
  ImageParam A = B.in[0], W = B.in[1];
  int64_t K = k.inputs[0].dims.back();
  Expr Kx = K >= 0 ? Expr((int)K) : A.dim(0).extent();
  Expr M = A.dim(1).extent();
  int64_t N = k.output.dims.back();
  bool transposed = lin ? k.gets("layout") == "out_in" : k.geti("transpose_b", 0) != 0;
  auto withB = [&](std::vector<Expr> v) {
    if (batch) v.push_back(b);
    return v;
  };

  /* THE ALGORITHM */
  // Rows beyond M are only ever computed by the last register block's padding: clamp them.
  // Columns are clamped where tiles may overhang N: a dynamic N, and the GPU's whole tiles.
  Expr row = clamp(i, 0, M - 1);
  Expr col = N >= 0 && !B.gpu ? Expr(j) : clamp(j, 0, (transposed ? W.dim(1).extent() : W.dim(0).extent()) - 1);
  RDom r(0, Kx, "r");
  Func Ar("Ar"), Bt("Bt"), acc("acc"), out("out");
  Bt(withB({j, kk})) = transposed ? W(withB({kk, col})) : W(withB({col, kk}));
  Ar(withB({kk, i})) = A(withB({kk, row}));  // inlined on the CPU
  std::vector<Expr> accArgs = withB({j, i});
  acc(accArgs) = 0.0f;
  acc(accArgs) += Ar(withB({r, i})) * Bt(withB({j, r}));
  Expr v = acc(accArgs);
  if (lin && k.inputs.size() > 2) v = v + B.in[2](j);
  if (lin) v = activation(k.gets("act", "none"), v);
  out(accArgs) = v;

  /* THE SCHEDULE: GPU */
  if (B.gpu) {
    if (transposed) {  // the [N, K] weight transposed once per call, so threads read along N
      Var bx("bx"), by("by"), tx("tx"), ty("ty");
      B.s(Bt).compute_root().gpu_tile(j, kk, bx, by, tx, ty, 16, 16, TailStrategy::GuardWithIf);
    }
    // A root Bt is staged through a wrapper.
    GpuStage stage{Ar, transposed ? Bt.in() : Bt, gpuKChunk(K, k.inputs[0].dims[k.inputs[0].dims.size() - 2])};
    gpuGemm(B, out, acc, j, i, r, batch ? &b : nullptr, N, false, stage.kc ? &stage : nullptr);
    return out;
  }

  /* THE SCHEDULE: CPU (a GEMM micro-kernel in Halide's terms)
   *   * out is tiled into tn columns x tr rows; tiles (and batches) run in parallel;
   *   * inside a tile, a register block of 4 rows x tn columns accumulates over all of K with the
   *     loops fully unrolled (tn/vec x 4 vector accumulators), k unrolled by 2;
   *   * the register block always has 4 rows (bound_extent), so a row tail recomputes clamped
   *     rows instead of losing the unrolling; columns shift inwards when N is static;
   *   * a weight stored [N, K] (x.Wt) is transposed into a K x tn panel once per tile, so the
   *     inner loop reads contiguous vectors from both layouts. */
  int vec = B.vec;
  int tn = (int)k.geti("s.tile_n", 4 * vec), tm = (int)k.geti("s.tile_m", 4), tr = 8 * tm;
  if (N >= 0) {
    while (vec > 1 && vec > N) vec /= 2;
    tn = std::max(vec, std::min<int>(tn, (int)(N / vec) * vec));
  }
  tn = std::max(vec, tn / vec * vec);
  Var jo("jo"), ji("ji"), io("io"), ii("ii"), yi("yi"), yii("yii"), t("t");
  TailStrategy tj = N >= tn ? TailStrategy::ShiftInwards : TailStrategy::GuardWithIf;
  // Row tiles run inside column tiles, so a weight panel (K x tn, L2-sized) is reused by every
  // row tile while the activations stream. With enough column tiles the parallel loop is the
  // column loop and the panel is packed once per column tile; otherwise tiles are fused.
  bool panelParallel = N >= 0 && N / tn >= 8 && !batch;
  Var par = panelParallel ? jo : t;
  // GuardWithIf keeps an inner split's full trip count, so a 32-row tile would compute 8
  // register blocks for a one-row (decode) input: short inputs get tiles of 1, 2, 4... blocks.
  auto tileRows = [&](Stage st, int rows) {
    auto ls = B.s(st);
    ls.split(j, jo, ji, tn, tj).split(i, io, ii, rows, TailStrategy::GuardWithIf).reorder(ji, ii, io, jo);
    if (!panelParallel) {
      ls.fuse(io, jo, t);
      if (batch) ls.fuse(t, b, t);
    }
    if (k.geti("s.parallel", 1)) ls.parallel(par);
    ls.split(ii, yi, yii, tm, TailStrategy::GuardWithIf);
    if (vec > 1) ls.vectorize(ji, vec, TailStrategy::GuardWithIf);
  };
  for (int rows = tm; rows < tr; rows *= 2) {
    B.note("out.specialize(M <= " + std::to_string(rows) + ")");
    tileRows(out.specialize(M <= rows), rows);
  }
  tileRows(out, tr);
  // Pack a panel when the weight is transposed, or when a long K makes the in-place panel (K
  // rows of tn floats, one row per weight row) stream badly from L2.
  bool packed = transposed || N < 0 || K < 0 || K >= 1024;
  if (packed) {
    B.s(Bt).compute_at(out, par);
    if (vec > 1) B.s(Bt).vectorize(j, vec, TailStrategy::GuardWithIf);
  }
  B.s(acc).compute_at(out, yi).bound_extent(i, tm).bound_extent(j, tn);
  if (vec > 1) B.s(acc).vectorize(j, vec);
  B.s(acc).unroll(i);
  B.s(acc.update()).reorder(j, i, r);
  if (vec > 1) B.s(acc.update()).vectorize(j, vec);
  B.s(acc.update()).unroll(j).unroll(i).unroll(r, 2, TailStrategy::GuardWithIf);
  return out;
}

}  // namespace kiln::codegen
