// LshGrad.cpp - lsh_chunk_attention's backward (kiln.lsh_chunk_attention_grad), with respect to
// the shared qk or the value. The buckets and their order are the forward's (constants).
//
// In round r the query at sorted slot s sees the key slots t in its chunk and the previous one,
// t = (s/C - 1)·C + u, u in [0, 2C), of its bucket (causal: at or before its position), itself
// with a score 1e9 lower. Merging the rounds by their log-sum-exps makes one softmax over every
// (round, key) pair of the query: with each round's lse_r (recomputed) and its weight w_r =
// softmax over the rounds of lse_r,
//   score = scale · q·k̂ (- 1e9 for itself),  k̂ = qk / |qk|,  P = exp(score - lse_r) · w_r
//   dP = grad_q·v_k,  D = grad_q·out_q,  dS = P · (dP - D)
//   dv_k = Σ P · grad_q;  dq = scale Σ dS k̂;  dk̂ = scale Σ dS q;  dqk = dq + (dk̂ - k̂ (k̂·dk̂)) / |qk|
// A key slot t is seen by the query slots s = (t/C)·C + w, w in [0, 2C) (its chunk and the
// next), so the key-side sums are gathers too, never scatters. Every sum runs in the sorted
// order of its round, over copies of qk, v and grad in that order (slots along the vectors),
// then each position adds up its slots of every round.
//
// CPU schedules: the sorted copies and each round's lse at root; the pairs of one slot (2C of
// them) computed at that slot of the sum that reads them, vectorized over the pairs; the sums
// vectorized over features, slots of every (round, head) in parallel.
#include "Kernels.h"

namespace kiln::codegen {

Func buildLshChunkAttentionGrad(Builder &B) {
  const KernelSpec &k = B.k;
  if (B.gpu) throw std::runtime_error("kernel " + k.kind + " has CPU schedules only (for now)");
  LshChunkAttentionGradOp op = B.op<LshChunkAttentionGradOp>();
  ImageParam BK = B.in[2], SO = B.in[3], O = B.in[4], G = B.in[5];
  const int C = (int)op.getChunk(), R = (int)k.inputs[2].dims[1], D = (int)k.inputs[0].dims[2];
  const int E = (int)k.inputs[1].dims[2];
  // Mixed precision (precision = bf16): qk and v rounded to bfloat16 as the forward rounded
  // them, once (the gradient at the rounded operands, passed on unchanged); the rest in f32.
  Func QK = attentionOperand(B, B.in[0], D, "QKr"), V = attentionOperand(B, B.in[1], E, "Vr");
  const bool causal = op.getCausal(), wrtQk = op.getWrt() == LshGradWrt::qk;
  const float scale = op.getScale().convertToFloat(), kNeg = -1e30f;
  Expr L = B.in[0].dim(1).extent();
  Var c("c"), e("e"), t("t"), i("i"), x("x"), y("y"), r("r"), h("h");

  /* THE ALGORITHM */
  auto clampRow = [&](Expr p) { return clamp(p, 0, L - 1); };
  auto pos = [&](Expr slot, Expr r_, Expr h_) { return clampRow(SO(clampRow(slot), 0, r_, h_)); };
  auto slotOf = [&](Expr p, Expr r_, Expr h_) { return clampRow(SO(clampRow(p), 1, r_, h_)); };
  Func knorm("knorm");
  RDom rd(0, D, "rd");
  Expr n2 = sum(QK(rd, i, h) * QK(rd, i, h));
  knorm(i, h) = select(n2 > 0.0f, 1.0f / sqrt(n2), 0.0f);
  // Sorted copies, slots along the vectors: qs the queries, ks the keys k̂, vs, gs.
  Func qs("qs"), ks("ks"), vs("vs"), gs("gs");
  qs(t, c, r, h) = QK(c, pos(t, r, h), h);
  ks(t, c, r, h) = QK(c, pos(t, r, h), h) * knorm(pos(t, r, h), h);
  vs(t, e, r, h) = V(e, pos(t, r, h), h);
  gs(t, e, r, h) = G(e, pos(t, r, h), h);
  Func drow("drow");
  RDom re(0, E, "re");
  drow(i, h) = 0.0f;
  drow(i, h) += G(re, i, h) * O(re, i, h);

  // The pairs of one slot y (x: the pair), given the query slot sS and key slot tS of (x, y):
  // the score (kNeg where masked), and, once LSE is known, P and dS.
  struct Pairs {
    Func dot, sc, p, dp, ds;
    Expr sS, tS;
  };
  auto pairs = [&](const std::string &n, Expr sS, Expr tS) {
    Pairs q{Func("dot_" + n), Func("sc_" + n), Func("p_" + n), Func("dp_" + n), Func("ds_" + n), sS, tS};
    RDom rc(0, D, "rc_" + n);
    q.dot(x, y, r, h) = 0.0f;
    q.dot(x, y, r, h) += qs(clampRow(sS), rc, r, h) * ks(clampRow(tS), rc, r, h);
    Expr qp = pos(sS, r, h), kp = pos(tS, r, h);
    Expr ok = tS >= 0 && tS < L && sS < L && BK(qp, r, h) == BK(kp, r, h);
    if (causal) ok = ok && kp <= qp;
    q.sc(x, y, r, h) = select(ok, q.dot(x, y, r, h) * scale + select(qp == kp, -1e9f, 0.0f), kNeg);
    return q;
  };
  // Each round's log-sum-exp per query slot, then every position's over its rounds.
  Pairs l = pairs("l", y, (y / C - 1) * C + x);
  RDom ru(0, 2 * C, "ru");
  Func mx("mx"), lser("lse_r"), weight("round_weight");
  mx(y, r, h) = kNeg;
  mx(y, r, h) = max(mx(y, r, h), l.sc(ru, y, r, h));
  Func ex("ex_l"), se("se_l");
  ex(x, y, r, h) = exp(l.sc(x, y, r, h) - mx(y, r, h));
  se(y, r, h) = 0.0f;
  se(y, r, h) += ex(ru, y, r, h);
  lser(y, r, h) = mx(y, r, h) + log(se(y, r, h));
  // Each round's weight in the merge, softmax over the rounds' lse at each position (relative:
  // a query that sees only itself has lse near -1e9 in every round, where an absolute LSE would
  // round away the log of the round count).
  {
    std::vector<Expr> s(R);
    for (int n = 0; n < R; ++n) s[n] = lser(slotOf(i, n, h), n, h);
    Expr m = s[0];
    for (int n = 1; n < R; ++n) m = max(m, s[n]);
    Expr tot = 0.0f, mine = 0.0f;
    for (int n = 0; n < R; ++n) {
      tot = tot + exp(s[n] - m);
      mine = select(r == n, exp(s[n] - m), mine);
    }
    weight(i, r, h) = mine / tot;  // round r's at position i
  }
  auto withGrad = [&](Pairs &q) {
    Expr qp = pos(q.sS, r, h);
    q.p(x, y, r, h) = exp(q.sc(x, y, r, h) - lser(clampRow(q.sS), r, h)) * weight(qp, r, h);
    RDom rv(0, E, "rv_" + q.dot.name());
    q.dp(x, y, r, h) = 0.0f;
    q.dp(x, y, r, h) += gs(clampRow(q.sS), rv, r, h) * vs(clampRow(q.tS), rv, r, h);
    q.ds(x, y, r, h) = q.p(x, y, r, h) * (q.dp(x, y, r, h) - drow(qp, h));
  };
  // Key side: key slot y, query slots (y/C)·C + x.
  Pairs kside = pairs("k", (y / C) * C + x, y);
  withGrad(kside);
  RDom rw(0, 2 * C, "rw");
  Expr sW = (y / C) * C + rw;  // the query slot of pair rw of key slot y
  Func out("out"), side("side"), qside("qside"), proj("proj");
  const int v = B.vec(), slots = B.need(B.sch.rows_per_task, "rows_per_task");
  const TailStrategy gw = TailStrategy::GuardWithIf;
  Var yo("yo"), yi("yi");
  // A per-slot sum at root: zeros, then the update over the slot's 2C pairs, vectorized over
  // the features f, tasks of `slots` slots (rows_per_task, kiln-tile-ops'); the pairs' values
  // computed per slot.
  auto scheduleSide = [&](Func f, Var feat, int width, const RDom &over, std::vector<Func> perSlot, std::vector<Func> reduced) {
    B.s(f).compute_root().vectorize(feat, width, gw);
    B.s(f.update()).split(y, yo, yi, slots, gw).reorder(feat, over, yi, yo, r, h).vectorize(feat, width, gw);
    if (B.parallel()) B.s(f.update()).parallel(yo);
    for (Func q : perSlot) B.s(q).compute_at(f, yi).vectorize(x, v, gw);
    for (Func q : reduced) B.s(q.update()).vectorize(x, v, gw);
  };
  if (!wrtQk) {
    // dv per round and key slot: Σ_w P · grad of the query; then per position over its rounds.
    side(e, y, r, h) = 0.0f;
    side(e, y, r, h) += kside.p(rw, y, r, h) * G(e, pos(sW, r, h), h);
    Expr total = 0.0f;
    for (int n = 0; n < R; ++n) total = total + side(e, slotOf(i, n, h), n, h);
    out(e, i, h) = total;
    scheduleSide(side, e, std::min(v, E), rw, {kside.dot}, {kside.dot});
    B.s(out).vectorize(e, std::min(v, E), gw);
  } else {
    // dk̂ per round and key slot, dq per round and query slot; per position the rounds' sums,
    // and the key part through the normalization.
    side(c, y, r, h) = 0.0f;
    side(c, y, r, h) += kside.ds(rw, y, r, h) * QK(c, pos(sW, r, h), h) * scale;
    Pairs qside2 = pairs("q", y, (y / C - 1) * C + x);
    withGrad(qside2);
    Expr tU = (y / C - 1) * C + ru;
    qside(c, y, r, h) = 0.0f;
    qside(c, y, r, h) += qside2.ds(ru, y, r, h) * QK(c, pos(tU, r, h), h) * knorm(pos(tU, r, h), h) * scale;
    Func dq("dq"), dk("dk");
    Expr sq = 0.0f, sk = 0.0f;
    for (int n = 0; n < R; ++n) sq = sq + qside(c, slotOf(i, n, h), n, h), sk = sk + side(c, slotOf(i, n, h), n, h);
    dq(c, i, h) = sq;
    dk(c, i, h) = sk;
    proj(i, h) = 0.0f;
    proj(i, h) += QK(rd, i, h) * dk(rd, i, h);
    Expr kn = knorm(i, h);
    out(c, i, h) = dq(c, i, h) + kn * (dk(c, i, h) - QK(c, i, h) * kn * kn * proj(i, h));
    const int wc = std::min(v, D);
    scheduleSide(side, c, wc, rw, {kside.ds, kside.dot, kside.dp}, {kside.dot, kside.dp});
    scheduleSide(qside, c, wc, ru, {qside2.ds, qside2.dot, qside2.dp}, {qside2.dot, qside2.dp});
    B.s(dq).compute_at(out, i).vectorize(c, wc, gw);
    B.s(dk).compute_at(out, i).vectorize(c, wc, gw);
    B.s(proj).compute_at(out, i);
    B.s(out).vectorize(c, wc, gw);
  }

  /* THE SCHEDULE: CPU (the sums above); the sorted copies, norms and statistics at root. */
  B.s(knorm).compute_root();
  B.s(drow).compute_root();
  for (Func f : {qs, ks, vs, gs}) {
    B.s(f).compute_root().vectorize(t, v, gw);
    if (B.parallel()) B.s(f).parallel(h);
  }
  B.s(lser).compute_root().split(y, yo, yi, slots, gw);
  if (B.parallel()) B.s(lser).parallel(yo);
  B.s(l.dot).compute_at(lser, yi).vectorize(x, v, gw);
  B.s(l.dot.update()).vectorize(x, v, gw);
  // A slot's scores and exponentials vectorized over its pairs; the max and sum over them.
  B.s(l.sc).compute_at(lser, yi).vectorize(x, v, gw);
  B.s(ex).compute_at(lser, yi).vectorize(x, v, gw);
  B.s(mx).compute_at(lser, yi);
  B.s(se).compute_at(lser, yi);
  B.s(weight).compute_root().bound(r, 0, R).reorder(r, i, h).unroll(r);
  if (B.parallel()) B.s(weight).parallel(h);
  if (B.parallel()) B.s(out).parallel(h);
  return out;
}

}  // namespace kiln::codegen
