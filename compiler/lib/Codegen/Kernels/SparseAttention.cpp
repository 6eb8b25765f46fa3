// SparseAttention.cpp - block-sparse attention, generated from the op's block schedule (its
// #kiln.sparse_schedule and the schedule's block, kiln-tile-sparse-pattern's decisions, kept as
// a .mlir file states them): each part (kiln/Support/SparsePattern.h) on the online block engine
// over its visited key blocks, two parts merged by log-sum-exp.
#include "BlockAttention.h"
#include "SparseExpr.h"

namespace kiln::codegen {

Func buildSparseAttention(Builder &B) {
  const KernelSpec &k = B.k;
  AttentionOp op = B.op<AttentionOp>();
  const sparse::Pattern p = patternOf(op).value_or(sparse::Pattern());
  if (p.schedule.empty() || p.schedule.size() > 2)
    throw std::runtime_error("kernel attention: a sparse pattern needs its block schedule of one or two parts (kiln.sparse)");
  ImageParam Q = B.in[0];
  const int Bq = B.need(B.sch.block, "block"), E = (int)k.inputs[2].dims[2];
  Expr L = Q.dim(1).extent();

  /* THE ALGORITHM */
  ExprOps ops;
  setLayoutTable(ops, p);
  std::vector<std::vector<int64_t>> tables;  // a layout's key blocks per query block
  for (int r = 0; r < ops.n; ++r) tables.push_back(sparse::tableBlocks(p, r));
  sparse::Math<ExprOps> m{p, ops, L};
  Var e("e"), i("i"), h("h");
  std::vector<sparse::Part> parts = p.parts();
  std::vector<Func> P;  // per part: Tuple(o, lse)(e, x, h), x in the part's query order
  // With the lse result (for the backward), each part's P at root, read by both outputs.
  const bool withLse = !k.more_outputs.empty();
  Func out("out"), merge("merge");
  // Mixed precision (precision = bf16): q, k and v rounded to bfloat16 once, into copies every
  // part reads; the scores, the softmax, the weighted sums and the merge in f32.
  const int D = (int)k.inputs[0].dims[2];
  Func Qin = attentionOperand(B, B.in[0], D, "Qr"), Kin = attentionOperand(B, B.in[1], D, "Kr"),
       Vin = attentionOperand(B, B.in[2], E, "Vr");
  for (size_t n = 0; n < parts.size(); ++n) {
    const sparse::Part &pt = parts[n];
    BlockAttention ba;
    ba.block = Bq;
    ba.scale = op.getScale().convertToFloat();
    ba.valueWidth = E;
    ba.q = Qin, ba.k = Kin, ba.v = Vin;
    ba.nkb = m.blocks(pt.k);
    if (pt.rule == sparse::Rule::Table) {
      BlockTable t = blockTable(tables, std::to_string(n));
      Buffer<int32_t> idx = t.idx, cnt = t.cnt;
      int rows = t.rows, ms = t.slots;
      ba.keyBlock = [=](Expr qo, Expr j) { return idx(clamp(j, 0, ms - 1), clamp(qo, 0, rows - 1)); };
      ba.slots = Expr(ms);
      ba.slotLimit = [=](Expr qo) { return cnt(clamp(qo, 0, rows - 1)); };
    } else {
      ba.keyBlock = [=](Expr qo, Expr j) { return m.lo(pt, qo) + j; };
      ba.slots = ba.nkb;
      ba.slotLimit = [=](Expr qo) { return m.hi(pt, qo) - m.lo(pt, qo) + 1; };
    }
    ba.qrow = [=](Expr qx, Expr) { return m.pos(pt.q, qx); };
    ba.krow = [=](Expr kx, Expr) { return m.pos(pt.k, kx); };
    ba.gatherRows = pt.q != sparse::Order::Identity || pt.k != sparse::Order::Identity;
    ba.gatherQueryRows = pt.q != sparse::Order::Identity;
    ba.head = [](Expr g) { return g; };
    ba.ok = [=](Expr qx, Expr kx, Expr qrow, Expr krow, Expr) {
      return qx < m.length(pt.q) && qrow < L && kx < m.length(pt.k) && krow < L && m.allowedPart(pt, qrow, krow);
    };
    P.push_back(onlineBlockAttention(B, B.in[0], B.in[1], B.in[2], ba, std::to_string(n), out, h, false, withLse));
  }
  auto rowOf = [&](size_t n) { return clamp(m.inv(parts[n].q, i), 0, m.blocks(parts[n].q) * Bq - 1); };
  Func lse("lse");
  if (P.size() == 1) {
    out(e, i, h) = P[0](e, rowOf(0), h)[0];
    if (withLse) lse(i, h) = P[0](0, rowOf(0), h)[1];
  } else {  // log-sum-exp merge of the two parts' normalized outputs, weights once per row
    Expr s1 = P[0](0, rowOf(0), h)[1], s2 = P[1](0, rowOf(1), h)[1];
    Expr mx = max(s1, s2), w1 = exp(s1 - mx), w2 = exp(s2 - mx);
    merge(i, h) = Tuple(w1 / (w1 + w2), w2 / (w1 + w2));
    out(e, i, h) = P[0](e, rowOf(0), h)[0] * merge(i, h)[0] + P[1](e, rowOf(1), h)[0] * merge(i, h)[1];
    // The merged row's log-sum-exp (a row no part reaches keeps about -1e30).
    if (withLse) lse(i, h) = mx + log(w1 + w2);
  }
  if (withLse) B.more_out.push_back(lse);
  B.log << sparse::picture(p, 16 * p.block);

  /* THE SCHEDULE: GPU */
  if (B.gpu) {
    if (withLse) throw std::runtime_error("kernel " + k.kind + ": the lse result has a CPU schedule only (for now)");
    B.gpuRows(out, {e, i, h});
    return out;
  }
  /* THE SCHEDULE: CPU: heads in sequence, P of one head at a time with its query blocks in
   * parallel; then out, read through each part's inverse query order, in parallel tasks of
   * 256 rows (one serial loop took a seventh of a strided pattern's time on 2 threads); two
   * parts' log-sum-exp weights once per row of a task, vectorized over the rows. */
  int we = largestDivisor(E, B.vec());
  if (we > 1) B.s(out).vectorize(e, we);
  Var io("io"), ii("ii");
  B.s(out).split(i, io, ii, 256, TailStrategy::GuardWithIf);
  if (B.parallel()) B.s(out).parallel(io);
  if (P.size() > 1) {
    B.s(merge).compute_at(out, io);
    B.vectorize(merge, i, 256);
  }
  if (withLse) {
    B.s(lse).split(i, io, ii, 256, TailStrategy::GuardWithIf);
    if (B.parallel()) B.s(lse).parallel(io);
  }
  return out;
}

}  // namespace kiln::codegen
