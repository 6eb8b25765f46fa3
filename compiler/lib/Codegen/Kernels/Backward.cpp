// Backward.cpp - the backward's column reductions: sums over rows into a parameter-shaped
// result. reduce_rows (a bias's gradient), weight_grad (a GEMM weight's: the sum over rows of
// dy ⊗ x), layer_norm_gamma_grad, and embedding_grad (rows added into their ids' rows).
// Every reduction runs in row order inside one task, so results do not depend on the thread
// count. CPU schedules; the GPU's come with GPU training.
#include "Kernels.h"

namespace kiln::codegen {
namespace {
void cpuOnly(Builder &B) {
  if (B.gpu) throw std::runtime_error("kernel " + B.k.kind + ": the backward's kernels have CPU schedules only (for now)");
}

// The rows of an input [..., d] (Halide (d, ...)): an RDom over every dim but the innermost.
RDom rowDom(ImageParam X, int rank) {
  Region r;
  for (int d = 1; d < rank; ++d) r.push_back(Range(0, X.dim(d).extent()));
  return RDom(r, "rr");
}
std::vector<Expr> at(Expr c, const RDom &rr) {
  std::vector<Expr> a{c};
  for (int i = 0; i < rr.dimensions(); ++i) a.push_back(rr[i]);
  return a;
}

// A column reduction's schedule: column strips of one vector as tasks, each strip reducing
// over the rows in order.
void columnStrips(Builder &B, Func out, Var c, const RDom &rr, int64_t width) {
  int w = (int)std::min<int64_t>(B.vec(), std::max<int64_t>(1, width));
  Var co("co"), ci("ci");
  B.vectorize(out, c, width);
  Stage u = out.update();
  std::vector<VarOrRVar> order{ci};
  for (int i = 0; i < rr.dimensions(); ++i) order.push_back(rr[i]);
  order.push_back(co);
  auto s = B.s(u);
  s.split(c, co, ci, w, width % w == 0 ? TailStrategy::RoundUp : TailStrategy::GuardWithIf);  // an update: no shift
  u.reorder(order);
  B.note("reorder(ci, rows..., co): each strip reduces its rows in order");
  s.vectorize(ci);
  if (B.parallel()) s.parallel(co);
}
}  // namespace

Func buildBackward(Builder &B) {
  const KernelSpec &k = B.k;
  cpuOnly(B);
  Func out("out");
  if (mlir::isa<ReduceRowsOp>(k.source)) {
    Var c("c");
    ImageParam X = B.in[0];
    RDom rr = rowDom(X, (int)k.inputs[0].dims.size());
    out(c) = 0.0f;
    out(c) += X(at(c, rr));
    columnStrips(B, out, c, rr, k.output.dims[0]);
    return out;
  }
  if (mlir::isa<LayerNormGammaGradOp>(k.source)) {  // the sum over rows of dy · x̂
    LayerNormGammaGradOp op = B.op<LayerNormGammaGradOp>();
    ImageParam X = B.in[0], G = B.in[2];
    int rank = (int)k.inputs[0].dims.size();
    std::vector<Var> rows = makeVars(rank);
    std::vector<Var> rest(rows.begin() + 1, rows.end());
    int64_t D = k.inputs[0].dims.back();
    RowStats st = layerNormStats(X, Expr((int)D), rest, op.getEpsilon().convertToFloat());
    Func mu = st.mu, rstd = st.rstd;
    Var c("c");
    RDom rr = rowDom(X, rank);
    std::vector<Expr> rrow;
    for (int i = 0; i < rr.dimensions(); ++i) rrow.push_back(rr[i]);
    out(c) = 0.0f;
    out(c) += G(at(c, rr)) * (X(at(c, rr)) - mu(rrow)) * rstd(rrow);
    // Per-row statistics first (row tasks), then the column strips.
    B.s(mu).compute_root();
    B.s(rstd).compute_root();
    if (rank > 1 && B.parallel()) {
      B.s(rstd).parallel(rest.back());
      B.s(mu).parallel(rest.back());
    }
    columnStrips(B, out, c, rr, D);
    return out;
  }
  if (mlir::isa<WeightGradOp>(k.source)) {
    // x [M, K], dy [M, N]; out_in: out [N, K] = dyᵀ·x; in_out: out [K, N] = xᵀ·dy. Halide's
    // output (i, j): i the contiguous dim, j the other; the sum runs over the M rows:
    // out(i, j) = Σ_m V(i, m) · S(j, m), V the operand along i (vectors), S along j.
    bool outIn = B.op<WeightGradOp>().getWeightLayout() == WeightLayoutKind::out_in;
    ImageParam X = B.in[0], G = B.in[1];
    ImageParam V = outIn ? X : G, S = outIn ? G : X;
    Var i("i"), j("j");
    Expr M = X.dim(1).extent();
    // Without kiln-tile-ops' tiles (a sequence-length side, or a contiguous side that is no
    // whole number of vectors): rows of columns over all M rows at once.
    if (!B.sch.tile_n) {
      RDom rm(0, M, "rm");
      Func acc("acc");
      acc(i, j) = 0.0f;
      acc(i, j) += V(i, rm) * S(j, rm);
      out(i, j) = acc(i, j);
      B.vectorize(out, i, k.output.dims[1]);
      if (B.parallel()) B.s(out).parallel(j);
      return out;
    }
    /* A GEMM over the M rows, tiled as kiln-tile-ops decided:
     *   * register blocks of tile_n (vectors along i) x tile_m (rows j) accumulate over all M
     *     rows: per row, tile_n / vec vector loads of V and tile_m broadcasts of S;
     *   * the result's rows in blocks of tile_rows: per block, S's columns are packed tile by
     *     tile (sP(jj, m, jt): a tile's tile_m values of row m are adjacent, its rows one after
     *     the other), a row of S at a time, by every thread;
     *   * the tasks are tile_n-wide column strips of the block, each packing its V panel
     *     (tile_n x M, contiguous) and then running the block's register tiles over it;
     *   * edge tiles are computed whole from clamped reads and stored guarded. Each output
     *     is one sum over the rows in order: results do not depend on the thread count. */
    const int v = B.vec(), tn = B.need(B.sch.tile_n, "tile_n"), tm = B.need(B.sch.tile_m, "tile_m"),
              tb = B.need(B.sch.tile_rows, "tile_rows");
    if (tn % v || tb % tm) throw std::runtime_error("kernel " + k.kind + ": tile_n must be whole vectors and tile_rows whole tile_m");
    const int I = (int)k.output.dims[1], J = (int)k.output.dims[0];
    Var jj("jj"), r("r"), jt("jt");
    Func sP("s_packed"), vP("v_panel"), acc("acc");
    sP(jj, r, jt) = S(min(jt * tm + jj, J - 1), r);
    vP(i, r) = V(min(i, I - 1), r);
    RDom rm(0, M, "rm");
    acc(i, j) = 0.0f;
    acc(i, j) += vP(i, rm) * sP(j % tm, rm, j / tm);
    out(i, j) = acc(i, j);
    const TailStrategy g = TailStrategy::GuardWithIf;
    Var jb("jb"), jr("jr"), jo("jo"), ji("ji"), io("io"), ii("ii");
    B.s(out).split(j, jb, jr, tb, g).split(jr, jo, ji, tm, g).split(i, io, ii, tn, g).reorder(ii, ji, jo, io, jb)
        .vectorize(ii, v).unroll(ji);
    if (B.parallel()) B.s(out).parallel(io);
    B.s(acc).compute_at(out, jo).bound_extent(i, tn).bound_extent(j, tm).vectorize(i, v).unroll(i).unroll(j);
    B.s(acc.update()).reorder(i, j, rm).vectorize(i, v).unroll(i).unroll(j);
    B.s(vP).compute_at(out, io).bound_extent(i, tn).vectorize(i, v);
    // Packed a row of S at a time (its block's columns, contiguous), tiles inner: every
    // cache line of S is read once, in order. Tasks of rows_per_task rows (kiln-tile-ops').
    Var ro("ro"), ri("ri");
    B.s(sP).compute_at(out, jb).bound(jj, 0, tm).reorder(jj, jt, r).vectorize(jj, std::min(tm, v), g);
    if (B.parallel()) B.s(sP).split(r, ro, ri, B.need(B.sch.rows_per_task, "rows_per_task"), g).parallel(ro);
    return out;
  }
  if (mlir::isa<EmbeddingGradOp>(k.source)) {  // out [V, d] = into or 0; row ids[l] += dy[l], positions in order
    ImageParam I = B.in[0], G = B.in[1];
    Var c("c"), t("t");
    int64_t V = k.output.dims[0], D = k.output.dims[1];
    RDom rl(0, G.dim(1).extent(), "rl");
    out(c, t) = k.inputs.size() > 2 ? B.in[2](c, t) : Expr(0.0f);
    out(c, clamp(I(rl), 0, (int)V - 1)) += G(c, rl);
    B.vectorize(out, c, D);
    if (B.parallel()) B.s(out).parallel(t);
    Var co("co"), ci("ci");
    int w = (int)std::min<int64_t>(B.vec(), D);
    auto s = B.s(out.update());
    s.split(c, co, ci, w, D % w == 0 ? TailStrategy::RoundUp : TailStrategy::GuardWithIf).reorder(ci, rl, co).vectorize(ci);
    if (B.parallel()) s.parallel(co);
    return out;
  }
  throw std::runtime_error("kernel " + k.kind + " is not a backward reduction");
}

}  // namespace kiln::codegen
