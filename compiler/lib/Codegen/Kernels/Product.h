// Product.h - the small GEMMs of the attention backwards (AttentionGrad.cpp,
// SparseAttentionGrad.cpp): s(args) = Σ_r A(r) · Bt(r) over `depth`, computed in register blocks.
#pragma once
#include <functional>

#include "Kernels.h"

namespace kiln::codegen {

// `args` are s's vars, the first two x and y; A(r) reads along y (its value broadcast over a
// vector of x), Bt(r) along x (contiguous across the vector). `acc` is a register block's sum.
struct Product {
  Func s, acc;
  RDom r;
};
inline Product product(const std::string &name, const std::function<Expr(Expr r)> &A, const std::function<Expr(Expr r)> &Bt,
                       int depth, const std::vector<Var> &args) {
  Product p{Func(name), Func(name + "_acc"), RDom(0, depth, "r_" + name)};
  std::vector<Expr> a(args.begin(), args.end());
  p.acc(a) = 0.0f;
  p.acc(a) += A(p.r) * Bt(p.r);
  p.s(a) = p.acc(a);
  return p;
}
// s(x, y, h) = Σ_r A(r, y, h) · Bt(x, r, h).
inline Product product(const std::string &name, Func A, Func Bt, int depth, Var x, Var y, Var h) {
  return product(name, [=](Expr r) { return A(r, y, h); }, [=](Expr r) { return Bt(x, r, h); }, depth, {x, y, h});
}
// Computed at f's loop `at`: tiles of 2 vectors along x by 8 rows y, each a register block
// summed over r, computed whole (every operand read must be clamped).
inline void scheduleProduct(Builder &B, Product &p, Func f, VarOrRVar at, Var x, Var y) {
  const int v = B.vec();
  Var xo("xo"), xi("xi"), yo("yo"), yi("yi");
  const TailStrategy g = TailStrategy::GuardWithIf;
  B.s(p.s).compute_at(f, at).split(x, xo, xi, 2 * v, g).split(y, yo, yi, 8, g).reorder(xi, yi, xo, yo).vectorize(xi, v);
  B.s(p.acc).compute_at(p.s, xo).bound_extent(x, 2 * v).bound_extent(y, 8).vectorize(x, v).unroll(x).unroll(y);
  B.s(p.acc.update()).reorder(x, y, p.r).vectorize(x, v).unroll(x).unroll(y);
}

}  // namespace kiln::codegen
