// Elementwise.cpp - add and mul (the right operand broadcast over leading dims), scale, and the
// activations, which linears and FFNs also apply in their epilogues.
#include "Kernels.h"

namespace kiln::codegen {
namespace {
// tanh through Halide's vectorized exp: libm's tanhf is a scalar call per lane (it was half of
// a GPT-2 forward pass). e = exp(-2|x|) never overflows; the sign is restored at the end.
Expr vtanh(Expr x) {
  Expr e = exp(-2.0f * abs(x));
  Expr t = (1.0f - e) / (1.0f + e);
  return select(x < 0.0f, -t, t);
}
}  // namespace

Expr activation(const std::string &act, Expr x) {
  if (act == "relu") return max(x, 0.0f);
  if (act == "gelu_erf") return 0.5f * x * (1.0f + erf(x * 0.70710678118654752f));
  if (act == "gelu_tanh") return 0.5f * x * (1.0f + vtanh(0.7978845608028654f * (x + 0.044715f * x * x * x)));
  return x;
}

Func buildElementwise(Builder &B) {
  const KernelSpec &k = B.k;
  int r = B.rank();
  std::vector<Var> v = makeVars(r);

  /* THE ALGORITHM */
  Func out("out");
  ImageParam X = B.in[0];
  Expr x = X(ex(v));
  if (k.kind == "add" || k.kind == "mul") {
    int rb = (int)k.inputs[1].dims.size();
    std::vector<Expr> bv(v.begin(), v.begin() + rb);
    Expr y = B.in[1](bv);
    out(v) = k.kind == "add" ? x + y : x * y;
  } else if (k.kind == "scale") {
    out(v) = x * (float)k.getf("factor", 1.0);
  } else if (k.kind == "relu") {
    out(v) = max(x, 0.0f);
  } else if (k.kind == "gelu") {
    out(v) = activation(k.gets("approx") == "tanh" ? "gelu_tanh" : "gelu_erf", x);
  }

  /* THE SCHEDULE: row-wise (CPU: row tasks; GPU: a block per row). */
  B.rowwise(out, v);
  return out;
}

}  // namespace kiln::codegen
