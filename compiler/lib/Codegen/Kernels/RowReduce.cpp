// RowReduce.cpp - ops reducing over each row's last dim: layer_norm, rms_norm, l2_normalize and
// softmax, and their input gradients; and mean_pool, the mean over a sequence's rows.
#include "Kernels.h"

namespace kiln::codegen {

RowStats layerNormStats(ImageParam X, Expr D, const std::vector<Var> &rest, float eps) {
  RDom rx(0, D, "rx");
  std::vector<Expr> xr{rx};
  for (auto &x : rest) xr.push_back(x);
  Func mean("mean"), var("var"), mu("mu"), rstd("rstd");
  mean(rest) = 0.0f;
  mean(rest) += X(xr);
  mu(rest) = mean(rest) / cast<float>(D);
  Expr dx = X(xr) - mu(rest);
  var(rest) = 0.0f;
  var(rest) += dx * dx;
  rstd(rest) = 1.0f / sqrt(var(rest) / cast<float>(D) + eps);
  return {mu, rstd, {mean, mu, var, rstd}};
}

// mean_pool: out(c, 0) = the mean over the rows r of X(c, r) where the mask keeps r (one sequence
// per call: kiln-loop-sequences).
static Func buildMeanPool(Builder &B) {
  ImageParam X = B.in[0];
  Var c("c"), b("b");
  RDom r(0, X.dim(1).extent(), "r");

  /* THE ALGORITHM */
  Func sum("sum"), count("count"), out("out");
  Expr w = B.in.size() > 1 ? select(B.in[1](r) != 0, 1.0f, 0.0f) : Expr(1.0f);
  if (B.gpu) {  // GPU: a thread per column, its sums inline
    Expr s = Halide::sum(X(c, r) * w), n = Halide::sum(w);
    out(c, b) = s / max(n, 1.0f);
    B.gpuRows(out, {c, b});
    return out;
  }
  sum(c) = 0.0f;
  sum(c) += X(c, r) * w;
  count() = 0.0f;
  count() += w;
  out(c, b) = sum(c) / max(count(), 1.0f);  // no row kept: sum 0, out 0

  /* THE SCHEDULE: the sums and the count at root, the columns in vectors, then the row. */
  B.s(count).compute_root();
  const int w0 = B.vec();
  B.s(sum).compute_root();
  if (w0 > 1) {
    B.s(sum).vectorize(c, w0, TailStrategy::GuardWithIf);
    B.s(sum.update()).vectorize(c, w0, TailStrategy::GuardWithIf);
    B.s(out).vectorize(c, w0, TailStrategy::GuardWithIf);
  }
  return out;
}

Func buildRowReduce(Builder &B) {
  const KernelSpec &k = B.k;
  if (mlir::isa<MeanPoolOp>(k.source)) return buildMeanPool(B);
  int r = B.rank();
  std::vector<Var> v = makeVars(r);
  std::vector<Var> rest(v.begin() + 1, v.end());
  ImageParam X = B.in[0];
  int64_t Ds = k.output.dims.back();  // a reduction over a sequence length is dynamic
  Expr D = Ds >= 0 ? Expr((int)Ds) : X.dim(0).extent();
  RDom rx(0, D, "rx");
  std::vector<Expr> xr{rx};
  for (auto &x : rest) xr.push_back(x);

  /* THE ALGORITHM */
  Func out("out"), e("e");
  std::vector<Func> rowFuncs;
  if (mlir::isa<LayerNormOp>(k.source)) {
    RowStats st = layerNormStats(X, D, rest, B.op<LayerNormOp>().getEpsilon().convertToFloat());
    out(v) = (X(ex(v)) - st.mu(rest)) * st.rstd(rest) * B.in[1](v[0]) + B.in[2](v[0]);
    rowFuncs = st.funcs;
  } else if (mlir::isa<SoftmaxGradOp>(k.source)) {  // y · (dy - rowsum(dy · y))
    Func dot("dot");
    ImageParam G = B.in[1];
    dot(rest) = 0.0f;
    dot(rest) += X(xr) * G(xr);
    out(v) = X(ex(v)) * (G(ex(v)) - dot(rest));
    rowFuncs = {dot};
  } else if (mlir::isa<LayerNormGradOp>(k.source)) {  // (g - mean(g) - x̂ mean(g x̂)) / σ, g = dy γ
    LayerNormGradOp op = B.op<LayerNormGradOp>();
    ImageParam Gm = B.in[1], G = B.in[2];
    RowStats st = layerNormStats(X, D, rest, op.getEpsilon().convertToFloat());
    Func mu = st.mu, rstd = st.rstd, m1("m1"), m2("m2");
    Expr xh = (X(xr) - mu(rest)) * rstd(rest), g = G(xr) * Gm(rx);
    m1(rest) = 0.0f;
    m1(rest) += g;
    m2(rest) = 0.0f;
    m2(rest) += g * xh;
    Expr xhv = (X(ex(v)) - mu(rest)) * rstd(rest);
    out(v) = (G(ex(v)) * Gm(v[0]) - m1(rest) / cast<float>(D) - xhv * (m2(rest) / cast<float>(D))) * rstd(rest);
    rowFuncs = st.funcs;
    rowFuncs.push_back(m1);
    rowFuncs.push_back(m2);
  } else if (mlir::isa<L2NormalizeOp>(k.source)) {  // x / max(||x||, eps)
    Func ss("ss");
    ss(rest) = 0.0f;
    ss(rest) += X(xr) * X(xr);
    out(v) = X(ex(v)) / max(sqrt(ss(rest)), B.op<L2NormalizeOp>().getEpsilon().convertToFloat());
    rowFuncs = {ss};
  } else if (mlir::isa<RmsNormOp, RmsNormGradOp>(k.source)) {
    // r = 1 / sqrt(mean(x²) + eps) per row; forward x · r · w; input gradient, with g = dy · w,
    // r · (g - x̂ · mean(g · x̂)) = r · g - x · r³ · mean(g · x) (x̂ = x · r).
    const bool grad = mlir::isa<RmsNormGradOp>(k.source);
    const float eps = (grad ? B.op<RmsNormGradOp>().getEpsilon() : B.op<RmsNormOp>().getEpsilon()).convertToFloat();
    ImageParam W = B.in[1];
    Func ss("ss"), rstd("rstd");
    ss(rest) = 0.0f;
    ss(rest) += X(xr) * X(xr);
    rstd(rest) = 1.0f / sqrt(ss(rest) / cast<float>(D) + eps);
    rowFuncs = {ss, rstd};
    if (!grad) {
      out(v) = X(ex(v)) * rstd(rest) * W(v[0]);
    } else {
      ImageParam G = B.in[2];
      Func gx("gx");
      gx(rest) = 0.0f;
      gx(rest) += G(xr) * W(rx) * X(xr);
      Expr r = rstd(rest);
      out(v) = r * G(ex(v)) * W(v[0]) - X(ex(v)) * (r * r * r) * (gx(rest) / cast<float>(D));
      rowFuncs.push_back(gx);
    }
  } else {  // softmax over the last dim
    Func mx("mx"), sum("sum");
    mx(rest) = -std::numeric_limits<float>::infinity();
    mx(rest) = max(mx(rest), X(xr));
    e(v) = exp(X(ex(v)) - mx(rest));
    std::vector<Expr> er{rx};
    for (auto &x : rest) er.push_back(x);
    sum(rest) = 0.0f;
    sum(rest) += e(er);
    // A row whose every entry is -inf (fully masked) gives zeros, as the fused attention does.
    out(v) = select(mx(rest) == -std::numeric_limits<float>::infinity(), 0.0f, e(ex(v)) / sum(rest));
    rowFuncs = {mx, e, sum};
  }

  /* THE SCHEDULE: the row-wise schedule (CPU: row tasks; GPU: a block per row), the row
   * reductions once per row. On the GPU exp is recomputed: no row-long shared buffer. */
  Var row = B.rowwise(out, v);
  for (Func f : rowFuncs)
    if (!(B.gpu && f.name() == e.name())) B.s(f).compute_at(out, row);
  return out;
}

}  // namespace kiln::codegen
