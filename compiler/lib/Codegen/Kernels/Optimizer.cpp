// Optimizer.cpp - the training step's optimizer: the gradients' sum of squares (for global-norm
// clipping), the step counter, the learning-rate schedule, and AdamW's moments and parameter
// update, as torch.optim.AdamW computes them; and an auxiliary loss term's weight schedule.
// The step counter and AdamW run in place (kiln's in-place ops: the kernel's output is its first
// input's buffer, each element read before it is written); AdamW's kernel also writes the two
// moments' buffers, its further outputs.
#include "Kernels.h"

namespace kiln::codegen {

Func buildOptimizer(Builder &B) {
  const KernelSpec &k = B.k;
  if (B.gpu) throw std::runtime_error("kernel " + k.kind + ": the optimizer's kernels have CPU schedules only (for now)");
  int r = B.rank();
  std::vector<Var> v = makeVars(r);
  Func out("out");
  Var x("x");
  if (mlir::isa<SumSquaresOp>(k.source)) {
    // Partial sums per outermost index (row tasks; a 1-D input in chunks of rows_per_task
    // elements, kiln-tile-ops'), then their sum in order: the same result on any thread count.
    ImageParam X = B.in[0];
    int rin = (int)k.inputs[0].dims.size();
    Func part("part"), total("total");
    Var o("o");
    if (rin == 1) {
      const int chunk = B.need(B.sch.rows_per_task, "rows_per_task");
      RDom rc(0, chunk, "rc");
      Expr i = o * chunk + rc;
      Expr n = X.dim(0).extent();
      Expr xv = X(clamp(i, 0, n - 1));
      part(o) = 0.0f;
      part(o) += select(i < n, xv * xv, 0.0f);
      RDom ro(0, (n + chunk - 1) / chunk, "ro");
      total(x) = 0.0f;
      total(x) += part(ro);
    } else {
      Region inner;
      for (int d = 0; d < rin - 1; ++d) inner.push_back(Range(0, X.dim(d).extent()));
      RDom ri(inner, "ri");
      std::vector<Expr> at;
      for (int d = 0; d < rin - 1; ++d) at.push_back(ri[d]);
      at.push_back(o);
      part(o) = 0.0f;
      part(o) += X(at) * X(at);
      RDom ro(0, X.dim(rin - 1).extent(), "ro");
      total(x) = 0.0f;
      total(x) += part(ro);
    }
    out(x) = total(x);
    B.s(part).compute_root();
    if (B.parallel()) B.s(part.update()).parallel(o);  // the sums, a task per outer index
    B.s(total).compute_root();
    return out;
  } else if (mlir::isa<StepCountOp>(k.source)) {
    out(v) = B.in[0](ex(v)) + 1.0f;
    return out;
  } else if (mlir::isa<LearningRateOp>(k.source)) {
    LearningRateOp op = B.op<LearningRateOp>();
    const float lr = op.getLr().convertToFloat(), minRatio = op.getMinRatio().convertToFloat();
    const int64_t warm = op.getWarmup(), decay = op.getDecaySteps();
    Expr t = B.in[0](0), peak = select(B.in[1](0) > 0.0f, B.in[1](0), lr);
    Expr rate = peak;
    if (decay > warm) {
      Expr p = min(1.0f, max(0.0f, (t - (float)warm) / (float)(decay - warm)));
      rate = peak * (minRatio + (1.0f - minRatio) * 0.5f * (1.0f + cos(3.14159265358979f * p)));
    }
    if (warm > 0) rate = select(t <= (float)warm, peak * t / (float)warm, rate);
    out(v) = rate;
    return out;
  } else if (mlir::isa<LossWeightOp>(k.source)) {  // t = s + 1 counts while t <= until · T (always when T <= 0)
    LossWeightOp op = B.op<LossWeightOp>();
    const float w = op.getWeight().convertToFloat(), until = op.getUntil().convertToFloat();
    Expr s = B.in[0](0), total = B.in[1](0);
    out(v) = until > 0.0f ? select(total <= 0.0f || s + 1.0f <= until * total, w, 0.0f) : Expr(w);
  } else if (mlir::isa<AdamWStepOp>(k.source)) {
    // One pass: each element of p, m, v and g read once, p, m and v written (a Tuple: the
    // result, then the moments' buffers, the kernel's further outputs).
    AdamWStepOp op = B.op<AdamWStepOp>();
    const float b1 = op.getBeta1().convertToFloat(), b2 = op.getBeta2().convertToFloat();
    const float eps = op.getEps().convertToFloat(), wd = op.getWeightDecay().convertToFloat();
    const float clipNorm = op.getClipNorm().convertToFloat();
    // Per step: the clip factor, decay = 1 - lr·wd, stepSize = lr / (1 - b1^t), root = sqrt(1 - b2^t).
    Func sc("scalars");
    Expr sumsq = B.in[4](0), t = B.in[5](0), lr = B.in[6](0);
    Expr clip = clipNorm > 0 ? min(1.0f, clipNorm / (sqrt(sumsq) + 1e-6f)) : Expr(1.0f);
    sc(x) = Tuple(clip, 1.0f - lr * wd, lr / (1.0f - pow(b1, t)), sqrt(1.0f - pow(b2, t)));
    Expr P = B.in[0](ex(v)), M = B.in[1](ex(v)), V = B.in[2](ex(v)), g = B.in[3](ex(v)) * sc(0)[0];
    Expr m1 = b1 * M + (1.0f - b1) * g, v1 = b2 * V + (1.0f - b2) * (g * g);
    out(v) = Tuple(P * sc(0)[1] - sc(0)[2] * m1 / (sqrt(v1) / sc(0)[3] + eps), m1, v1);
    B.s(sc).compute_root();
  } else {
    throw std::runtime_error("kernel " + k.kind + " is not the optimizer's");
  }
  B.rowwise(out, v, /*inPlace=*/!mlir::isa<LearningRateOp>(k.source) && !mlir::isa<LossWeightOp>(k.source));
  return out;
}

}  // namespace kiln::codegen
