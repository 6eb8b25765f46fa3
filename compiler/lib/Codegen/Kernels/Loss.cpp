// Loss.cpp - cross_entropy and its gradient, fused: each row's maximum, sum of exponentials
// and target logit are reduced in place; the probabilities are never stored (the gradient
// writes each row's softmax - onehot directly).
#include "Kernels.h"

namespace kiln::codegen {

Func buildLoss(Builder &B) {
  const KernelSpec &k = B.k;
  if (B.gpu) throw std::runtime_error("kernel " + k.kind + ": the loss kernels have CPU schedules only (for now)");
  ImageParam X = B.in[0], T = B.in[1];
  int64_t ignore = mlir::isa<CrossEntropyOp>(k.source) ? B.op<CrossEntropyOp>().getIgnoreIndex()
                                                  : B.op<CrossEntropyGradOp>().getIgnoreIndex();
  const int V = (int)k.inputs[0].dims[1];
  Expr N = X.dim(1).extent();
  Var c("c"), n("n"), x("x");
  RDom rc(0, V, "rc");

  /* THE ALGORITHM: per row n, mx = max logit, se = sum exp(logit - mx); the row's loss is
   * log(se) + mx - logit[target]; valid rows (target != ignore_index) are averaged. */
  Func mx("mx"), se("se"), valid("valid"), count("count");
  mx(n) = -std::numeric_limits<float>::infinity();
  mx(n) = max(mx(n), X(rc, n));
  se(n) = 0.0f;
  se(n) += exp(X(rc, n) - mx(n));
  valid(n) = T(n) != (int)ignore;
  RDom rn(0, N, "rn");
  count(x) = 0;
  count(x) += select(valid(rn), 1, 0);
  Func out("out");
  if (mlir::isa<CrossEntropyOp>(k.source)) {
    Func rowLoss("row_loss"), total("total");
    Expr t = clamp(T(n), 0, V - 1);
    rowLoss(n) = select(valid(n), log(se(n)) + mx(n) - X(t, n), 0.0f);
    total(x) = 0.0f;
    total(x) += rowLoss(rn);
    out(x) = select(count(x) > 0, total(x) / cast<float>(max(count(x), 1)), 0.0f);
    /* THE SCHEDULE: the rows' losses in row tasks (max and sum per row), then their sum in row
     * order (the same result on any thread count). */
    Var no("no"), ni("ni");
    B.s(rowLoss).compute_root().split(n, no, ni, B.need(B.sch.rows_per_task, "rows_per_task"), TailStrategy::GuardWithIf);
    if (B.parallel()) B.s(rowLoss).parallel(no);
    B.s(mx).compute_at(rowLoss, ni);
    B.s(se).compute_at(rowLoss, ni);
    B.s(total).compute_root();
    B.s(count).compute_root();
    return out;
  }
  // The gradient: (softmax - onehot(target)) · grad / count on valid rows, 0 on the others.
  Expr scale = B.in[2](0) / cast<float>(max(count(0), 1));
  Func sc("sc");
  sc(x) = scale;
  out(c, n) = select(valid(n), (exp(X(c, n) - mx(n)) / se(n) - select(c == T(n), 1.0f, 0.0f)) * sc(0), 0.0f);
  B.s(count).compute_root();
  B.s(sc).compute_root();
  Var row = B.rowwise(out, {c, n});
  B.s(mx).compute_at(out, row);
  B.s(se).compute_at(out, row);
  return out;
}

// kiln.mean: the sum of every element in order, over their count; kiln.mean_grad: grad / count
// everywhere in like's shape.
Func buildMean(Builder &B) {
  const KernelSpec &k = B.k;
  if (B.gpu) throw std::runtime_error("kernel " + k.kind + ": CPU schedule only (for now)");
  ImageParam X = B.in[mlir::isa<MeanOp>(k.source) ? 0 : 1];
  int rank = (int)(mlir::isa<MeanOp>(k.source) ? k.inputs[0] : k.inputs[1]).dims.size();
  Region all;
  Expr count = 1;
  for (int d = 0; d < rank; ++d) {
    all.push_back(Range(0, X.dim(d).extent()));
    count = count * X.dim(d).extent();
  }
  Func out("out");
  if (mlir::isa<MeanOp>(k.source)) {
    RDom r(all, "r");
    std::vector<Expr> at;
    for (int d = 0; d < rank; ++d) at.push_back(r[d]);
    Var x("x");
    Func total("total");
    total(x) = 0.0f;
    total(x) += X(at);
    out(x) = total(x) / cast<float>(max(count, 1));
    /* THE SCHEDULE: one serial sum (the same result on any thread count). */
    B.s(total).compute_root();
    return out;
  }
  std::vector<Var> v = makeVars(rank);
  out(v) = B.in[0](0) / cast<float>(max(count, 1));
  /* THE SCHEDULE: row-wise. */
  B.rowwise(out, v);
  return out;
}

}  // namespace kiln::codegen
