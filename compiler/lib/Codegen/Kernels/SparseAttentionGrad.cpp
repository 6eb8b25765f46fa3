// SparseAttentionGrad.cpp - a block-sparse attention's gradient with respect to its query, key
// or value (kiln.attention_grad with a sparse pattern), over the forward's block schedule: the
// work is the visited blocks', as the forward's.
//
// The forward's parts are disjoint (the second excludes the first's pairs) and merged by
// log-sum-exp, which makes one softmax over the union; with the merged row's lse (the forward's
// second result) and D = rowsum(grad · out), each part's pairs give their share:
//   P = exp(scale · q·k - lse),  dP = grad·v,  dS = P · (dP - D)
//   dq = scale Σ dS k;  dk = scale Σ dS q;  dv = Σ P grad
// and a position's gradient is the sum of its parts'. Each part works in its own orders (a
// stride transpose, a summary gather), in blocks of the schedule's size:
//   * dq per query block, over the key blocks the forward visits for it (its slots);
//   * dk, dv per key block, over the query blocks that visit it: for a range rule the forward's
//     [lo, hi] grow with the query block, so they are a range too, found once per call; for a
//     user layout, the layout's columns as a table.
// Per (block, slot) the scores, dP and dS of the block x block pairs are computed in register tiles,
// then summed into the block's rows; nothing [L, L] is stored.
#include "Product.h"
#include "SparseExpr.h"

namespace kiln::codegen {

Func buildSparseAttentionGrad(Builder &B) {
  const KernelSpec &k = B.k;
  if (B.gpu) throw std::runtime_error("kernel " + k.kind + " has CPU schedules only (for now)");
  AttentionGradOp op = B.op<AttentionGradOp>();
  const sparse::Pattern p = patternOf(op).value_or(sparse::Pattern());
  if (p.schedule.empty() || p.schedule.size() > 2)
    throw std::runtime_error("kernel " + k.kind + ": a sparse pattern needs its block schedule of one or two parts (kiln.sparse)");
  ImageParam O = B.in[3], G = B.in[4], LSE = B.in[5];
  const int Bk = B.need(B.sch.block, "block"), D = (int)k.inputs[0].dims[2], E = (int)k.inputs[2].dims[2];
  // Mixed precision (precision = bf16): q, k and v rounded to bfloat16 as the forward rounded
  // them, into copies made once (the gradient of attention over the rounded operands, passed to
  // q, k and v as it is); everything else in f32.
  Func Q = attentionOperand(B, B.in[0], D, "Qr"), K = attentionOperand(B, B.in[1], D, "Kr"),
       V = attentionOperand(B, B.in[2], E, "Vr");
  const float scale = op.getScale().convertToFloat();
  const bool queries = op.getWrt() == AttentionGradWrt::query, value = op.getWrt() == AttentionGradWrt::value;
  const int W = value ? E : D;  // the result's row
  const int v = B.vec();
  const TailStrategy gw = TailStrategy::GuardWithIf;
  Expr L = B.in[0].dim(1).extent();

  /* THE ALGORITHM */
  ExprOps ops;
  setLayoutTable(ops, p);
  sparse::Math<ExprOps> m{p, ops, L};
  auto row = [&](Expr r) { return clamp(r, 0, L - 1); };
  Var c("c"), i("i"), h("h"), x("x"), qi("qi"), ki("ki"), bo("bo"), t("t");
  Func drow("drow");  // D per query row
  RDom re(0, E, "re");
  drow(i, h) = 0.0f;
  drow(i, h) += G(re, i, h) * O(re, i, h);
  std::vector<sparse::Part> parts = p.parts();
  std::vector<Func> partOut;  // per part: the gradient rows (c, x, h) in the part's order
  std::vector<std::function<void()>> schedules;
  for (size_t n = 0; n < parts.size(); ++n) {
    const sparse::Part pt = parts[n];
    const std::string sfx = std::to_string(n);
    Expr nqb = m.blocks(pt.q), nkb = m.blocks(pt.k);
    // The slots of result block bo: the other side's blocks, `other(bo, j)` for j < count(bo).
    std::function<Expr(Expr, Expr)> other;
    std::function<Expr(Expr)> count;
    Expr slots;
    Func qlo("qlo" + sfx), qhi("qhi" + sfx);
    if (pt.rule == sparse::Rule::Table) {
      std::vector<std::vector<int64_t>> lists(ops.n);
      for (int r = 0; r < ops.n; ++r)
        for (int64_t cb : sparse::tableBlocks(p, r)) {
          if (queries) lists[r].push_back(cb);
          else lists[cb].push_back(r);
        }
      BlockTable tb = blockTable(lists, sfx);
      Buffer<int32_t> idx = tb.idx, cnt = tb.cnt;
      int rows = tb.rows, ms = tb.slots;
      other = [=](Expr b, Expr j) { return idx(clamp(j, 0, ms - 1), clamp(b, 0, rows - 1)); };
      count = [=](Expr b) { return select(b < rows, cnt(clamp(b, 0, rows - 1)), 0); };
      slots = ms;
    } else if (queries) {
      other = [=](Expr b, Expr j) { return m.lo(pt, b) + j; };
      count = [=](Expr b) { return m.hi(pt, b) - m.lo(pt, b) + 1; };
      slots = nkb;
    } else {
      // The query blocks that visit key block b: [lo, hi] grow with the query block, so those
      // with lo <= b <= hi are a range, found by a search over the query blocks.
      RDom rq(0, nqb, "rq" + sfx);
      Expr visits = m.lo(pt, rq) <= bo && bo <= m.hi(pt, rq);
      qlo(bo) = minimum(select(visits, rq, nqb));
      qhi(bo) = maximum(select(visits, rq, -1));
      other = [=](Expr b, Expr j) { return qlo(b) + j; };
      count = [=](Expr b) { return qhi(b) - qlo(b) + 1; };
      slots = nqb;
    }
    RDom rs(0, slots, "rs" + sfx);
    rs.where(rs < count(bo));
    // Block bo's rows (index within the block: qi for queries, ki for keys) and slot j's.
    Var j("j");
    // A layout's table may name blocks past the sequence's: those slots add nothing.
    Expr nOther = queries ? nkb : nqb, obRaw = other(bo, j), ob = clamp(obRaw, 0, nOther - 1);
    Expr qx = queries ? bo * Bk + qi : ob * Bk + qi, kx = queries ? ob * Bk + ki : bo * Bk + ki;
    Expr qpos = m.pos(pt.q, qx), kpos = m.pos(pt.k, kx);
    Expr ok = obRaw >= 0 && obRaw < nOther && qx < m.length(pt.q) && qpos < L && kx < m.length(pt.k) && kpos < L &&
              m.allowedPart(pt, qpos, kpos);
    Func qr("qrow" + sfx), kr("krow" + sfx);  // rows of the block's and the slot's positions
    if (queries) {
      qr(qi, bo, h) = row(qpos);
      kr(ki, j, bo, h) = row(kpos);
    } else {
      qr(qi, j, bo, h) = row(qpos);
      kr(ki, bo, h) = row(kpos);
    }
    Expr qrow = queries ? qr(qi, bo, h) : qr(qi, j, bo, h);  // the pair's query row (its lse and D)
    auto qrowAt = [&](Expr q_) { return queries ? qr(q_, bo, h) : qr(q_, j, bo, h); };
    auto krowAt = [&](Expr k_) { return queries ? kr(k_, j, bo, h) : kr(k_, bo, h); };
    Func acc("acc" + sfx), pr("p" + sfx), ds("ds" + sfx);
    // The slot's rows copied once per slot into tiles the products read contiguously (vectors
    // along the slot's rows, or along the features with the features clamped): a product
    // reading them through the row table directly would gather every vector.
    Var f("f");
    Func aT("a_t" + sfx), bT("b_t" + sfx), cR("c_rows" + sfx);
    Product S, dP;
    Product part;
    if (queries) {
      aT(ki, f, j, bo, h) = K(clamp(f, 0, D - 1), krowAt(ki), h);       // k, along keys
      bT(ki, f, j, bo, h) = V(clamp(f, 0, E - 1), krowAt(ki), h);       // v, along keys
      cR(c, ki, j, bo, h) = K(clamp(c, 0, D - 1), krowAt(ki), h);       // k, along features
      // Scores s(ki, qi), vectors along the slot's keys.
      S = product("s" + sfx, [&](Expr r) { return Q(r, qrowAt(qi), h); }, [&](Expr r) { return aT(ki, r, j, bo, h); }, D,
                  {ki, qi, j, bo, h});
      dP = product("dp" + sfx, [&](Expr r) { return G(r, qrowAt(qi), h); }, [&](Expr r) { return bT(ki, r, j, bo, h); }, E,
                   {ki, qi, j, bo, h});
      ds(ki, qi, j, bo, h) = select(ok, exp(S.s(ki, qi, j, bo, h) * scale - LSE(qrow, h)) * (dP.s(ki, qi, j, bo, h) - drow(qrow, h)), 0.0f);
      // The block's rows' sums over the slot's keys: part(c, qi) = Σ_ki dS(ki, qi) k(c, ki).
      part = product("dq" + sfx, [&](Expr r) { return ds(r, qi, j, bo, h); }, [&](Expr r) { return cR(c, r, j, bo, h); }, Bk,
                     {c, qi, j, bo, h});
      acc(c, qi, bo, h) = 0.0f;
      acc(c, qi, bo, h) += part.s(c, qi, rs, bo, h);
    } else {
      aT(qi, f, j, bo, h) = Q(clamp(f, 0, D - 1), qrowAt(qi), h);       // q, along queries
      bT(qi, f, j, bo, h) = G(clamp(f, 0, E - 1), qrowAt(qi), h);       // grad, along queries
      // Scores s(qi, ki), vectors along the slot's queries.
      S = product("s" + sfx, [&](Expr r) { return K(r, krowAt(ki), h); }, [&](Expr r) { return aT(qi, r, j, bo, h); }, D,
                  {qi, ki, j, bo, h});
      pr(qi, ki, j, bo, h) = select(ok, exp(S.s(qi, ki, j, bo, h) * scale - LSE(qrow, h)), 0.0f);
      if (value) {
        cR(c, qi, j, bo, h) = G(clamp(c, 0, E - 1), qrowAt(qi), h);     // grad, along features
        part = product("dv" + sfx, [&](Expr r) { return pr(r, ki, j, bo, h); }, [&](Expr r) { return cR(c, r, j, bo, h); }, Bk,
                       {c, ki, j, bo, h});
      } else {
        cR(c, qi, j, bo, h) = Q(clamp(c, 0, D - 1), qrowAt(qi), h);     // q, along features
        dP = product("dp" + sfx, [&](Expr r) { return V(r, krowAt(ki), h); }, [&](Expr r) { return bT(qi, r, j, bo, h); }, E,
                     {qi, ki, j, bo, h});
        ds(qi, ki, j, bo, h) = pr(qi, ki, j, bo, h) * (dP.s(qi, ki, j, bo, h) - drow(qrow, h));
        part = product("dk" + sfx, [&](Expr r) { return ds(r, ki, j, bo, h); }, [&](Expr r) { return cR(c, r, j, bo, h); }, Bk,
                       {c, ki, j, bo, h});
      }
      acc(c, ki, bo, h) = 0.0f;
      acc(c, ki, bo, h) += part.s(c, ki, rs, bo, h);
    }
    Func res("part" + sfx);
    res(c, x, h) = acc(c, x % Bk, x / Bk, h) * (value ? 1.0f : scale);
    partOut.push_back(res);

    /* THE SCHEDULE (per part): the part's blocks of every head as parallel tasks; per task the
     * block's row table and its sums, slot by slot; per slot the slot's rows, the tiles of
     * scores, dP and dS, and the products into the sums. */
    schedules.push_back([=, &B]() mutable {
      Var xo("xo"), xi("xi");
      Var rv = queries ? qi : ki;  // the block's rows in acc
      B.s(res).compute_root().split(x, xo, xi, Bk, TailStrategy::RoundUp).reorder(c, xi, xo, h).fuse(xo, h, t);
      if (B.parallel()) B.s(res).parallel(t);
      B.s(res).vectorize(c, std::min(v, W), gw);
      B.s(acc).compute_at(res, t).vectorize(c, std::min(v, W), gw);
      B.s(acc.update()).reorder(c, rv, rs).vectorize(c, std::min(v, W), gw);
      // The slot's tiles: vectors along their first var.
      B.s(aT).compute_at(acc, rs).vectorize(queries ? ki : qi, v, gw);
      B.s(cR).compute_at(acc, rs).vectorize(c, v, gw);
      if (queries || !value) B.s(bT).compute_at(acc, rs).vectorize(queries ? ki : qi, v, gw);
      if (queries) {
        B.s(qr).compute_at(res, t);
        B.s(kr).compute_at(acc, rs);
        scheduleProduct(B, S, acc, rs, ki, qi);
        scheduleProduct(B, dP, acc, rs, ki, qi);
        B.s(ds).compute_at(acc, rs).vectorize(ki, v, gw);
        scheduleProduct(B, part, acc, rs, c, qi);
      } else {
        B.s(kr).compute_at(res, t);
        B.s(qr).compute_at(acc, rs);
        scheduleProduct(B, S, acc, rs, qi, ki);
        B.s(pr).compute_at(acc, rs).vectorize(qi, v, gw);
        if (!value) {
          scheduleProduct(B, dP, acc, rs, qi, ki);
          B.s(ds).compute_at(acc, rs).vectorize(qi, v, gw);
        }
        scheduleProduct(B, part, acc, rs, c, ki);
        if (pt.rule != sparse::Rule::Table) {
          B.s(qlo).compute_root();
          B.s(qhi).compute_root();
        }
      }
    });
  }
  // Each position's gradient: its parts' rows (a summary gather holds only the summary keys).
  Func out("out");
  Expr total = 0.0f;
  for (size_t n = 0; n < parts.size(); ++n) {
    const sparse::Part &pt = parts[n];
    if (queries) {
      total = total + partOut[n](c, clamp(m.inv(pt.q, i), 0, m.blocks(pt.q) * Bk - 1), h);
    } else {
      Expr at = clamp(m.invKey(pt.k, i), 0, m.blocks(pt.k) * Bk - 1);
      total = total + select(m.holds(pt.k, i), partOut[n](c, at, h), 0.0f);
    }
  }
  out(c, i, h) = total;
  B.log << sparse::picture(p, 16 * p.block);

  /* THE SCHEDULE: CPU (each part's above); D per row at root, heads in parallel; the result
   * in tasks of rows_per_task rows (kiln-tile-ops'). */
  B.s(drow).compute_root();
  if (B.parallel()) B.s(drow).parallel(h), B.s(drow.update()).parallel(h);
  for (auto &s : schedules) s();
  Var io("io"), ii("ii");
  B.s(out).split(i, io, ii, B.need(B.sch.rows_per_task, "rows_per_task"), gw).vectorize(c, std::min(v, W), gw);
  if (B.parallel()) B.s(out).parallel(io);
  return out;
}

}  // namespace kiln::codegen
