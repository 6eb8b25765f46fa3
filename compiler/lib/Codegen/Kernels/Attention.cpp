// Attention.cpp - softmax(q·kᵀ·scale + mask)·v per head: q(d, i, h), k(d, j, h), v(e, j, h) -> out(e, i, h).
//   * over a whole sequence (dense or causal, no cache): the online block engine with every key
//     block up to the diagonal (BlockAttention.cpp); queries and keys may differ in length
//     (causal: query i sees keys j <= i + Lk - Lq);
//   * over a cache (`past` or a key count) and for decode steps (a short static query length):
//     row strips of scores, softmax and P·V per query block.
#include "BlockAttention.h"

namespace kiln::codegen {

Func buildSequenceAttention(Builder &B) {
  const KernelSpec &k = B.k;
  const bool causal = k.gets("mask") == "causal";
  const int Bq = 64, E = (int)k.inputs[2].dims[2];
  Expr Lq = B.in[0].dim(1).extent(), Lk = B.in[1].dim(1).extent(), off = Lk - Lq;

  /* THE ALGORITHM */
  BlockAttention ba;
  ba.block = Bq;
  ba.nkb = (Lk + Bq - 1) / Bq;
  ba.slots = ba.nkb;
  ba.keyBlock = [](Expr, Expr j) { return j; };
  Expr nkb = ba.nkb;
  ba.slotLimit = [=](Expr qo) {
    return causal ? clamp((qo * Bq + Bq - 1 + off) / Bq + 1, 0, nkb) : nkb;  // blocks up to the last row's diagonal
  };
  ba.qrow = [](Expr qx, Expr) { return qx; };
  ba.krow = [](Expr kx, Expr) { return kx; };
  ba.head = [](Expr g) { return g; };
  ba.ok = [=](Expr qx, Expr kx, Expr, Expr, Expr) {
    Expr in = qx < Lq && kx < Lk;
    return causal ? Expr(in && kx <= qx + off) : in;
  };
  Var e("e"), i("i"), h("h"), io("io"), ii("ii"), t("t");
  Func out("out");
  // One query block at a time: scratch O(block x head dim) per task, tasks over (block, head).
  Func P = onlineBlockAttention(B, B.in[0], B.in[1], B.in[2], ba, "", out, t, true);
  Expr qb = (Lq + Bq - 1) / Bq;
  out(e, i, h) = P(e, clamp(i, 0, qb * Bq - 1), h)[0];

  /* THE SCHEDULE: GPU */
  if (B.gpu) {
    B.gpuRows(out, {e, i, h});
    return out;
  }
  /* THE SCHEDULE: CPU: P per (query block, head), in parallel. */
  B.s(out).split(i, io, ii, Bq, TailStrategy::GuardWithIf).fuse(io, h, t).parallel(t);
  int we = largestDivisor(E, B.vec);
  if (we > 1) B.s(out).vectorize(e, we);
  return out;
}

Func buildCacheAttention(Builder &B) {
  const KernelSpec &k = B.k;
  ImageParam Q = B.in[0], K = B.in[1], V = B.in[2];
  int D = (int)k.inputs[0].dims[2], E = (int)k.inputs[2].dims[2];
  float scale = (float)k.getf("scale", 1.0);
  bool causal = k.gets("mask") == "causal";
  Var d("d"), e("e"), i("i"), j("j"), h("h");
  Expr Lq = Q.dim(1).extent(), Lk = K.dim(1).extent();
  Expr off = Lk - Lq;  // causal: query i sees keys j <= i + (Lk - Lq) (aligned at the end)

  /* THE ALGORITHM */
  // Over a cache, `past` positions precede the queries and only past + Lq rows hold keys. The
  // key loops stay bounded by the cache length (an RDom's bounds cannot depend on a buffer's
  // contents), with the valid length as a predicate.
  Expr valid;
  if (k.inputs.size() > 3 && k.gets("valid") == "key_count") {  // the first n keys
    Expr n = clamp(B.in[3](0), 0, Lk);
    off = n - Lq;
    valid = n;
  } else if (k.inputs.size() > 3) {
    Expr past = B.in[3](0);
    off = past;
    valid = past + Lq;
  }
  auto limit = [&](RDom &r) {
    if (causal) r.where(r <= i + off);
    if (valid.defined()) r.where(r < valid);
  };
  Func Kt("Kt"), S("S"), m("m"), E_("E"), l("l"), o("o"), out("out");
  Kt(j, d, h) = K(d, j, h);
  RDom rd(0, D, "rd");
  S(j, i, h) = 0.0f;
  S(j, i, h) += Q(rd, clamp(i, 0, Lq - 1), h) * Kt(j, rd, h);  // rows past Lq: a block's padding
  RDom rj(0, Lk, "rj");
  limit(rj);
  m(i, h) = -std::numeric_limits<float>::infinity();
  m(i, h) = max(m(i, h), S(rj, i, h) * scale);
  Expr ev = exp(S(j, i, h) * scale - m(i, h));
  E_(j, i, h) = causal ? select(j <= i + off, ev, 0.0f) : ev;
  RDom rj2(0, Lk, "rj2");
  limit(rj2);
  l(i, h) = 0.0f;
  l(i, h) += E_(rj2, i, h);
  RDom rj3(0, Lk, "rj3");
  limit(rj3);
  o(e, i, h) = 0.0f;
  o(e, i, h) += E_(rj3, i, h) * V(e, rj3, h);
  // A row with no visible key has l = 0: its output is zeros, never NaN.
  out(e, i, h) = select(l(i, h) > 0.0f, o(e, i, h) / l(i, h), 0.0f);

  /* THE SCHEDULE: GPU
   * Each stage a GPU pass over (key or value, query) tiles of 32 x 4, per head; the scores
   * [H, Lq, Lk] in device memory. */
  if (B.gpu) {
    Var bx("bx"), by("by"), tx("tx"), ty("ty");
    B.s(S).compute_root().gpu_tile(j, i, bx, by, tx, ty, 32, 4, TailStrategy::GuardWithIf);
    B.s(S.update()).gpu_tile(j, i, bx, by, tx, ty, 32, 4, TailStrategy::GuardWithIf);
    B.s(E_).compute_root().gpu_tile(j, i, bx, by, tx, ty, 32, 4, TailStrategy::GuardWithIf);
    for (Func f : {m, l}) {
      B.s(f).compute_root().gpu_tile(i, bx, tx, 32, TailStrategy::GuardWithIf);
      B.s(f.update()).gpu_tile(i, bx, tx, 32, TailStrategy::GuardWithIf);
    }
    B.s(o).compute_root().gpu_tile(e, i, bx, by, tx, ty, 32, 4, TailStrategy::GuardWithIf);
    B.s(o.update()).gpu_tile(e, i, bx, by, tx, ty, 32, 4, TailStrategy::GuardWithIf);
    B.s(out).gpu_tile(e, i, bx, by, tx, ty, 32, 4, TailStrategy::GuardWithIf);
    return out;
  }

  /* THE SCHEDULE: CPU
   * Query blocks of qb rows per task (heads in parallel); per block the score strip [Lk x qb]
   * in register blocks of qb rows x 2 key vectors over the head dim, then max, exp, sum and
   * P.V in register blocks of up to 4 rows x the value width over the keys. */
  int qb = (int)k.geti("s.q_block", 8);
  Var io("io"), ii("ii");
  B.s(out).split(i, io, ii, qb, TailStrategy::GuardWithIf).reorder(e, ii, io, h);
  if (k.geti("s.parallel", 1)) B.s(out).parallel(h);
  int w = B.vec;
  while (w > 1 && w > E) w /= 2;
  if (w > 1) B.s(out).vectorize(e, w);
  B.s(Kt).compute_at(out, h);
  int wk = B.vec;
  if (wk > 1) B.s(Kt).vectorize(j, wk, TailStrategy::GuardWithIf);
  B.s(S).compute_at(out, io).bound_extent(i, qb);
  if (wk > 1) B.s(S).vectorize(j, wk, TailStrategy::GuardWithIf);
  Var jo("jo"), ji("ji");
  B.s(S.update()).split(j, jo, ji, 2 * wk, TailStrategy::GuardWithIf).reorder(ji, i, rd, jo);
  if (wk > 1) B.s(S.update()).vectorize(ji, wk, TailStrategy::GuardWithIf).unroll(ji);
  B.s(S.update()).unroll(i);
  B.s(m).compute_at(out, io);
  B.s(E_).compute_at(out, io);
  if (wk > 1) B.s(E_).vectorize(j, wk, TailStrategy::GuardWithIf);
  B.s(l).compute_at(out, io);
  B.s(o).compute_at(out, io).bound_extent(i, qb);
  if (w > 1) B.s(o).vectorize(e, w);
  Var oi("oi"), oii("oii");
  B.s(o.update()).split(i, oi, oii, std::min(qb, 4)).reorder(e, oii, rj3, oi);
  if (w > 1) B.s(o.update()).vectorize(e, w).unroll(e);
  B.s(o.update()).unroll(oii);
  return out;
}

}  // namespace kiln::codegen
