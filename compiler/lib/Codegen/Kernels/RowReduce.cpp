// RowReduce.cpp - ops reducing over each row's last dim: layer_norm and softmax.
#include "Kernels.h"

namespace kiln::codegen {

Func buildRowReduce(Builder &B) {
  const KernelSpec &k = B.k;
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
  if (k.op == KernelOp::LayerNorm) {
    Func mean("mean"), var("var"), mu("mu");
    mean(rest) = 0.0f;
    mean(rest) += X(xr);
    mu(rest) = mean(rest) / cast<float>(D);
    Expr dx = X(xr) - mu(rest);
    var(rest) = 0.0f;
    var(rest) += dx * dx;
    float eps = B.op<LayerNormOp>().getEpsilon().convertToFloat();
    out(v) = (X(ex(v)) - mu(rest)) * (1.0f / sqrt(var(rest) / cast<float>(D) + eps)) * B.in[1](v[0]) + B.in[2](v[0]);
    rowFuncs = {mean, mu, var};
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
