// AttentionGrad.cpp - kiln.attention's backward, one kernel per operand gradient, in the
// FlashAttention manner: the probabilities are recomputed from each query row's log-sum-exp,
// a block of 16 rows (query rows, or key rows' columns) at a time, never stored [Lq, Lk].
//
//   s(j, i) = scale · q_i·k_j (masked: -inf),  lse_i = log Σ_j exp s(j, i)
//   P(j, i) = exp(s(j, i) - lse_i),  dP(j, i) = do_i·v_j,  D_i = do_i·o_i
//   dS = P · (dP - D);  dq_i = scale Σ_j dS k_j;  dk_j = scale Σ_i dS q_i;  dv_j = Σ_i P do_i
//
// dq works per block of query rows (their scores, lse and dP over all keys, kept for the
// block); dk and dv per block of key rows, over every query, from every query's lse and D
// computed first. The lse is the forward kiln.attention's second result (its gradient rule
// asks for it, so the scores are not computed again for the statistics). Every
// product is a small GEMM in register blocks (2 vectors x 8 rows over the head dim; 4 vectors
// x 4 rows for the sums into the result), the softmax statistics are
// reduced a vector of keys at a time. CPU schedules. Causal: a block's sums stop at its last
// row's last visible key (start at its first key's first visible query); the masked pairs
// inside that range are exact zeros.
#include "Product.h"

namespace kiln::codegen {

Func buildAttentionGrad(Builder &B) {
  const KernelSpec &k = B.k;
  if (B.gpu) throw std::runtime_error("kernel " + k.kind + " has CPU schedules only (for now)");
  AttentionGradOp op = B.op<AttentionGradOp>();
  const float scale = op.getScale().convertToFloat();
  const AttentionGradWrt wrt = op.getWrt();
  const bool causal = op.getMask() == MaskKind::causal;
  if (k.inputs.size() < 6) throw std::runtime_error("kernel " + k.kind + ": expected the lse operand");
  ImageParam Q = B.in[0], K = B.in[1];
  const int D = (int)k.inputs[0].dims[2], Dv = (int)k.inputs[2].dims[2];
  const int v = B.vec();
  // Rows per task and rows per register block of the result (kiln-tile-ops').
  const int R = B.need(B.sch.tile_rows, "tile_rows"), RB = B.need(B.sch.tile_m, "tile_m");
  Expr Lq = Q.dim(1).extent(), Lk = K.dim(1).extent(), off = Lk - Lq;
  Var c("c"), i("i"), j("j"), h("h");
  auto visible = [&](Expr key, Expr query) { return causal ? key <= query + off : Halide::Internal::const_true(); };

  /* THE ALGORITHM */
  // Rows read clamped: register blocks compute whole tiles past the last row (never stored).
  // Mixed precision (precision = bf16): q, k and v rounded to bfloat16 as the forward rounded
  // them (the gradient of attention over the rounded operands, passed to q, k and v as it is).
  // Grouped-query attention (G query heads per key head): every Func runs over query heads h,
  // reading key and value head h / G; the key and value gradients sum their group's heads.
  const int G = (int)(k.inputs[0].dims[0] / k.inputs[1].dims[0]);
  auto rows = [&](ImageParam X, Expr L, const char *name, bool round = false, bool kv = false) {
    Func f(name);
    Expr x = X(c, min(j, L - 1), kv && G > 1 ? h / G : Expr(h));
    f(c, j, h) = round && B.sch.precision == OperandPrecision::bf16 ? roundToBf16(x) : x;
    return f;
  };
  Func q = rows(Q, Lq, "q", true), kk = rows(K, Lk, "k", true, true), vv = rows(B.in[2], Lk, "v", true, true), o = rows(B.in[3], Lq, "o"),
       g = rows(B.in[4], Lq, "g");
  // Transposed copies ([rows, features] -> [features, rows] per head), made once: the vectors
  // of a product run along rows (keys or queries).
  auto transposed = [&](Func X, const char *name) {
    Func t(name);
    t(j, c, h) = X(c, j, h);
    B.s(t).compute_root().vectorize(j, v, TailStrategy::GuardWithIf);
    if (B.parallel()) B.s(t).parallel(h);
    return t;
  };
  // Query rows' scores s_row(j, i) (vectors over keys j); each row's log-sum-exp is the
  // forward attention's (its lse result), read clamped like the rows.
  Func kT = transposed(kk, "k_t");
  Product sRow = product("s_row", q, kT, D, j, i, h);
  Func lse("lse");
  lse(i, h) = B.in[5](min(i, Lq - 1), h);
  Func dRow("d_row");
  RDom re(0, Dv, "re");
  dRow(i, h) = 0.0f;
  dRow(i, h) += g(re, i, h) * o(re, i, h);

  Func out("out"), acc("acc");
  Var rb("rb"), jj("jj"), ro("ro"), ri("ri"), rbi("rbi"), t("t");
  const TailStrategy gw = TailStrategy::GuardWithIf;
  // The result's rows (query or key rows r, Dc features) in tasks of R per head, the tasks of
  // every head in parallel; within a task, register blocks of RB rows x the features (acc,
  // over the block's range of the other rows). Returns the task var.
  auto resultTasks = [&](Var r, int Dc) {
    const int wc = std::min(v, Dc);
    B.s(out).split(r, ro, ri, R, gw).split(ri, rb, rbi, RB, gw).reorder(c, rbi, rb, ro, h)
        .vectorize(c, wc, Dc % wc == 0 ? TailStrategy::RoundUp : gw);
    Var task = ro;
    if (B.parallel()) B.s(out).fuse(ro, h, t).parallel(t), task = t;
    B.s(acc).compute_at(out, rb).bound_extent(jj, RB).bound_extent(j, 1).vectorize(c, wc).unroll(c).unroll(jj);
    return task;
  };
  auto accUpdate = [&](const RDom &r, int Dc) {
    const int wc = std::min(v, Dc);
    B.s(acc.update()).reorder(c, jj, r, j, h).vectorize(c, wc).unroll(c).unroll(jj);
  };

  if (wrt == AttentionGradWrt::query) {
    // dq, per block of query rows: their scores, statistics, dP and dS over the keys the block
    // sees, then acc(c, jj, b) = Σ_key dS(key, b·RB + jj) k_key.
    Func vT = transposed(vv, "v_t");
    Product dp = product("dp", g, vT, Dv, j, i, h);
    Func ds("ds");
    ds(j, i, h) = select(visible(j, i), exp(sRow.s(j, i, h) * scale - lse(i, h)) * (dp.s(j, i, h) - dRow(i, h)), 0.0f);
    RDom rk(0, Lk, "rk");
    if (causal) rk.where(rk <= j * RB + (RB - 1) + off);
    acc(c, jj, j, h) = 0.0f;  // j: the block, jj: its row
    acc(c, jj, j, h) += ds(rk, j * RB + jj, h) * kk(c, rk, h);
    out(c, i, h) = acc(c, i % RB, i / RB, h) * scale;
    /* THE SCHEDULE */
    Var task = resultTasks(i, D);
    accUpdate(rk, D);
    scheduleProduct(B, sRow, out, task, j, i);
    scheduleProduct(B, dp, out, task, j, i);
    B.s(dRow).compute_at(out, task);
    B.s(ds).compute_at(out, task).vectorize(j, v, gw);
    return out;
  }
  // dk, dv, per block of key rows: every query's D first, then the block's columns of P over
  // the queries that see it (vectors over queries), and
  // acc(c, jj, b) = Σ_query P(or dS)(query, b·RB + jj) do(or q)_query.
  Func qT = transposed(q, "q_t");
  Product sCol = product("s_col", kk, qT, D, i, j, h);  // sCol(i, j): query i, key j
  Func p("p");
  p(i, j, h) = select(visible(j, i), exp(sCol.s(i, j, h) * scale - lse(i, h)), 0.0f);
  RDom rq(0, Lq, "rq");
  if (causal) rq.where(rq >= j * RB - off);
  acc(c, jj, j, h) = 0.0f;
  Func ds("ds");
  Product dpc;
  const bool value = wrt == AttentionGradWrt::value;
  if (value) {
    acc(c, jj, j, h) += p(rq, j * RB + jj, h) * g(c, rq, h);
    out(c, j, h) = acc(c, j % RB, j / RB, h);
  } else {
    Func gT = transposed(g, "g_t");
    dpc = product("dp_col", vv, gT, Dv, i, j, h);
    ds(i, j, h) = p(i, j, h) * (dpc.s(i, j, h) - dRow(i, h));
    acc(c, jj, j, h) += ds(rq, j * RB + jj, h) * q(c, rq, h);
    out(c, j, h) = acc(c, j % RB, j / RB, h) * scale;
  }
  /* THE SCHEDULE */
  B.s(dRow).compute_root();
  if (B.parallel()) B.s(dRow).parallel(h), B.s(dRow.update()).parallel(h);
  const int Dc = value ? Dv : D;
  Var task = resultTasks(j, Dc);
  accUpdate(rq, Dc);
  scheduleProduct(B, sCol, out, task, i, j);
  B.s(p).compute_at(out, task).vectorize(i, v, gw);
  if (!value) {
    scheduleProduct(B, dpc, out, task, i, j);
    B.s(ds).compute_at(out, task).vectorize(i, v, gw);
  }
  if (G == 1) return out;
  // A key head's gradient: the sum of its group's query heads' (each computed whole first).
  Func group("group");
  RDom rg(0, G, "rg");
  group(c, j, h) = 0.0f;
  group(c, j, h) += out(c, j, h * G + rg);
  B.s(out).compute_root();
  B.s(group).vectorize(c, std::min(v, Dc), gw);
  B.s(group.update()).vectorize(c, std::min(v, Dc), gw);
  if (B.parallel()) B.s(group).parallel(h), B.s(group.update()).parallel(h);
  return group;
}

}  // namespace kiln::codegen
