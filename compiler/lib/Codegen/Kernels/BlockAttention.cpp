// BlockAttention.cpp - the online-softmax block engine (FlashAttention's running max and sum over
// visited key blocks), the engine of whole-sequence, sparse and LSH attention. See BlockAttention.h.
#include "BlockAttention.h"

namespace kiln::codegen {

Func onlineBlockAttention(Builder &B, ImageParam Q, ImageParam K, ImageParam V, const BlockAttention &ba,
                          const std::string &sfx, Func out, Var outVar, bool perBlock, bool atRoot) {
  const KernelSpec &k = B.k;
  const int D = (int)k.inputs[0].dims[2], E = ba.valueWidth;
  const int Bq = ba.block, Bk = ba.keyRows > 0 ? ba.keyRows : ba.block;
  const float scale = ba.scale, kNeg = -1e30f;
  Expr Lq = Q.dim(1).extent(), Lk = K.dim(1).extent();
  Var e("e"), d("d"), qi("qi"), ki("ki"), qo("qo"), g("g"), j("j"), x("x"), xo("xo"), xi("xi");

  /* THE ALGORITHM */
  Expr kb = ba.keyBlock(qo, j), kbc = clamp(kb, 0, ba.nkb - 1), kx = kbc * Bk + ki, qx = qo * Bq + qi;
  Expr hq = ba.head(g);
  Func Qin = ba.q.defined() ? ba.q : Func(Q), Kin = ba.k.defined() ? ba.k : Func(K), Vin = ba.v.defined() ? ba.v : Func(V);
  Func Qt("Qt" + sfx), Sacc("Sacc" + sfx), S("S" + sfx), bm("bm" + sfx), Ex("E" + sfx), bs("bs" + sfx),
      bpv("bpv" + sfx), st("st" + sfx), P("P" + sfx), QRow("QRow" + sfx), KRow("KRow" + sfx);
  QRow(qi, qo, g) = ba.qrow(qx, g);
  KRow(ki, j, qo, g) = ba.krow(kx, g);
  Expr qrow = QRow(qi, qo, g), krow = KRow(ki, j, qo, g);
  Expr kp = clamp(krow, 0, Lk - 1), qp = clamp(qrow, 0, Lq - 1);
  Expr ok = kb >= 0 && kb < ba.nkb && ba.ok(qx, kx, qrow, krow, g);
  Qt(qi, d, qo, g) = Qin(d, qp, hq) * scale;
  RDom r(0, D, "r" + sfx);
  Sacc(qi, ki, j, qo, g) = 0.0f;
  Sacc(qi, ki, j, qo, g) += Qt(qi, r, qo, g) * Kin(r, kp, hq);
  Expr score = Sacc(qi, ki, j, qo, g);
  if (ba.keyScale) score = score * ba.keyScale(kp, g);
  if (ba.bias) score = score + ba.bias(qx, kx, qrow, krow, g);
  S(qi, ki, j, qo, g) = score + select(ok, 0.0f, kNeg);
  RDom rk(0, Bk, "rk" + sfx), rk2(0, Bk, "rk2" + sfx), rk3(0, Bk, "rk3" + sfx);
  bm(qi, j, qo, g) = kNeg;
  bm(qi, j, qo, g) = max(bm(qi, j, qo, g), S(qi, rk, j, qo, g));
  // Masked scores are kNeg below the row's, so exp gives 0; a row with no allowed key in the
  // block (bm = kNeg) gets exp(kNeg / 2) = 0 too, without a second evaluation of the mask.
  Ex(qi, ki, j, qo, g) = exp(S(qi, ki, j, qo, g) - max(bm(qi, j, qo, g), kNeg * 0.5f));
  bs(qi, j, qo, g) = 0.0f;
  bs(qi, j, qo, g) += Ex(qi, rk2, j, qo, g);
  Expr kp3 = clamp(KRow(rk3, j, qo, g), 0, Lk - 1);
  bpv(e, qi, j, qo, g) = 0.0f;
  bpv(e, qi, j, qo, g) += Ex(qi, rk3, j, qo, g) * Vin(e, kp3, hq);
  // The running state (acc, M, l) per row over the visited key blocks (FlashAttention's online
  // softmax; M and l are replicated over e: Tuple elements share dimensions).
  RDom rj(0, ba.slots, "rj" + sfx);
  rj.where(rj < ba.slotLimit(qo));
  st(e, qi, qo, g) = Tuple(0.0f, kNeg, 0.0f);
  // One of the two rescalings is exp(0) = 1: one exponential per element of the state, not two.
  Expr Mo = st(e, qi, qo, g)[1], bmv = bm(qi, rj, qo, g), Mn = max(Mo, bmv);
  Expr up = bmv > Mo, t = exp(-abs(Mo - bmv));
  Expr a = select(up, t, 1.0f), b = select(up, 1.0f, t);
  st(e, qi, qo, g) = Tuple(st(e, qi, qo, g)[0] * a + bpv(e, qi, rj, qo, g) * b, Mn, st(e, qi, qo, g)[2] * a + bs(qi, rj, qo, g) * b);
  // The normalized result per (row of a query block), then in query order (Pst is inlined on
  // the CPU; on the GPU it is the kernel, so a thread's bounds are its own row, not x % block).
  Func Pst("Pst" + sfx);
  Expr l = st(e, qi, qo, g)[2], M = st(e, qi, qo, g)[1];
  Pst(e, qi, qo, g) = Tuple(select(l > 0.0f, st(e, qi, qo, g)[0] / l, 0.0f), select(l > 0.0f, M + log(l), kNeg));
  P(e, x, g) = Tuple(Pst(e, x % Bq, x / Bq, g));

  /* THE SCHEDULE: GPU
   * One GPU block per (query block, g), one thread per query row: the row's state, scores and
   * P.V over each visited key block in the thread's registers and local memory. A GPU thread's
   * allocations are sized over its whole loop nest: one key block at a time (bound_extent), so
   * the scratch has a constant size and stays in local memory. */
  if (B.gpu) {
    B.s(Pst).compute_root().reorder(e, qi, qo, g).gpu_blocks(qo, g).gpu_threads(qi);
    B.s(QRow).compute_at(Pst, qi);
    B.s(Qt).compute_at(Pst, qi);
    B.s(st).compute_at(Pst, qi);
    B.s(st.update()).reorder(e, qi, rj);
    for (Func f : {KRow, Sacc, S, bm, Ex, bs, bpv}) B.s(f).compute_at(st, rj).bound_extent(j, 1);
    return P;
  }

  /* THE SCHEDULE: CPU
   * P for all query blocks of g, in parallel; per block the state over the slots. Scores in
   * register tiles of tq queries x tk keys vectorized over queries; P.V over e. */
  const int w = B.vec(), we = largestDivisor(E, w), wq = largestDivisor(Bq, w);
  const int tq = std::min(32, Bq), tk = largestDivisor(Bk, 8), pvq = largestDivisor(Bq, 4);
  Var qio("qio"), qii("qii"), kio("kio"), kii("kii");
  if (!atRoot) {
    B.s(P).compute_at(out, outVar).split(x, xo, xi, Bq, TailStrategy::RoundUp);
    if (!perBlock && B.parallel()) B.s(P).parallel(xo);
  } else {  // at root, read by several outputs: query blocks of every head in parallel
    B.s(P).compute_root().split(x, xo, xi, Bq, TailStrategy::RoundUp);
    if (B.parallel()) B.s(P).parallel(xo).parallel(g);
  }
  if (we > 1) B.s(P).vectorize(e, we);
  if (ba.gatherRows) B.s(QRow).compute_at(P, xo);
  B.s(Qt).compute_at(P, xo);
  if (wq > 1) B.s(Qt).vectorize(qi, wq);
  B.s(st).compute_at(P, xo);
  if (we > 1) B.s(st).vectorize(e, we);
  B.s(st.update()).split(qi, qio, qii, pvq).reorder(e, qii, qio, rj);
  if (we > 1) B.s(st.update()).vectorize(e, we).unroll(e);
  B.s(st.update()).unroll(qii);
  if (ba.gatherRows) B.s(KRow).compute_at(st, rj);
  B.s(S).compute_at(st, rj).tile(qi, ki, qio, kio, qii, kii, tq, tk, TailStrategy::RoundUp).unroll(kii);
  if (wq > 1) B.s(S).vectorize(qii, wq).unroll(qii);
  B.s(Sacc).compute_at(S, qio).unroll(ki);
  B.s(Sacc.update()).reorder(qi, ki, r).unroll(ki);
  if (wq > 1) B.s(Sacc).vectorize(qi, wq).unroll(qi), B.s(Sacc.update()).vectorize(qi, wq).unroll(qi);
  B.s(bm).compute_at(st, rj);
  B.s(bm.update()).reorder(qi, rk);
  B.s(Ex).compute_at(st, rj);
  B.s(bs).compute_at(st, rj);
  B.s(bs.update()).reorder(qi, rk2);
  if (wq > 1) {
    B.s(bm).vectorize(qi, wq), B.s(bm.update()).vectorize(qi, wq).unroll(qi);
    B.s(Ex).vectorize(qi, wq).unroll(qi);
    B.s(bs).vectorize(qi, wq), B.s(bs.update()).vectorize(qi, wq).unroll(qi);
  }
  B.s(bpv).compute_at(st, qio).unroll(qi);
  B.s(bpv.update()).reorder(e, qi, rk3).unroll(qi);
  if (we > 1) B.s(bpv).vectorize(e, we).unroll(e), B.s(bpv.update()).vectorize(e, we).unroll(e);
  return P;
}

}  // namespace kiln::codegen
