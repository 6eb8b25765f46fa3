// DepthwiseConv.cpp - a convolution over the sequence with one filter per feature:
// out(c, i) = b(c) + sum_t w(c, t) x(c, i + t - s), rows outside [0, L) read as zero, s the
// shift: (k - 1) / 2 centered, k - 1 causal. The
// kernel size is static and small: the taps are unrolled in the algorithm. Its gradient
// (kiln.depthwise_conv_grad): with respect to x, the same convolution of the result's gradient
// with the taps reversed; with respect to the weight, per tap a sum over the rows.
#include "Kernels.h"

namespace kiln::codegen {

Func buildDepthwiseConv(Builder &B) {
  const KernelSpec &k = B.k;
  ImageParam X = B.in[0], W = B.in[1], Bias = B.in[2];
  const int taps = (int)k.inputs[1].dims[0], half = B.op<DepthwiseConvOp>().getCausal() ? taps - 1 : (taps - 1) / 2;
  std::vector<Var> v = makeVars(2);
  Expr L = X.dim(1).extent();

  /* THE ALGORITHM */
  Expr sum = Bias(v[0]);
  for (int t = 0; t < taps; ++t) {
    Expr row = v[1] + (t - half);
    sum = sum + W(v[0], t) * select(row >= 0 && row < L, X(v[0], clamp(row, 0, L - 1)), 0.0f);
  }
  Func out("out");
  out(v) = sum;

  /* THE SCHEDULE: row-wise (CPU: row tasks; GPU: a block per row). */
  B.rowwise(out, v);
  return out;
}

Func buildDepthwiseConvGrad(Builder &B) {
  const KernelSpec &k = B.k;
  ImageParam X = B.in[0], W = B.in[1], G = B.in[2];
  const int taps = (int)k.inputs[1].dims[0], half = B.op<DepthwiseConvGradOp>().getCausal() ? taps - 1 : (taps - 1) / 2;
  Expr L = X.dim(1).extent();
  auto at = [&](ImageParam P, Expr c, Expr row) {  // zero outside [0, L)
    return select(row >= 0 && row < L, P(c, clamp(row, 0, L - 1)), 0.0f);
  };
  Func out("out");
  std::vector<Var> v = makeVars(2);
  if (B.op<DepthwiseConvGradOp>().getWrt() == ConvGradWrt::x) {
    /* THE ALGORITHM: dx(c, j) = sum_t w(c, t) g(c, j - t + s). */
    Expr sum = 0.0f;
    for (int t = 0; t < taps; ++t) sum = sum + W(v[0], t) * at(G, v[0], v[1] - (t - half));
    out(v) = sum;
    /* THE SCHEDULE: row-wise (CPU: row tasks; GPU: a block per row). */
    B.rowwise(out, v);
    return out;
  }
  if (B.gpu) throw std::runtime_error("kernel " + k.kind + ": CPU schedule only (for now)");
  /* THE ALGORITHM: dw(c, t) = sum_i g(c, i) x(c, i + t - s), in row order. */
  RDom r(0, L, "r");
  Func sum("sum");
  sum(v) = 0.0f;
  sum(v) += G(v[0], r) * at(X, v[0], r + v[1] - half);
  out(v) = sum(v);
  /* THE SCHEDULE: the k taps' sums, each vectorized over the features. */
  B.s(sum).compute_root();
  B.s(sum.update()).vectorize(v[0], B.vec(), TailStrategy::GuardWithIf);
  return out;
}

}  // namespace kiln::codegen
