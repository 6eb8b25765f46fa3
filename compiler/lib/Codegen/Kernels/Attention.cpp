// Attention.cpp - softmax(q·kᵀ·scale + mask)·v per head: q(d, i, h), k(d, j, h), v(e, j, h) -> out(e, i, h),
// (grouped-query attention: query head h reads key and value head h / G when the keys have
// 1/G of the query heads), by the engine kiln-tile-ops chose (the schedule's `engine`):
//   * online_block: over a whole sequence (dense or causal, no cache), the online block engine
//     with every key block up to the diagonal (BlockAttention.cpp), blocks of q_block queries
//     and k_block keys (q_block when unset); queries and keys may differ in length (causal:
//     query i sees keys j <= i + Lk - Lq);
//   * row_strip: over a cache (`past` or a key count) and for decode steps (a short static query
//     length), row strips of scores, softmax and P·V per block of q_block queries; a sliding
//     window there (mask window, pattern_size w: query i sees keys i + off - w < j <= i + off)
//     is a predicate on the keys, as causal is.
#include "BlockAttention.h"

namespace kiln::codegen {

Func buildSequenceAttention(Builder &B) {
  const KernelSpec &k = B.k;
  AttentionOp op = B.op<AttentionOp>();
  const bool causal = op.getMask() == MaskKind::causal;
  const int Bq = B.need(B.sch.q_block, "q_block"), E = (int)k.inputs[2].dims[2];
  const int Bk = B.sch.k_block ? (int)*B.sch.k_block : Bq;
  if (Bq < 1 || Bk < 1)
    throw std::runtime_error("kernel " + k.kind + ": q_block " + std::to_string(Bq) + " and k_block " + std::to_string(Bk) +
                             " must be positive");
  Expr Lq = B.in[0].dim(1).extent(), Lk = B.in[1].dim(1).extent(), off = Lk - Lq;

  /* THE ALGORITHM */
  BlockAttention ba;
  ba.block = Bq;
  ba.keyRows = Bk;
  ba.scale = op.getScale().convertToFloat();
  ba.valueWidth = E;
  ba.nkb = (Lk + Bk - 1) / Bk;
  ba.slots = ba.nkb;
  ba.keyBlock = [](Expr, Expr j) { return j; };
  Expr nkb = ba.nkb;
  ba.slotLimit = [=](Expr qo) {
    return causal ? clamp((qo * Bq + Bq - 1 + off) / Bk + 1, 0, nkb) : nkb;  // blocks up to the last row's diagonal
  };
  ba.qrow = [](Expr qx, Expr) { return qx; };
  ba.krow = [](Expr kx, Expr) { return kx; };
  ba.gatherRows = false;
  ba.head = [](Expr g) { return g; };
  // Grouped-query attention: query head h reads key and value head h / G (G query heads a group).
  const int G = (int)(k.inputs[0].dims[0] / k.inputs[1].dims[0]);
  if (G > 1) ba.kvHead = [=](Expr g) { return g / G; };
  ba.ok = [=](Expr qx, Expr kx, Expr, Expr, Expr) {
    Expr in = qx < Lq && kx < Lk;
    return causal ? Expr(in && kx <= qx + off) : in;
  };
  Var e("e"), i("i"), h("h"), io("io"), ii("ii"), t("t");
  Func out("out");
  // One query block at a time: scratch O(block x head dim) per task, tasks over (block, head).
  // With the lse result (kiln.attention's second, for the backward: each row's log-sum-exp,
  // from the same running state, which the engine replicates over e), P is computed at root
  // and both outputs copy from it: scratch the size of the output twice over.
  const bool withLse = !k.more_outputs.empty();
  // Mixed precision (precision = bf16, kiln-assign-precision): q, k and v rounded to bfloat16
  // once, into copies the engine reads; the scores, the softmax and the weighted sum in f32.
  if (B.sch.precision == OperandPrecision::bf16) {
    const int D = (int)k.inputs[0].dims[2];
    ba.q = attentionOperand(B, B.in[0], D, "Qr");
    ba.k = attentionOperand(B, B.in[1], D, "Kr");
    ba.v = attentionOperand(B, B.in[2], E, "Vr");
  }
  Func P = onlineBlockAttention(B, B.in[0], B.in[1], B.in[2], ba, "", out, t, true, withLse);
  Expr qb = (Lq + Bq - 1) / Bq;
  out(e, i, h) = P(e, clamp(i, 0, qb * Bq - 1), h)[0];
  Func lse("lse");
  if (withLse) {
    lse(i, h) = P(0, clamp(i, 0, qb * Bq - 1), h)[1];
    B.more_out.push_back(lse);
  }

  /* THE SCHEDULE: GPU */
  if (B.gpu) {
    if (withLse) throw std::runtime_error("kernel " + k.kind + ": the lse result has a CPU schedule only (for now)");
    B.gpuRows(out, {e, i, h});
    return out;
  }
  /* THE SCHEDULE: CPU: tasks of (query block, head), each computing its P, or, with the
   * lse, copying it from the root P; the lse's rows per head in parallel. */
  B.s(out).split(i, io, ii, Bq, TailStrategy::GuardWithIf).fuse(io, h, t);
  if (B.parallel()) B.s(out).parallel(t);
  int we = largestDivisor(E, B.vec());
  if (we > 1) B.s(out).vectorize(e, we);
  if (withLse && B.parallel()) B.s(lse).parallel(h);
  return out;
}

Func buildCacheAttention(Builder &B) {
  const KernelSpec &k = B.k;
  AttentionOp op = B.op<AttentionOp>();
  ImageParam Q = B.in[0], K = B.in[1], V = B.in[2];
  const int D = (int)k.inputs[0].dims[2];
  const float scale = op.getScale().convertToFloat();
  const bool window = op.getMask() == MaskKind::window, causal = op.getMask() == MaskKind::causal || window;
  const int W = window ? (int)*op.getPatternSize() : 0;
  const int G = (int)(k.inputs[0].dims[0] / k.inputs[1].dims[0]);  // query heads per key head
  Var d("d"), e("e"), i("i"), j("j"), h("h");
  Expr hkv = G > 1 ? Expr(h / G) : Expr(h);
  Expr Lq = Q.dim(1).extent(), Lk = K.dim(1).extent();
  Expr off = Lk - Lq;  // causal: query i sees keys j <= i + (Lk - Lq) (aligned at the end)

  /* THE ALGORITHM */
  // Over a cache, `past` positions precede the queries and only past + Lq rows hold keys. The
  // key loops stay bounded by the cache length (an RDom's bounds cannot depend on a buffer's
  // contents), with the valid length as a predicate.
  Expr valid;
  const bool keyMask = op.getKeyMask();  // a padded batch: only the keys whose mask is nonzero
  if (op.getPast() && op.getKeyCount()) {  // the first n keys
    Expr n = clamp(B.in[3](0), 0, Lk);
    off = n - Lq;
    valid = n;
  } else if (op.getPast() && !keyMask) {
    Expr past = B.in[3](0);
    off = past;
    valid = past + Lq;
  }
  auto limit = [&](RDom &r) {
    if (causal) r.where(r <= i + off);
    if (window) r.where(r > i + off - W);
    if (valid.defined()) r.where(r < valid);
    if (keyMask) r.where(B.in[3](r) != 0);
  };
  // Mixed precision (precision = bf16): q, k and v rounded to bfloat16 as they are read (k as
  // it is transposed into Kt, or in place for a decode step); the rest in f32.
  auto rd16 = [&](Expr x) { return B.sch.precision == OperandPrecision::bf16 ? roundToBf16(x) : x; };
  Func Kt("Kt"), S("S"), m("m"), E_("E"), l("l"), o("o"), out("out");
  Kt(j, d, h) = rd16(K(d, j, hkv));
  RDom rd(0, D, "rd");
  S(j, i, h) = 0.0f;
  S(j, i, h) += rd16(Q(rd, clamp(i, 0, Lq - 1), h)) * Kt(j, rd, h);  // rows past Lq: a block's padding
  RDom rj(0, Lk, "rj");
  limit(rj);
  m(i, h) = -std::numeric_limits<float>::infinity();
  m(i, h) = max(m(i, h), S(rj, i, h) * scale);
  Expr ev = exp(S(j, i, h) * scale - m(i, h));
  E_(j, i, h) = window ? select(j <= i + off && j > i + off - W, ev, 0.0f) : causal ? select(j <= i + off, ev, 0.0f) : ev;
  RDom rj2(0, Lk, "rj2");
  limit(rj2);
  l(i, h) = 0.0f;
  l(i, h) += E_(rj2, i, h);
  RDom rj3(0, Lk, "rj3");
  limit(rj3);
  o(e, i, h) = 0.0f;
  o(e, i, h) += E_(rj3, i, h) * rd16(V(e, rj3, hkv));
  // A row with no visible key has l = 0: its output is zeros, never NaN.
  out(e, i, h) = select(l(i, h) > 0.0f, o(e, i, h) / l(i, h), 0.0f);

  /* THE SCHEDULE: GPU
   * Each stage a GPU pass over (key or value, query) tiles of gpu_tile_n x gpu_tile_m per head
   * (row reductions: gpu_tile_n queries per block); the scores [H, Lq, Lk] in device memory. */
  if (B.gpu) {
    const int tx_ = B.need(B.sch.gpu_tile_n, "gpu_tile_n"), ty_ = B.need(B.sch.gpu_tile_m, "gpu_tile_m");
    Var bx("bx"), by("by"), tx("tx"), ty("ty");
    B.s(S).compute_root().gpu_tile(j, i, bx, by, tx, ty, tx_, ty_, TailStrategy::GuardWithIf);
    B.s(S.update()).gpu_tile(j, i, bx, by, tx, ty, tx_, ty_, TailStrategy::GuardWithIf);
    B.s(E_).compute_root().gpu_tile(j, i, bx, by, tx, ty, tx_, ty_, TailStrategy::GuardWithIf);
    for (Func f : {m, l}) {
      B.s(f).compute_root().gpu_tile(i, bx, tx, tx_, TailStrategy::GuardWithIf);
      B.s(f.update()).gpu_tile(i, bx, tx, tx_, TailStrategy::GuardWithIf);
    }
    B.s(o).compute_root().gpu_tile(e, i, bx, by, tx, ty, tx_, ty_, TailStrategy::GuardWithIf);
    B.s(o.update()).gpu_tile(e, i, bx, by, tx, ty, tx_, ty_, TailStrategy::GuardWithIf);
    B.s(out).gpu_tile(e, i, bx, by, tx, ty, tx_, ty_, TailStrategy::GuardWithIf);
    return out;
  }

  /* THE SCHEDULE: CPU
   * Query blocks of qb rows per task (heads in parallel); per block the score strip [Lk x qb]
   * in register blocks of qb rows x 2 key vectors over the head dim (one row, a decode step:
   * each key's dot product read in place along the head dim), then max, exp, sum and
   * P.V in register blocks of up to 4 rows x the value width over the keys. */
  const int qb = B.need(B.sch.q_block, "q_block");
  Var io("io"), ii("ii");
  B.s(out).split(i, io, ii, qb, TailStrategy::GuardWithIf).reorder(e, ii, io, h);
  if (B.parallel()) B.s(out).parallel(h);
  const int w = B.vec();  // kiln-assign-schedule's lanes, within the value width E
  if (w > 1) B.s(out).vectorize(e, w);
  const int wk = w;
  if (qb == 1 && wk > 1 && D % wk == 0) {
    // One query row (a decode step): each key is read in place, contiguous along the head dim,
    // as wk-lane partial sums reduced across the lanes. Transposing the cache into Kt would
    // gather every key at a stride of D for a single dot product.
    B.s(S).compute_at(out, io).bound_extent(i, 1);
    RVar rdo("rdo"), rdi("rdi");
    Var l("l");
    B.s(S.update()).split(rd, rdo, rdi, wk);
    Func Sp = S.update().rfactor(rdi, l);
    B.note(funcName(Sp.name()) + " = " + funcName(S.name()) + ".update().rfactor(rdi, l): lane partial sums along the head dim");
    B.s(S.update()).reorder(rdi, i, j).atomic().vectorize(rdi);  // the lanes added as a tree
    Var pj = Sp.args()[0], pi = Sp.args()[1], ph = Sp.args()[2];
    B.s(Sp).compute_at(S, j).bound_extent(pj, 1).bound_extent(pi, 1).bound_extent(ph, 1).reorder_storage(l, pj, pi, ph).reorder(l, pj, pi, ph).vectorize(l, wk);
    B.s(Sp.update()).reorder(l, rdo).vectorize(l, wk).unroll(rdo);
  } else {
    B.s(Kt).compute_at(out, h);
    if (wk > 1) B.s(Kt).vectorize(j, wk, TailStrategy::GuardWithIf);
    B.s(S).compute_at(out, io).bound_extent(i, qb);
    if (wk > 1) B.s(S).vectorize(j, wk, TailStrategy::GuardWithIf);
    Var jo("jo"), ji("ji");
    B.s(S.update()).split(j, jo, ji, 2 * wk, TailStrategy::GuardWithIf).reorder(ji, i, rd, jo);
    if (wk > 1) B.s(S.update()).vectorize(ji, wk, TailStrategy::GuardWithIf).unroll(ji);
    B.s(S.update()).unroll(i);
  }
  B.s(m).compute_at(out, io);
  B.s(E_).compute_at(out, io);
  if (wk > 1) B.s(E_).vectorize(j, wk, TailStrategy::GuardWithIf);
  B.s(l).compute_at(out, io);
  B.s(o).compute_at(out, io).bound_extent(i, qb);
  // A value width that is no multiple of the lanes (Qwen3's head dim of 24 under 16 lanes): the
  // last vector guarded, since rounding o up to whole vectors would read past V's width.
  const TailStrategy eTail = (int)k.inputs[2].dims[2] % std::max(w, 1) ? TailStrategy::GuardWithIf : TailStrategy::Auto;
  if (w > 1) B.s(o).vectorize(e, w, eTail);
  Var oi("oi"), oii("oii");
  B.s(o.update()).split(i, oi, oii, std::min(qb, 4)).reorder(e, oii, rj3, oi);
  if (w > 1) B.s(o.update()).vectorize(e, w, eTail).unroll(e);
  B.s(o.update()).unroll(oii);
  return out;
}

}  // namespace kiln::codegen
