// DepthwiseConv.cpp - a convolution over the sequence with one filter per feature:
// out(c, i) = b(c) + sum_t w(c, t) x(c, i + t - h), rows outside [0, L) read as zero. The
// kernel size is static and small: the taps are unrolled in the algorithm.
#include "Kernels.h"

namespace kiln::codegen {

Func buildDepthwiseConv(Builder &B) {
  const KernelSpec &k = B.k;
  ImageParam X = B.in[0], W = B.in[1], Bias = B.in[2];
  const int taps = (int)k.inputs[1].dims[0], half = (taps - 1) / 2;
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

}  // namespace kiln::codegen
