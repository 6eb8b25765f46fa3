// Act.cpp - ACT (adaptive computation time) on the carry [L, 2d + 4]: columns [0, d) the state,
// [d, 2d) the halting-weighted output, 2d the halting sum h, 2d + 1 the remainder r, 2d + 2
// the update count n, 2d + 3 the steps run (each act_update writes its step + 1 in every row, so
// the loop's count is what ran, not what the halting says). A position runs while h < 1;
// halting sets h to exactly 1.
#include "Kernels.h"

namespace kiln::codegen {

Func buildAct(Builder &B) {
  const KernelSpec &k = B.k;
  ImageParam C = B.in[0];
  const int d = mlir::isa<ActInitOp>(k.source) ? (int)k.inputs[0].dims[1] : (int)(k.inputs[0].dims[1] - 4) / 2;
  std::vector<Var> v = makeVars(B.rank());
  Func out("out");
  auto col = [&](int c, Expr i) { return C(c, i); };
  if (mlir::isa<ActInitOp>(k.source)) {  // the input is the first state x [L, d]
    out(v) = select(v[0] < d, B.in[0](clamp(v[0], 0, d - 1), v[1]), 0.0f);
  } else if (mlir::isa<ActInputOp>(k.source)) {  // state + position signal + timestep signal
    Func sig("sig");  // the timestep's sinusoid: d values, computed once per call
    Expr freq = exp(cast<float>(v[0] - v[0] % 2) * (-std::log(10000.0f) / (float)d));
    Expr angle = cast<float>(B.in[2](0)) * freq;
    sig(v[0]) = select(v[0] % 2 == 0, sin(angle), cos(angle));
    out(v) = C(v[0], v[1]) + B.in[1](v[0], v[1]) + sig(v[0]);
    /* THE SCHEDULE: row-wise; the sinusoid once per call (GPU: gpu_tile_n values per block). */
    B.rowwise(out, v);
    B.s(sig).compute_root();
    if (B.gpu) {
      Var bo("bo"), ti("ti");
      B.s(sig).gpu_tile(v[0], bo, ti, B.need(B.sch.gpu_tile_n, "gpu_tile_n"), TailStrategy::GuardWithIf);
    }
    return out;
  } else if (mlir::isa<ActUpdateOp>(k.source)) {
    ActUpdateOp op = B.op<ActUpdateOp>();
    ImageParam X = B.in[1], Y = B.in[2], WH = B.in[3], BH = B.in[4], STEP = B.in[5];
    const int T = (int)op.getMaxSteps();
    const float thr = op.getThreshold().convertToFloat();
    Var i = v[1], c = v[0];
    Func dot("dot"), p("p");
    RDom rk(0, d, "rk");
    dot(i) = 0.0f;
    dot(i) += X(rk, i) * WH(rk);
    p(i) = 1.0f / (1.0f + exp(-(dot(i) + BH(0))));
    Expr h = col(2 * d, i), r = col(2 * d + 1, i), n = col(2 * d + 2, i);
    Expr running = h < 1.0f;
    Expr halt = running && (h + p(i) > thr || STEP(0) >= T - 1);
    Expr w = select(running, select(halt, 1.0f - h, p(i)), 0.0f);
    Expr cs = clamp(c, 0, d - 1), ca = clamp(c - d, 0, d - 1);
    Expr outS = C(cs + d, i) + w * Y(cs, i), outA = C(ca + d, i) + w * Y(ca, i);
    out(c, i) = select(c < d, select(halt, outS, running, Y(cs, i), C(cs, i)),  // a halted state is its output
                       c < 2 * d, outA,                                           // output += w * step's state
                       c == 2 * d, select(halt, 1.0f, running, h + p(i), h),      // halting sum
                       c == 2 * d + 1, select(halt, 1.0f - h, r),                 // remainder
                       c == 2 * d + 2, n + select(running, 1.0f, 0.0f),           // updates
                       cast<float>(STEP(0) + 1));                                 // steps run
    /* THE SCHEDULE: row-wise; p = sigmoid(x.w + b) once per row. */
    Var row = B.rowwise(out, v);
    B.s(p).compute_at(out, row);
    B.s(dot).compute_at(out, row);
    return out;
  } else if (mlir::isa<ActUpdateGradOp>(k.source)) {
    // The backward of one step (kiln.act_update_grad). The decisions come from the carry and
    // the next carry: running = h < 1; halted at this step = running and h' >= 1 (a step that
    // went on leaves h' = h + p <= threshold < 1); went on = running, not halted.
    if (B.gpu) throw std::runtime_error("kernel " + k.kind + ": CPU schedule only (for now)");
    const ActGradWrt wrt = B.op<ActUpdateGradOp>().getWrt();
    ImageParam N1 = B.in[1], X = B.in[2], Y = B.in[3], WH = B.in[4], BH = B.in[5], G = B.in[6];
    Var i("i"), c("c");
    Func dot("dot"), p("p"), gyd("gyd"), gz("gz");
    RDom rk(0, d, "rk");
    Expr h = col(2 * d, i), running = h < 1.0f, halt = running && N1(2 * d, i) >= 1.0f, on = running && !halt;
    dot(i) = 0.0f;
    dot(i) += X(rk, i) * WH(rk);
    p(i) = 1.0f / (1.0f + exp(-(dot(i) + BH(0))));
    // The step's output y reaches the loss through the weighted output (and, when halting,
    // through the state, which is then that output): Σ_c (g_o + [halt] g_s) · y.
    gyd(i) = 0.0f;
    gyd(i) += (G(rk + d, i) + select(halt, G(rk, i), 0.0f)) * Y(rk, i);
    // d loss / d logit where the step went on: p enters the output (w = p) and h' = h + p.
    gz(i) = select(on, (gyd(i) + G(2 * d, i)) * p(i) * (1.0f - p(i)), 0.0f);
    if (wrt == ActGradWrt::halt_weight || wrt == ActGradWrt::halt_bias) {  // sums over the rows, in row order
      RDom rr(0, X.dim(1).extent(), "rr");
      Func sum("sum");
      if (wrt == ActGradWrt::halt_weight) {
        sum(c) = 0.0f;
        sum(c) += gz(rr) * X(c, rr);
      } else {
        sum(c) = 0.0f;
        sum(c) += gz(rr);
      }
      out(c) = sum(c);
      /* THE SCHEDULE: each row's gz once (rows in parallel), then the sum over the rows. */
      B.s(gz).compute_root();
      if (B.parallel()) B.s(gz).parallel(i);
      B.s(p).compute_at(gz, i);
      B.s(dot).compute_at(gz, i);
      B.s(gyd).compute_at(gz, i);
      B.s(sum).compute_root();
      if (wrt == ActGradWrt::halt_weight) B.s(sum.update()).vectorize(c, B.vec(), TailStrategy::GuardWithIf);
      return out;
    }
    Expr gs = G(clamp(c, 0, d - 1), i), go = G(clamp(c, 0, d - 1) + d, i);
    if (wrt == ActGradWrt::carry) {
      Expr gsA = G(clamp(c - d, 0, d - 1), i), goA = G(clamp(c - d, 0, d - 1) + d, i);
      out(c, i) = select(c < d, select(running, 0.0f, gs),                            // the state: replaced
                         c < 2 * d, goA + select(halt, gsA, 0.0f),                    // output: carried on
                         c == 2 * d, select(halt, -G(2 * d + 1, i) - gyd(i), G(2 * d, i)),  // h: w = r' = 1 - h
                         c == 2 * d + 1, select(halt, 0.0f, G(2 * d + 1, i)),         // r: set when halting
                         0.0f);                                                        // n, steps run: constants
    } else if (wrt == ActGradWrt::y) {
      Expr w = select(halt, 1.0f - h, p(i));
      out(c, i) = select(halt, w * (go + gs), on, gs + p(i) * go, 0.0f);
    } else {  // x: through the halting logit only (the step's other uses add theirs)
      out(c, i) = gz(i) * WH(c);
    }
    /* THE SCHEDULE: row-wise; p and the row's dot products once per row. */
    std::vector<Var> cv{c, i};
    Var row = B.rowwise(out, cv);
    for (Func f : {p, dot, gyd, gz}) B.s(f).compute_at(out, row);
    return out;
  } else if (mlir::isa<ActRunningOp>(k.source)) {
    RDom r(0, C.dim(1).extent(), "r");
    out(v) = 0;
    out(v) = max(out(v), select(C(2 * d, r) < 1.0f, 1, 0));
    /* THE SCHEDULE: serial (GPU: one thread; the flag stays on the device until the host reads it). */
    if (B.gpu) {
      B.s(out).gpu_single_thread();
      B.s(out.update()).gpu_single_thread();
    }
    return out;
  } else {  // act_output
    switch (B.op<ActOutputOp>().getField()) {
      case ActField::hidden: out(v) = C(v[0] + d, v[1]); break;
      case ActField::ponder: out(v) = col(2 * d + 2, v[0]) + col(2 * d + 1, v[0]); break;
      case ActField::steps: out(v) = cast<int>(col(2 * d + 2, v[0])); break;
      case ActField::iterations: out(v) = cast<int>(col(2 * d + 3, 0)); break;  // row 0's: every row holds it
    }
  }
  /* THE SCHEDULE: row-wise. */
  B.rowwise(out, v);
  return out;
}

}  // namespace kiln::codegen
