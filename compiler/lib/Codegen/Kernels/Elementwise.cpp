// Elementwise.cpp - add and mul (the right operand broadcast over leading dims), scale, the
// activations (which linears and FFNs also apply in their epilogues) and their gradients, fill.
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

Expr activation(ActivationKind act, Expr x) {
  switch (act) {
    case ActivationKind::none: return x;
    case ActivationKind::relu: return max(x, 0.0f);
    case ActivationKind::gelu_erf: return 0.5f * x * (1.0f + erf(x * 0.70710678118654752f));
    case ActivationKind::gelu_tanh: return 0.5f * x * (1.0f + vtanh(0.7978845608028654f * (x + 0.044715f * x * x * x)));
    case ActivationKind::silu: return x / (1.0f + exp(-x));  // x * sigmoid(x), through the vectorized exp
  }
  throw std::runtime_error("an activation without a kernel expression");
}

// act'(x): the derivatives of the expressions above.
Expr activationGrad(ActivationKind act, Expr x) {
  switch (act) {
    case ActivationKind::none: return Expr(1.0f);
    case ActivationKind::relu: return select(x > 0.0f, 1.0f, 0.0f);
    case ActivationKind::gelu_erf:  // Φ(x) + x φ(x)
      return 0.5f * (1.0f + erf(x * 0.70710678118654752f)) + x * exp(-0.5f * x * x) * 0.3989422804014327f;
    case ActivationKind::gelu_tanh: {
      Expr t = vtanh(0.7978845608028654f * (x + 0.044715f * x * x * x));
      return 0.5f * (1.0f + t) + 0.5f * x * (1.0f - t * t) * 0.7978845608028654f * (1.0f + 0.134145f * x * x);
    }
    case ActivationKind::silu: {
      Expr s = 1.0f / (1.0f + exp(-x));
      return s * (1.0f + x * (1.0f - s));
    }
  }
  throw std::runtime_error("an activation without a gradient expression");
}

Func buildElementwise(Builder &B) {
  const KernelSpec &k = B.k;
  int r = B.rank();
  std::vector<Var> v = makeVars(r);

  /* THE ALGORITHM */
  Func out("out");
  if (mlir::isa<FillOp>(k.source)) {  // no inputs
    float value = B.op<FillOp>().getValue().convertToFloat();
    out(v) = k.output.is_int ? Expr((int)value) : Expr(value);  // i32: a step number (kiln-unroll-act)
    B.rowwise(out, v);
    return out;
  }
  ImageParam X = B.in[0];
  Expr x = X(ex(v));
  if (mlir::isa<AddOp, MulOp>(k.source)) {
    int rb = (int)k.inputs[1].dims.size();
    std::vector<Expr> bv(v.begin(), v.begin() + rb);
    Expr y = B.in[1](bv);
    out(v) = mlir::isa<AddOp>(k.source) ? x + y : x * y;
  } else if (mlir::isa<ScaleOp>(k.source)) {
    out(v) = x * B.op<ScaleOp>().getFactor().convertToFloat();
  } else if (auto act = mlir::dyn_cast<KilnActivationOpInterface>(k.source)) {
    out(v) = activation(act.getActivation(), x);
  } else if (mlir::isa<ActivationGradOp>(k.source)) {
    out(v) = activationGrad(B.op<ActivationGradOp>().getActivation(), x) * B.in[1](ex(v));
  } else {
    throw std::runtime_error("kernel " + k.kind + " is not elementwise");
  }

  /* THE SCHEDULE: row-wise (CPU: row tasks; GPU: a block per row). */
  B.rowwise(out, v);
  return out;
}

}  // namespace kiln::codegen
