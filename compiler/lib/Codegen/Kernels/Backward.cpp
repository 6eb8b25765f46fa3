// Backward.cpp - the backward's column reductions: sums over rows into a parameter-shaped
// result. reduce_rows (a bias's gradient), weight_grad (a GEMM weight's: the sum over rows of
// dy ⊗ x), layer_norm_grad wrt gamma, and embedding_grad (rows added into their ids' rows).
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
  switch (k.op) {
    case KernelOp::ReduceRows: {
      Var c("c");
      ImageParam X = B.in[0];
      RDom rr = rowDom(X, (int)k.inputs[0].dims.size());
      out(c) = 0.0f;
      out(c) += X(at(c, rr));
      columnStrips(B, out, c, rr, k.output.dims[0]);
      return out;
    }
    case KernelOp::LayerNormGrad: {  // wrt gamma: the sum over rows of dy · x̂
      LayerNormGradOp op = B.op<LayerNormGradOp>();
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
    case KernelOp::WeightGrad: {
      // x [M, K], dy [M, N]; out_in: out [N, K] = dyᵀ·x; in_out: out [K, N] = xᵀ·dy. Halide's
      // output (i, j): i the contiguous dim, j the other; the sum runs over the M rows.
      bool outIn = B.op<WeightGradOp>().getWeightLayout() == "out_in";
      ImageParam X = B.in[0], G = B.in[1];
      Var i("i"), j("j");
      auto term = [&](Expr r) { return outIn ? G(j, r) * X(i, r) : X(j, r) * G(i, r); };
      int64_t I = k.output.dims[1], J = k.output.dims[0];
      const int v = B.vec();
      // A sequence-length dim (matmul's right operand), or contiguous columns that are no whole
      // number of vectors: rows of columns over all M rows at once.
      if (I < 0 || J < 0 || I % v != 0) {
        RDom rm(0, X.dim(1).extent(), "rm");
        Func acc("acc");
        acc(i, j) = 0.0f;
        acc(i, j) += term(rm);
        out(i, j) = acc(i, j);
        B.vectorize(out, i, I);
        if (B.parallel()) B.s(out).parallel(j);
        return out;
      }
      // The rows in chunks of 256, summed chunk after chunk into the output: a chunk's rows of
      // both operands stay in the caches while every output tile takes its share of them.
      // Within a chunk, register blocks of ti x tj accumulators (two vectors by 8 rows on
      // AVX-512) stream the chunk's rows. The tiles of the operand that is the larger to
      // stream (dy's columns for in_out, x's for out_in) are the outer, parallel loop.
      const int chunk = 256;
      Expr M = X.dim(1).extent();
      Var mo("mo");
      RDom rr(0, chunk, "rr");
      rr.where(mo * chunk + rr < M);
      Func part("part");
      part(i, j, mo) = 0.0f;
      part(i, j, mo) += term(mo * chunk + rr);
      RDom rc(0, (M + chunk - 1) / chunk, "rc");
      out(i, j) = 0.0f;
      out(i, j) += part(i, j, rc);
      int ti = I % (2 * v) == 0 ? 2 * v : v;  // whole vectors: no partial tile along i
      int tj = J >= 8 ? 8 : (int)J;
      Var io("io"), jo("jo"), ii("ii"), ji("ji");
      B.vectorize(out, i, I);
      if (B.parallel()) B.s(out).parallel(j);
      Var outer = outIn ? jo : io, inner = outIn ? io : jo;
      B.s(out.update())
          .tile(i, j, io, jo, ii, ji, ti, tj, TailStrategy::GuardWithIf)
          .reorder(ii, ji, inner, outer, rc)
          .vectorize(ii, std::min(v, ti))
          .unroll(ji);
      if (B.parallel()) B.s(out.update()).parallel(outer);
      // Guarded, not rounded up: an edge tile's partial sums read no row or column past the
      // operands' ends.
      const TailStrategy g = TailStrategy::GuardWithIf;
      B.s(part).compute_at(out, inner).vectorize(i, std::min(v, ti), g).unroll(j, tj, g);
      B.s(part.update()).reorder(i, j, rr).vectorize(i, std::min(v, ti), g).unroll(j, tj, g);
      return out;
    }
    case KernelOp::EmbeddingGrad: {  // out [V, d]: row ids[l] += dy[l], positions in order
      ImageParam I = B.in[0], G = B.in[1];
      Var c("c"), t("t");
      int64_t V = k.output.dims[0], D = k.output.dims[1];
      RDom rl(0, G.dim(1).extent(), "rl");
      out(c, t) = 0.0f;
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
    default: break;
  }
  throw std::runtime_error("kernel " + k.kind + " is not a backward reduction");
}

}  // namespace kiln::codegen
