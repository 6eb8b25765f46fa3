// AttentionGrad.cpp - kiln.attention's backward, one kernel per operand gradient, in the
// FlashAttention manner: the probabilities are recomputed from each query row's log-sum-exp,
// a row (or a key's column) at a time, never stored [Lq, Lk].
//
//   s(j, i) = scale · q_i·k_j (masked: -inf),  lse_i = log Σ_j exp s(j, i)
//   P(j, i) = exp(s(j, i) - lse_i),  dP(j, i) = do_i·v_j,  D_i = do_i·o_i
//   dS = P · (dP - D);  dq_i = scale Σ_j dS k_j;  dk_j = scale Σ_i dS q_i;  dv_j = Σ_i P do_i
//
// dq works per query row (its scores, lse and dP over all keys, kept for the row; keys and
// values read through transposed copies, so a row's dot products are vectors over keys); dk and dv
// per key row, from every query's lse and D computed first. CPU schedules. Causal: every
// reduction over keys stops at the query's last visible key, and every reduction over queries
// starts at the key's first visible query (RDom::where, which Halide turns into the loop's
// bounds), so the masked half of the scores is neither computed nor visited.
#include "Kernels.h"

namespace kiln::codegen {

Func buildAttentionGrad(Builder &B) {
  const KernelSpec &k = B.k;
  if (B.gpu) throw std::runtime_error("kernel attention_grad has CPU schedules only (for now)");
  AttentionGradOp op = B.op<AttentionGradOp>();
  const float scale = op.getScale().convertToFloat();
  const bool causal = op.getMask() == "causal";
  const std::string wrt = op.getWrt().str();
  ImageParam Q = B.in[0], K = B.in[1], V = B.in[2], O = B.in[3], G = B.in[4];
  const int D = (int)k.inputs[0].dims[2], Dv = (int)k.inputs[2].dims[2];
  Expr Lq = Q.dim(1).extent(), Lk = K.dim(1).extent();
  Var c("c"), i("i"), j("j"), h("h");
  RDom rd(0, D, "rd"), re(0, Dv, "re");
  const float ninf = -std::numeric_limits<float>::infinity();
  auto visible = [&](Expr key, Expr query) { return causal ? key <= query + (Lk - Lq) : Expr(true); };

  /* THE ALGORITHM */
  // Transposed copies ([rows, features] -> [features, rows] per head), made once: a row of
  // scores is a vector over keys (or a column over queries), and its dot products then read
  // consecutive keys (queries) instead of one feature every D floats.
  auto transposed = [&](ImageParam X, const char *name) {
    Func t(name);
    t(j, c, h) = X(c, j, h);
    return t;
  };
  Func kT = transposed(K, "k_t"), vT = transposed(V, "v_t"), qT = transposed(Q, "q_t"), gT = transposed(G, "g_t");
  // Scores s(j, i) = q_i·k_j, recomputed where each kernel needs them: a query's row (vector
  // over keys j) or a key's column (vector over queries i).
  auto scores = [&](const char *name, bool column) {
    Func s(name);
    s(j, i, h) = 0.0f;
    s(j, i, h) += column ? qT(i, rd, h) * K(rd, j, h) : Q(rd, i, h) * kT(j, rd, h);
    return s;
  };
  auto dots = [&](const char *name, bool column) {  // dP(j, i) = do_i·v_j
    Func s(name);
    s(j, i, h) = 0.0f;
    s(j, i, h) += column ? gT(i, re, h) * V(re, j, h) : G(re, i, h) * vT(j, re, h);
    return s;
  };
  auto transposeOnce = [&](Func t) {
    B.s(t).compute_root().vectorize(j, B.vec(), TailStrategy::GuardWithIf);
    if (B.parallel()) B.s(t).parallel(h);
  };
  // The keys query i sees, the queries key j is seen by: with the causal mask, the loops' bounds.
  auto keysOf = [&](const char *name) {
    RDom r(0, Lk, name);
    if (causal) r.where(r <= i + (Lk - Lq));
    return r;
  };
  // Each query row's log-sum-exp and D.
  Func sRow = scores("s_row", false), mx("mx"), se("se"), lse("lse"), dRow("d_row");
  RDom rm = keysOf("rm"), rs = keysOf("rs"), rj = keysOf("rj");
  mx(i, h) = ninf;
  mx(i, h) = max(mx(i, h), select(visible(rm, i), sRow(rm, i, h) * scale, ninf));
  se(i, h) = 0.0f;
  se(i, h) += select(visible(rs, i), exp(sRow(rs, i, h) * scale - mx(i, h)), 0.0f);
  lse(i, h) = mx(i, h) + log(se(i, h));
  dRow(i, h) = 0.0f;
  dRow(i, h) += G(re, i, h) * O(re, i, h);

  Func out("out");
  Var row;
  // Rows of `r` (query or key rows) in tasks of 16 per head, the tasks of every head run in
  // parallel: a row is a plain loop variable, so what is computed at it covers exactly that
  // row (a row of a fused rows-and-heads variable made Halide bound it over several rows and
  // store the column of scores strided, at a multiple of the work).
  auto rowTasks = [&](Var r, int Dc) {
    Var ro("ro"), ri("ri"), t("t");
    const int wc = std::min(B.vec(), Dc);
    B.s(out).split(r, ro, ri, 16, TailStrategy::GuardWithIf).reorder(c, ri, ro, h)
        .vectorize(c, wc, Dc % wc == 0 ? TailStrategy::RoundUp : TailStrategy::GuardWithIf);
    if (B.parallel()) B.s(out).fuse(ro, h, t).parallel(t);
    return ri;
  };
  if (wrt == "query") {
    Func dp = dots("dp", false);
    transposeOnce(kT);
    transposeOnce(vT);
    Func ds("ds");
    ds(j, i, h) = select(visible(j, i), exp(sRow(j, i, h) * scale - lse(i, h)) * (dp(j, i, h) - dRow(i, h)), 0.0f);
    Func acc("acc");
    acc(c, i, h) = 0.0f;
    acc(c, i, h) += ds(rj, i, h) * K(c, rj, h) * scale;
    out(c, i, h) = acc(c, i, h);
    /* THE SCHEDULE: query rows as the row tasks; per row its scores, lse, D and dP over every
     * key (O(Lk) floats), then dq accumulated over the keys a vector of columns at a time. */
    row = rowTasks(i, D);
    for (Func f : {sRow, dp, ds}) B.s(f).compute_at(out, row).vectorize(j, B.vec(), TailStrategy::GuardWithIf);
    for (Func f : {sRow, dp})  // the dot products a vector of keys at a time
      B.s(f.update()).reorder(j, f.name() == dp.name() ? re : rd).vectorize(j, B.vec(), TailStrategy::GuardWithIf);
    for (Func f : {mx, se, dRow, acc}) B.s(f).compute_at(out, row);
    const int wc = std::min(B.vec(), D);
    B.s(acc.update()).vectorize(c, wc, D % wc == 0 ? TailStrategy::RoundUp : TailStrategy::GuardWithIf);
    return out;
  }
  // dk, dv: per key row j, over every query i.
  Func sCol = scores("s_col", true), p("p");
  transposeOnce(kT);
  transposeOnce(qT);
  RDom ri(0, Lq, "ri");
  if (causal) ri.where(ri >= j - (Lk - Lq));
  p(j, i, h) = select(visible(j, i), exp(sCol(j, i, h) * scale - lse(i, h)), 0.0f);
  std::vector<Func> perKey{sCol, p};
  Func acc("acc");
  acc(c, j, h) = 0.0f;
  if (wrt == "value") {
    acc(c, j, h) += p(j, ri, h) * G(c, ri, h);
  } else {
    Func dp = dots("dp", true), ds("ds");
    transposeOnce(gT);
    ds(j, i, h) = p(j, i, h) * (dp(j, i, h) - dRow(i, h));
    acc(c, j, h) += ds(j, ri, h) * Q(c, ri, h) * scale;
    perKey.push_back(dp);
    perKey.push_back(ds);
  }
  out(c, j, h) = acc(c, j, h);
  /* THE SCHEDULE: every query's lse and D first (query rows as tasks, each over all keys),
   * then key rows as the row tasks, each recomputing its column of scores over every query. */
  B.s(lse).compute_root();
  B.s(dRow).compute_root();
  B.s(mx).compute_at(lse, i);
  B.s(se).compute_at(lse, i);
  B.s(sRow).compute_at(lse, i).vectorize(j, B.vec(), TailStrategy::GuardWithIf);
  B.s(sRow.update()).reorder(j, rd).vectorize(j, B.vec(), TailStrategy::GuardWithIf);
  if (B.parallel()) {
    B.s(lse).parallel(h);
    B.s(dRow).parallel(h);
    B.s(dRow.update()).parallel(h);
  }
  row = rowTasks(j, wrt == "value" ? Dv : D);
  // A key's column over the queries, stored queries innermost: the vectors over i are dense.
  for (Func f : perKey)
    B.s(f).compute_at(out, row).reorder_storage(i, j, h).vectorize(i, B.vec(), TailStrategy::GuardWithIf);
  B.s(sCol.update()).reorder(i, rd).vectorize(i, B.vec(), TailStrategy::GuardWithIf);
  if (perKey.size() > 2) B.s(perKey[2].update()).reorder(i, re).vectorize(i, B.vec(), TailStrategy::GuardWithIf);
  const int Dc = wrt == "value" ? Dv : D, wc = std::min(B.vec(), Dc);
  B.s(acc).compute_at(out, row);
  B.s(acc.update()).vectorize(c, wc, Dc % wc == 0 ? TailStrategy::RoundUp : TailStrategy::GuardWithIf);
  return out;
}

}  // namespace kiln::codegen
