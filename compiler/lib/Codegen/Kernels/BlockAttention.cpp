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
  Expr hq = ba.head(g), hkv = ba.kvHead ? ba.kvHead(g) : hq;
  Func Qin = ba.q.defined() ? ba.q : Func(Q), Kin = ba.k.defined() ? ba.k : Func(K), Vin = ba.v.defined() ? ba.v : Func(V);
  Func Qt("Qt" + sfx), Qg("Qg" + sfx), st("st" + sfx), P("P" + sfx), QRow("QRow" + sfx);
  QRow(qi, qo, g) = ba.qrow(qx, g);
  Expr qrow = QRow(qi, qo, g), qp = clamp(qrow, 0, Lq - 1);
  // The query block's rows (Qg), transposed so the scores vectorize over queries (Qt).
  Qg(d, qi, qo, g) = Qin(d, qp, hq);
  Qt(qi, d, qo, g) = Qg(d, qi, qo, g) * scale;
  // One key block's scores, softmax terms and P.V (Funcs of slot j). On the CPU the first visited
  // slot gets a set of its own (`first`: masked past the block's slot limit, which may be 0), so
  // the running state below starts from it instead of rescaling the initial state.
  struct Slot {
    Func KRow, Sacc, S, bm, Ex, bs, bpv;
    RDom r, rk, rk2, rk3;
  };
  auto slotFuncs = [&](const std::string &tag, bool first) {
    Slot f{Func("KRow" + tag + sfx), Func("Sacc" + tag + sfx), Func("S" + tag + sfx), Func("bm" + tag + sfx),
           Func("E" + tag + sfx), Func("bs" + tag + sfx), Func("bpv" + tag + sfx),
           RDom(0, D, "r" + tag + sfx), RDom(0, Bk, "rk" + tag + sfx), RDom(0, Bk, "rk2" + tag + sfx),
           RDom(0, Bk, "rk3" + tag + sfx)};
    f.KRow(ki, j, qo, g) = ba.krow(kx, g);
    Expr krow = f.KRow(ki, j, qo, g), kp = clamp(krow, 0, Lk - 1);
    Expr ok = kb >= 0 && kb < ba.nkb && ba.ok(qx, kx, qrow, krow, g);
    if (first) ok = ok && j < ba.slotLimit(qo);
    f.Sacc(qi, ki, j, qo, g) = 0.0f;
    f.Sacc(qi, ki, j, qo, g) += Qt(qi, f.r, qo, g) * Kin(f.r, kp, hkv);
    Expr score = f.Sacc(qi, ki, j, qo, g);
    if (ba.keyScale) score = score * ba.keyScale(kp, g);
    if (ba.bias) score = score + ba.bias(qx, kx, qrow, krow, g);
    f.S(qi, ki, j, qo, g) = score + select(ok, 0.0f, kNeg);
    f.bm(qi, j, qo, g) = kNeg;
    f.bm(qi, j, qo, g) = max(f.bm(qi, j, qo, g), f.S(qi, f.rk, j, qo, g));
    // Masked scores are kNeg below the row's, so exp gives 0; a row with no allowed key in the
    // block (bm = kNeg) gets exp(kNeg / 2) = 0 too, without a second evaluation of the mask.
    f.Ex(qi, ki, j, qo, g) = exp(f.S(qi, ki, j, qo, g) - max(f.bm(qi, j, qo, g), kNeg * 0.5f));
    f.bs(qi, j, qo, g) = 0.0f;
    f.bs(qi, j, qo, g) += f.Ex(qi, f.rk2, j, qo, g);
    Expr kp3 = clamp(f.KRow(f.rk3, j, qo, g), 0, Lk - 1);
    f.bpv(e, qi, j, qo, g) = 0.0f;
    f.bpv(e, qi, j, qo, g) += f.Ex(qi, f.rk3, j, qo, g) * Vin(e, kp3, hkv);
    return f;
  };
  const bool peel = !B.gpu;
  Slot sl = slotFuncs("", false), s0;
  // The running state (acc, M, l) per row over the visited key blocks (FlashAttention's online
  // softmax; M and l are replicated over e: Tuple elements share dimensions). From the initial
  // state (0, -1e30, 0) the first slot's update would give exactly its own (bpv, bm, bs): on the
  // CPU the state starts there (a row with no allowed key: (0, -1e30, 0) all the same) and the
  // update runs over the later slots; the GPU updates from the initial state over all of them.
  RDom rj(peel ? 1 : 0, peel ? ba.slots - 1 : ba.slots, "rj" + sfx);
  rj.where(rj < ba.slotLimit(qo));
  if (peel) {
    s0 = slotFuncs("first", true);
    st(e, qi, qo, g) = Tuple(s0.bpv(e, qi, 0, qo, g), s0.bm(qi, 0, qo, g), s0.bs(qi, 0, qo, g));
  } else {
    st(e, qi, qo, g) = Tuple(0.0f, kNeg, 0.0f);
  }
  // One of the two rescalings is exp(0) = 1: one exponential per element of the state, not two.
  Expr Mo = st(e, qi, qo, g)[1], bmv = sl.bm(qi, rj, qo, g), Mn = max(Mo, bmv);
  Expr up = bmv > Mo, t = exp(-abs(Mo - bmv));
  Expr a = select(up, t, 1.0f), b = select(up, 1.0f, t);
  st(e, qi, qo, g) = Tuple(st(e, qi, qo, g)[0] * a + sl.bpv(e, qi, rj, qo, g) * b, Mn,
                           st(e, qi, qo, g)[2] * a + sl.bs(qi, rj, qo, g) * b);
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
    for (Func f : {sl.KRow, sl.Sacc, sl.S, sl.bm, sl.Ex, sl.bs, sl.bpv}) B.s(f).compute_at(st, rj).bound_extent(j, 1);
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
  if (wq > 1 && D % wq == 0 && ba.gatherRows && ba.gatherQueryRows) {
    // Gathered rows, in tiles of wq x wq: wq rows read whole (dense vectors over d), then
    // transposed, instead of one scalar load per element (which took 40% of a strided
    // pattern's global part). Rows in order keep the strided read (no faster this way).
    Var qto("qto"), dto("dto"), qti("qti"), dti("dti");
    B.s(Qt).tile(qi, d, qto, dto, qti, dti, wq, wq).vectorize(qti).unroll(dti);
    B.s(Qg).compute_at(Qt, dto).vectorize(d).unroll(qi);
  } else if (wq > 1) {
    B.s(Qt).vectorize(qi, wq);
  }
  B.s(st).compute_at(P, xo);
  if (we > 1) B.s(st).vectorize(e, we);
  B.s(st.update()).split(qi, qio, qii, pvq).reorder(e, qii, qio, rj);
  if (we > 1) B.s(st.update()).vectorize(e, we).unroll(e);
  B.s(st.update()).unroll(qii);
  // A slot's Funcs at loop `at` of st (the update's rj; the first slot's: P's query block, before
  // st): scores in register tiles, P.V over e.
  auto scheduleSlot = [&](Slot f, Func consumer, const VarOrRVar &at, bool one) {
    if (ba.gatherRows) B.s(f.KRow).compute_at(consumer, at);
    B.s(f.S).compute_at(consumer, at).tile(qi, ki, qio, kio, qii, kii, tq, tk, TailStrategy::RoundUp).unroll(kii);
    if (wq > 1) B.s(f.S).vectorize(qii, wq).unroll(qii);
    B.s(f.Sacc).compute_at(f.S, qio).unroll(ki);
    B.s(f.Sacc.update()).reorder(qi, ki, f.r).unroll(ki);
    if (wq > 1) B.s(f.Sacc).vectorize(qi, wq).unroll(qi), B.s(f.Sacc.update()).vectorize(qi, wq).unroll(qi);
    B.s(f.bm).compute_at(consumer, at);
    B.s(f.bm.update()).reorder(qi, f.rk);
    B.s(f.Ex).compute_at(consumer, at);
    B.s(f.bs).compute_at(consumer, at);
    B.s(f.bs.update()).reorder(qi, f.rk2);
    if (wq > 1) {
      B.s(f.bm).vectorize(qi, wq), B.s(f.bm.update()).vectorize(qi, wq).unroll(qi);
      B.s(f.Ex).vectorize(qi, wq).unroll(qi);
      B.s(f.bs).vectorize(qi, wq), B.s(f.bs.update()).vectorize(qi, wq).unroll(qi);
    }
    if (one) {  // the first slot's, per query block: one qo (Halide cannot prove it from x / block)
      for (Func fn : {f.S, f.bm, f.Ex, f.bs}) B.s(fn).bound_extent(qo, 1);
      if (ba.gatherRows) B.s(f.KRow).bound_extent(qo, 1);
    }
  };
  scheduleSlot(sl, st, rj, false);
  B.s(sl.bpv).compute_at(st, qio).unroll(qi);
  B.s(sl.bpv.update()).reorder(e, qi, sl.rk3).unroll(qi);
  if (we > 1) B.s(sl.bpv).vectorize(e, we).unroll(e), B.s(sl.bpv.update()).vectorize(e, we).unroll(e);
  if (peel) {
    // The first slot, computed per query block before st starts from it; its P.V in blocks of
    // pvq rows as the update's.
    scheduleSlot(s0, P, xo, true);
    B.s(s0.bpv).compute_at(P, xo).bound_extent(qo, 1).split(qi, qio, qii, pvq).reorder(e, qii, qio).unroll(qii);
    if (we > 1) B.s(s0.bpv).vectorize(e, we).unroll(e);
    B.s(s0.bpv.update()).split(qi, qio, qii, pvq).reorder(e, qii, s0.rk3, qio).unroll(qii);
    if (we > 1) B.s(s0.bpv.update()).vectorize(e, we).unroll(e);
  }
  return P;
}

}  // namespace kiln::codegen
